"""Who is in the universe when: NASDAQ-100 point-in-time membership, and how a dataset
discloses whether its universe is point-in-time (survivorship)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.bars import Bars
from finpod.data.calendar import TZ
from finpod.errors import FinpodError

#: Where the shipped sample lives (the repository's data/sample folder).
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "sample"
MEMBERSHIP = "nasdaq100_membership.csv"


def load_membership(path: Path | None = None) -> pd.DataFrame:
    """Point-in-time NASDAQ-100 membership: ``symbol, name, start, end`` (end NaT = still in)."""
    path = path or SAMPLE_DIR / MEMBERSHIP
    if not path.exists():
        raise FinpodError(
            f"membership file {path} not found", "run from a finpod checkout with data/sample"
        )
    m = pd.read_csv(path)
    m = m.rename(columns={"opt-in": "start", "opt-out": "end"})
    m["start"] = pd.to_datetime(m["start"])
    m["end"] = pd.to_datetime(m["end"])
    return m


def nasdaq100_members(
    on: str | pd.Timestamp | None = None, start: str | None = None, end: str | None = None
) -> list[str]:
    """Symbols that were members on ``on``, or at any time in ``[start, end]``."""
    m = load_membership()
    if on is not None:
        d = pd.Timestamp(on)
        sel = (m["start"] <= d) & (m["end"].isna() | (m["end"] > d))
    else:
        lo = pd.Timestamp(start or "1900-01-01")
        hi = pd.Timestamp(end or "2100-01-01")
        sel = (m["start"] <= hi) & (m["end"].isna() | (m["end"] > lo))
    return sorted(m.loc[sel, "symbol"].astype(str).str.upper().unique())


def membership_mask(bars: Bars) -> np.ndarray:
    """(T, N) bool: ticker was a NASDAQ-100 member on that bar's session."""
    m = load_membership()
    dates = bars.timestamps.tz_convert(TZ).tz_localize(None).normalize()
    mask = np.zeros(bars.close.shape, dtype=bool)
    for j, tic in enumerate(bars.tickers):
        for _, row in m[m["symbol"].str.upper() == tic].iterrows():
            hi = row["end"] if pd.notna(row["end"]) else pd.Timestamp("2100-01-01")
            mask[:, j] |= np.asarray((dates >= row["start"]) & (dates < hi))
    return mask


def apply_membership(bars: Bars, report: dict) -> None:
    """Point-in-time universe: outside its index membership a ticker keeps its real prices
    and stays tradable (a held position can be sold and moves with the stock), but it is not
    ``buyable``. Sets ``bars.buyable`` and counts the sell-only bars in ``report``."""
    member = membership_mask(bars)
    bars.buyable = member if bars.buyable is None else bars.buyable & member
    report["sell_only_outside_membership"] = int((bars.tradable & ~member).sum())


def universe_info(point_in_time: bool, note: str) -> dict:
    """The manifest's ``universe`` disclosure: ``{"point_in_time": bool, "note": str}``."""
    return {"point_in_time": bool(point_in_time), "note": note}


__all__ = [
    "apply_membership",
    "load_membership",
    "membership_mask",
    "nasdaq100_members",
    "universe_info",
]
