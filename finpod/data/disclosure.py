"""What a dataset's manifest discloses to a reader: is the universe point-in-time, which
index is the benchmark. One definition for ``finpod info``, the backtest report and
notebooks; reads manifests of every format (1: strings, 2: tables)."""

from __future__ import annotations

import re
from typing import Any

#: The note of a universe whose manifest says nothing more than "not point-in-time".
HINDSIGHT_NOTE = (
    "not point-in-time: the tickers may have been chosen with hindsight (survivorship bias)"
)


def benchmark_name(manifest: dict[str, Any]) -> str | None:
    """The benchmark's name in a manifest of any format (1: a string, 2: a dict)."""
    b = manifest.get("benchmark")
    if isinstance(b, dict):
        return b.get("name") or b.get("symbol") or b.get("ticker")
    return b


def benchmark_label(manifest: dict[str, Any] | None) -> str:
    """What a report's ``index`` column is: the dataset's index level, without costs."""
    manifest = manifest or {}
    name = benchmark_name(manifest)
    bench = manifest.get("benchmark")
    source = bench.get("source") if isinstance(bench, dict) else None
    what = f"{name} index level" if name else "index level"
    if source:
        what += f" ({source})"
    return (
        f"index = {what}, a price series with no costs, fills or cash (not a tradable "
        "strategy); the other benchmarks trade through the same env as the agent"
    )


def universe_disclosure(manifest: dict[str, Any]) -> dict[str, Any]:
    """Whether the dataset's universe is point-in-time, and a sentence saying so.

    Returns ``{"name", "point_in_time": bool | None, "note", "text"}``. A format-2
    manifest's ``universe`` table is read as is. A format-1 manifest (the universe as a
    description string) is not point-in-time unless the string says it is; its
    ``notes`` about survivorship join the note. A manifest with no universe at all:
    ``point_in_time`` None (unknown), and the text says so.
    """
    universe = manifest.get("universe")
    notes = [str(n) for n in manifest.get("notes") or []]
    name: Any = None
    if isinstance(universe, dict):
        name = universe.get("name")
        pit = universe.get("point_in_time")
        pit = bool(pit) if isinstance(pit, bool) else None
        note = str(universe.get("note") or "")
    elif universe is None:
        pit, note = None, ""
    else:
        name = str(universe)
        pit = "point-in-time" in name.lower() and "not point-in-time" not in name.lower()
        survivorship = [n for n in notes if "survivorship" in n.lower()]
        note = "; ".join(survivorship) or ("point-in-time universe" if pit else HINDSIGHT_NOTE)
    if pit is True:
        text = f"Universe is point-in-time ({note})." if note else "Universe is point-in-time."
    elif pit is False and "survivorship bias" in note.lower():
        text = (
            f"Universe is not point-in-time: {note}. Stocks that left the universe earlier are "
            "missing, which flatters every strategy in this report."
        )
    elif pit is False:
        dates = re.findall(r"\d{4}-\d{2}-\d{2}", note)
        as_of = f"members as of {dates[0]}" if dates else "a fixed list of members"
        text = (
            f"Universe is not point-in-time: {as_of}: survivorship bias. Stocks that left the "
            "universe before that date are missing, which flatters every strategy in this "
            f"report ({note})."
        )
    else:
        text = (
            "Universe: point-in-time status unknown (the dataset does not say); results may "
            "carry survivorship bias."
        )
    return {"name": name, "point_in_time": pit, "note": note, "text": text}
