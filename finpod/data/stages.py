"""Stages of cleaning on the session grid: filling missing bars from the past, delisting
tickers whose data ends inside the range, and listing large moves."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.data.bars import PRICE_COLUMNS
from finpod.data.calendar import session_of

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
        (float32 arrays, filled mask). Entries before the first observation stay NaN
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
        out[col] = a.astype(np.float32)
    out["volume"] = np.where(observed, arrays["volume"], 0.0).astype(np.float32)
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
