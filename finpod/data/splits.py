"""Splits of a dataset's time line: ``train``, ``validation`` and ``backtest`` row ranges.

Splits (``train``, ``validation``, ``backtest``) are contiguous, in time order, never
overlap, and are separated by an embargo of whole sessions (default 5 for daily bars, 1
for intraday bars): with orders filled at bar t+1, the last training step already looks
one bar ahead, so a gap keeps
every price a training episode can touch out of the validation period (and likewise
validation → backtest). Features are computed once over the whole time line; they are
causal, so a validation bar's features use only earlier prices (possibly from the train
period), never later ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ, session_of
from finpod.errors import FinpodError

SPLITS = ("train", "validation", "backtest")
#: Fractions of the sessions used when a source has no default split dates.
DEFAULT_FRACTIONS = (0.70, 0.15, 0.15)
#: Sessions left out between consecutive splits.
DEFAULT_EMBARGO_SESSIONS = 5
#: Sessions between splits for intraday bars (one whole day already separates them).
INTRADAY_EMBARGO_SESSIONS = 1
#: With fewer sessions than this (and no dates) the 70/15/15 cut is made on bars.
MIN_SESSIONS_TO_SPLIT_BY_SESSION = 20


def plan_splits(
    timestamps: pd.DatetimeIndex,
    dates: dict[str, tuple[str | None, str | None]] | None = None,
    embargo_sessions: int = DEFAULT_EMBARGO_SESSIONS,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
) -> dict[str, dict[str, Any]]:
    """Row ranges of the three splits on ``timestamps``.

    Args:
        timestamps: (T,) bar times of the dataset.
        dates: ``{split: (first_date, last_date)}`` inclusive; ``None`` uses ``fractions``
            of the sessions in time order. A missing split or bound is an error.
        embargo_sessions: at least this many whole sessions between the last bar of one
            split and the first bar of the next (taken from the start of the later split).
        fractions: train/validation/backtest shares of the sessions when ``dates`` is None.

    Returns:
        ``{split: {"start", "end", "start_index", "stop_index", "bars", "sessions"}}``.
    """
    if embargo_sessions < 0:
        raise FinpodError("the embargo must be ≥ 0 sessions")
    sess = session_of(timestamps)
    uniq, first_row = np.unique(sess, return_index=True)
    if dates is None and len(uniq) < MIN_SESSIONS_TO_SPLIT_BY_SESSION:
        # Too few sessions to cut whole days (a week of minute bars): cut by bars instead,
        # the embargo then counting bars.
        uniq = np.arange(len(sess), dtype=np.int64)
        first_row = np.arange(len(sess))
    n_sess = len(uniq)
    stop_row = np.r_[first_row[1:], len(sess)]
    ranges: dict[str, tuple[int, int]] = {}
    if dates is None:
        if abs(sum(fractions) - 1) > 1e-9 or min(fractions) <= 0:
            raise FinpodError(f"split fractions {fractions} must be positive and sum to 1")
        a = int(round(fractions[0] * n_sess))
        b = int(round((fractions[0] + fractions[1]) * n_sess))
        ranges = {"train": (0, a), "validation": (a, b), "backtest": (b, n_sess)}
    else:
        unknown = set(dates) - set(SPLITS)
        if unknown:
            raise FinpodError(
                f"unknown split(s) {sorted(unknown)}", "use train, validation and backtest"
            )
        for name in SPLITS:
            if name not in dates:
                raise FinpodError(
                    f"no dates given for the {name} split", "give all three splits or none"
                )
            lo, hi = dates[name]
            lo_ns = _date_ns(lo) if lo is not None else int(uniq[0])
            hi_ns = _date_ns(hi) if hi is not None else int(uniq[-1])
            if hi_ns < lo_ns:
                raise FinpodError(f"the {name} split ends ({hi}) before it starts ({lo})")
            ranges[name] = (
                int(np.searchsorted(uniq, lo_ns)),
                int(np.searchsorted(uniq, hi_ns, side="right")),
            )
        for prev, nxt in zip(SPLITS, SPLITS[1:], strict=False):
            if ranges[nxt][0] < ranges[prev][1]:
                raise FinpodError(
                    f"the {prev} and {nxt} splits overlap ({dates[prev]} vs {dates[nxt]})",
                    f"make {nxt} start after {prev} ends",
                )
    out: dict[str, dict[str, Any]] = {}
    prev_stop = None
    for name in SPLITS:
        s0, s1 = ranges[name]
        if prev_stop is not None:
            s0 = max(s0, prev_stop + embargo_sessions)
        if s1 <= s0:
            raise FinpodError(
                f"the {name} split is empty ({n_sess} sessions in the data, embargo {embargo_sessions})",
                "widen its dates, shorten the embargo or use more data",
            )
        prev_stop = s1
        out[name] = window_record(timestamps, first_row, stop_row, s0, s1, sess)
    return out


def window_record(
    timestamps: pd.DatetimeIndex,
    first_row: np.ndarray,
    stop_row: np.ndarray,
    s0: int,
    s1: int,
    session_ids: np.ndarray | None = None,
) -> dict[str, Any]:
    """The manifest's record of the window of units ``[s0, s1)``: its first and last bar
    times, row range ``[start_index, stop_index)``, bars and sessions. ``first_row`` and
    ``stop_row`` are each unit's first row and one past its last; a unit is a session,
    or a bar when a short dataset is cut by bars, and then ``session_ids`` (one per row)
    counts the sessions the window touches."""
    r0, r1 = int(first_row[s0]), int(stop_row[s1 - 1])
    sessions = s1 - s0 if session_ids is None else len(np.unique(session_ids[r0:r1]))
    return {
        "start": str(timestamps[r0]),
        "end": str(timestamps[r1 - 1]),
        "start_index": r0,
        "stop_index": r1,
        "bars": r1 - r0,
        "sessions": int(sessions),
    }


def _date_ns(x: str) -> int:
    t = pd.Timestamp(x)
    if t.tzinfo is not None:
        t = t.tz_convert(TZ).tz_localize(None)
    return int(t.normalize().value)
