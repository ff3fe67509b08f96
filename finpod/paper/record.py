"""The paper trading record of a run (``RUN/paper/journal.jsonl``) as a table and a page.

One row per decision: its bar, the bars it was taken on (feed, and how late the plan served
them: the free plan's SIP bars 15 minutes), the account value and cash, the orders sent, filled,
partly filled or cancelled and rejected, and the largest gap between the weight the agent
intended and the weight the account held after the fills (the ``fills`` line written at
the next decision; empty until then). ``finpod report`` writes the page beside the
tearsheet when the run has traded on paper.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from finpod.atomic import atomic_write_text
from finpod.backtest.page import frame_table, html_document, png_uri
from finpod.paper.state import read_journal


def paper_record(run_dir: Path) -> pd.DataFrame:
    """One row per decision (module docstring); empty when the run never traded on paper."""
    records = read_journal(run_dir)
    fills = {r["decision"]: r for r in records if r.get("kind") == "fills"}
    rows = []
    for r in records:
        if r.get("kind") != "decision":
            continue
        done = fills.get(r["decision"])
        statuses = [o.get("status") for o in (done or {}).get("orders", [])]
        gap = float("nan")
        if done:
            intended, filled = r["intended_weights"], done["filled_weights"]
            gap = max(abs(intended[s] - filled.get(s, 0.0)) for s in intended)
        lag = r.get("delay_min")
        rows.append(
            {
                "decision": str(r["decision"])[:16],
                "bars": f"{r.get('feed', '')}"
                + ("" if lag is None else f", {lag:g} min late" if lag else ", real time"),
                "account value": float(r["account_value"]),
                "cash": float(r["cash"]),
                "orders": len(r.get("orders", [])),
                "filled": statuses.count("filled"),
                "partial or cancelled": sum(
                    s in ("partially_filled", "canceled", "expired") for s in statuses
                ),
                "rejected": statuses.count("rejected"),
                "max |intended - filled| weight": gap,
            }
        )
    return pd.DataFrame(rows)


def write_paper_page(run_dir: Path, path: Path, title: str) -> Path | None:
    """``path``: the account value over the decisions and the record's table (None when
    the run never traded on paper)."""
    frame = paper_record(run_dir)
    if frame.empty:
        return None

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        ax.plot(pd.to_datetime(frame["decision"]), frame["account value"], marker=".")
        ax.set_ylabel("account value at the decision ($)")
        ax.set_title("paper account")

    sections = [
        "<h2>Account value</h2>",
        f"<img src='{png_uri(draw)}' alt='paper account value'>",
        "<h2>Decisions</h2>",
        "<p class='note'>Intended weights are the agent's, after every execution control, "
        "at the decision bar's close; filled weights are the account's at the next "
        "decision. Full record: RUN/paper/journal.jsonl.</p>",
        frame_table(frame, max_rows=500),
    ]
    meta = [html.escape(f"{len(frame)} decisions"), html.escape(f"run {run_dir.name}")]
    text = html_document(html.escape(title), meta, sections)
    return atomic_write_text(path, text)
