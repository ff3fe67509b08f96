"""What every source returns (:class:`LoadedSource`) and the helpers they share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from finpod.data.bars import Bars
from finpod.data.universe import apply_membership, universe_info
from finpod.errors import FinpodError


@dataclass
class LoadedSource:
    """What a source hands to the dataset builder.

    Attributes:
        bars: cleaned bars on the calendar grid (with optional ``buyable``/``delisted``).
        report: the cleaning report.
        options: the source options, recorded in the manifest.
        universe: one-line name of the universe.
        universe_info: ``{"point_in_time": bool, "note": str}``: survivorship disclosure.
        benchmark: index level on ``bars.timestamps`` (aligned causally), or None.
        benchmark_info: ``{"name", "kind", "source"}`` of the benchmark, or None.
        default_splits: the source's argued split dates, or None (70/15/15 %).
        notes: lines shown by ``finpod info``.
    """

    bars: Bars
    report: dict
    options: dict
    universe: str
    universe_info: dict = field(default_factory=dict)
    benchmark: pd.Series | None = None
    benchmark_info: dict | None = None
    default_splits: dict[str, tuple[str, str]] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def benchmark_name(self) -> str | None:
        return None if self.benchmark_info is None else self.benchmark_info.get("name")


def ticker_list(tickers: list[str] | str | None) -> list[str] | None:
    """``"AAPL, msft"`` or a list → ``["AAPL", "MSFT"]``; None stays None."""
    if tickers is None:
        return None
    if isinstance(tickers, str):
        tickers = [t for t in re.split(r"[,\s]+", tickers) if t]
    return [t.strip().upper() for t in tickers if t.strip()]


def check_known(asked: list[str] | None, known: list[str], where: str) -> None:
    """Every asked ticker must exist in ``known``; the error names the unknown ones."""
    if asked is None:
        return
    unknown = sorted(set(asked) - set(known))
    if unknown:
        raise FinpodError(
            f"unknown ticker(s) {', '.join(unknown)} in {where}",
            f"{where} has {len(known)} tickers, e.g. {', '.join(sorted(known)[:5])}",
        )


def progress_advance(progress: Any, label: str):
    """A callback ``advance(n)`` on a new indeterminate task of ``progress``."""
    task = progress.add_task(label, total=None)
    return lambda n: progress.advance(task, n)


def vendor_universe(
    bars: Bars,
    report: dict,
    tickers: list[str],
    start: str,
    end: str,
    point_in_time: bool,
    empty: list[str],
    vendor: str,
    no_data: str,
) -> dict:
    """The universe disclosure of a vendor's download, with its point-in-time membership.

    The asked tickers the vendor returned nothing for (``empty``) go into the report as
    ``no_data_from_<vendor>``. A point-in-time universe (every NASDAQ-100 member during
    ``[start, end]``) gets its membership mask on ``bars`` (buyable only while a member),
    and stays point-in-time only when no member is missing: a member without data (often
    delisted) is survivorship bias. ``no_data`` is how the note says a member is missing,
    e.g. ``"no data on Yahoo (often delisted"``.
    """
    empty = sorted(set(empty))
    if empty:
        report[f"no_data_from_{vendor}"] = empty
    if not point_in_time:
        return universe_info(
            False,
            f"tickers chosen by the user ({', '.join(tickers[:5])}{'…' if len(tickers) > 5 else ''}) "
            f"for {start} → {end}: if chosen with hindsight (e.g. today's index members), "
            "survivorship bias",
        )
    apply_membership(bars, report)
    note = (
        f"NASDAQ-100 point-in-time: every member during {start} → {end}, each buyable only "
        "while in the index"
    )
    if empty:
        note += (
            f"; {len(empty)} member(s) have {no_data}: {' '.join(empty[:8])}), so some "
            "survivorship bias remains"
        )
    return universe_info(not empty, note)
