"""Stages of cleaning on the session grid: filling missing bars from the past, delisting
tickers whose data ends inside the range, and listing large moves."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.data.bars import PRICE_COLUMNS
from finpod.data.calendar import TZ, session_of

#: What happens to a position in a ticker whose data ends inside the range (the env applies
#: it; the cleaner records it in the report).
DELISTING_RULE = "a delisted position is converted to cash at its last valid close"


def delisting_mask(grid: pd.DatetimeIndex, last: np.ndarray) -> np.ndarray:
    """(T, N) bool: True after each ticker's last bar when that bar's session ends before the
    grid's last session (data ending inside the range = delisted), for good.

    A ticker whose last bar is in the final session (e.g. a missing last minute) is not
    delisted: its missing bars are ordinary forward-filled gaps.
    """
    T = len(grid)
    sess = session_of(grid) if T else np.zeros(0, dtype=np.int64)
    ended = (last >= 0) & (last < T - 1)
    ended &= sess[np.clip(last, 0, max(T - 1, 0))] < (sess[-1] if T else 0)
    rows = np.arange(T)[:, None]
    return ended[None, :] & (rows > last[None, :])


def forward_fill(
    arrays: dict[str, np.ndarray], observed: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Fill unobserved bars from the past only: a flat bar at the last close, volume 0.

    Args:
        arrays: ``open/high/low/close/volume`` (T, N) with NaN where not observed.
        observed: (T, N) bool.

    Returns:
        (arrays in their input type, float64 from the cleaner, and the filled mask).
        Entries before the first observation stay NaN
        (prices) / 0 (volume) and are not ``filled``.
    """
    T, N = observed.shape
    rows = np.where(observed, np.arange(T)[:, None], -1)
    np.maximum.accumulate(rows, axis=0, out=rows)
    listed = rows >= 0
    filled = listed & ~observed
    src = np.maximum(rows, 0)
    cols = np.arange(N)[None, :]
    last_close = arrays["close"][src, cols]
    out: dict[str, np.ndarray] = {}
    for col in PRICE_COLUMNS:
        a = np.where(observed, arrays[col], np.where(listed, last_close, np.nan))
        out[col] = a.astype(arrays[col].dtype, copy=False)
    out["volume"] = np.where(observed, arrays["volume"], 0.0).astype(
        arrays["volume"].dtype, copy=False
    )
    return out, filled


#: A close-to-close move larger than this (in log terms, ≈ ±40 %) is listed in the report:
#: often a split, reverse split or spin-off the vendor did not adjust.
LARGE_MOVE_LOG = 0.5


def large_moves(
    close: np.ndarray, observed: np.ndarray, grid: pd.DatetimeIndex, names: list[str]
) -> dict[str, list[str]]:
    """``{ticker: [bar time, …]}`` of moves beyond :data:`LARGE_MOVE_LOG` between two real
    bars. Reported, never changed: the cleaner cannot tell a crash from a bad adjustment."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(np.diff(np.log(close.astype(np.float64)), axis=0))
    hit = (r > LARGE_MOVE_LOG) & observed[1:] & observed[:-1]
    out: dict[str, list[str]] = {}
    for t, j in zip(*np.nonzero(hit), strict=True):
        out.setdefault(names[j], []).append(str(grid[t + 1]))
    return out


def duplicate_rows(
    ts_ns: np.ndarray, tic_codes: np.ndarray, vals: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(exact, clash): (n,) bool masks of rows sorted by (timestamp, ticker). ``exact``:
    a copy of the row before it (same key, same values; the first copy stays); ``clash``:
    every row of a key whose rows (after the copies) disagree: neither can be trusted."""
    n = len(ts_ns)
    exact = np.zeros(n, dtype=bool)
    clash = np.zeros(n, dtype=bool)
    same_key = (np.diff(ts_ns) == 0) & (np.diff(tic_codes) == 0)
    if not same_key.any():
        return exact, clash
    exact[1:] = same_key & np.all(vals[1:] == vals[:-1], axis=1)
    rest = np.flatnonzero(~exact)
    same = (np.diff(ts_ns[rest]) == 0) & (np.diff(tic_codes[rest]) == 0)
    clash[rest[1:][same]] = True
    clash[rest[:-1][same]] = True
    return exact, clash


def outside_range(
    stamps: pd.Series, start: str | pd.Timestamp | None, end: str | pd.Timestamp | None
) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): (n,) bool masks of tz-aware ``stamps`` before ``start`` or after
    ``end`` (inclusive bounds; a date-only ``end`` takes in its whole day)."""
    before = np.zeros(len(stamps), dtype=bool)
    after = np.zeros(len(stamps), dtype=bool)
    if start is not None:
        before = (stamps < _as_ny(start)).to_numpy(dtype=bool)
    if end is not None:
        day = pd.Timestamp(end) == pd.Timestamp(end).normalize()
        hi = _as_ny(end) + (pd.Timedelta(days=1) if day else pd.Timedelta(0))
        after = (stamps >= hi if day else stamps > hi).to_numpy(dtype=bool)
    return before, after


def _as_ny(x: str | pd.Timestamp) -> pd.Timestamp:
    t = pd.Timestamp(x)
    return t.tz_localize(TZ) if t.tzinfo is None else t.tz_convert(TZ)


def bar_faults(prices: np.ndarray, volume: np.ndarray) -> tuple[tuple[str, np.ndarray], ...]:
    """Why each bar is impossible, as ``(cause, (n,) bool)`` pairs with at most one cause
    per row (the first that applies): a missing or infinite price, a price ≤ 0, high below
    low, an infinite or negative volume. ``prices``: (n, 4) open, high, low, close."""
    nan_price = np.isnan(prices).any(axis=1)
    # ±inf (a vendor's overflow, a spreadsheet's #DIV/0!) is no price: never tradable data.
    inf_price = (~nan_price) & np.isinf(prices).any(axis=1)
    missing = nan_price | inf_price
    nonpos = (~missing) & (prices <= 0).any(axis=1)
    hl = (~missing) & (~nonpos) & (prices[:, 1] < prices[:, 2])
    bad_vol = ~np.isfinite(volume)
    earlier = missing | nonpos | hl
    return (
        ("missing_price", nan_price),
        ("non_finite_price", inf_price),
        ("non_positive_price", nonpos),
        ("high_below_low", hl),
        ("non_finite_volume", bad_vol & ~earlier),
        ("negative_volume", (volume < 0) & ~bad_vol & ~earlier),
    )
