"""Fold plans: new train / validation / backtest boundaries over the same bars.

A walk-forward cuts one dataset's time line into folds. Backtest windows tile the end of
the time line back to back (fold 0 is the earliest); each fold's validation window lies
just before its backtest window and its train window just before that:

- ``rolling``: the train window has a fixed length and moves with the fold;
- ``expanding``: the train window always starts at the first bar.

Window lengths (:class:`finpod.grammar.Length`, ``docs/grammar.md``) are calendar spans
(``"1y"``, ``"6mo"``, ``"4w"``, ``"10d"``) measured back from the start of the next window,
so yearly folds are calendar years; or counts of sessions (``"250"`` or
``"250 sessions"``). Windows are made of whole sessions (minute bars
included). An embargo of whole sessions is cut from the *end* of the earlier window
(train before validation, validation before backtest), as
:func:`finpod.data.dataset.plan_splits` keeps splits apart: with fills at bar t + 1 the
last training step looks one bar ahead. The backtest windows themselves keep every
session, so the stitched out-of-sample record has no gaps.

The row ranges have the shape of a dataset manifest's ``splits`` entry (``start``,
``end``, ``start_index``, ``stop_index``, ``bars``, ``sessions``), over the rows of the
whole dataset (``load_split(dataset, "all")``). Features are computed once over the
whole time line and are causal, so re-splitting never lets a bar see a later one.
A fold whose backtest window shares a session with its own train or validation window is
refused (:func:`check_out_of_sample`): the plan never cuts one, and a job checks the rows
it is given before it trains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from finpod.data.calendar import get_calendar, session_of
from finpod.data.dataset import DEFAULT_EMBARGO_SESSIONS, INTRADAY_EMBARGO_SESSIONS
from finpod.data.splits import SPLITS, window_record
from finpod.errors import FinpodError
from finpod.grammar import Length, parse_length

SCHEMES = ("rolling", "expanding")
#: Fewest bars a fold's train, validation or backtest window may keep after the embargo.
MIN_WINDOW_BARS = 10
#: Calendar units of a window length and the ``pd.DateOffset`` keyword of each.
_OFFSETS = {"y": "years", "mo": "months", "w": "weeks", "d": "days"}


def calendar_offset(length: Length) -> pd.DateOffset:
    """A calendar window length as a ``pd.DateOffset`` (not for a count of sessions)."""
    return pd.DateOffset(**{_OFFSETS[length.unit]: length.count})


@dataclass(frozen=True)
class FoldSpec:
    """How to cut the folds (the ``finpod walkforward`` window options)."""

    scheme: str = "rolling"
    """``rolling`` (fixed-length train window) or ``expanding`` (train from the first bar)."""
    train: str = "3y"
    """Train window length as written (rolling; ignored by expanding except as the
    minimum); read by :func:`check_spec`."""
    validation: str = "1y"
    """Validation window length (checkpoint and seed selection read only this)."""
    backtest: str = "1y"
    """Backtest window length; also the step from one fold to the next."""
    folds: int | None = None
    """Number of folds (the latest ones); None: as many as fit."""
    embargo: int | None = None
    """Sessions cut between windows; None: 5 for daily bars, 1 for intraday bars."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Fold:
    """One fold: three contiguous, non-overlapping row ranges of the whole dataset."""

    index: int
    """0 = the earliest fold."""
    splits: dict[str, dict[str, Any]]
    """``{split: {"start", "end", "start_index", "stop_index", "bars", "sessions"}}``."""

    def rows(self, split: str) -> tuple[int, int]:
        """(start, stop) row positions of ``split`` in the whole dataset."""
        s = self.splits[split]
        return int(s["start_index"]), int(s["stop_index"])

    @property
    def name(self) -> str:
        return f"fold-{self.index:02d}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "splits": self.splits}


def default_embargo(bar: str) -> int:
    """Sessions between windows by default: 5 for daily bars, 1 intraday (as datasets)."""
    return DEFAULT_EMBARGO_SESSIONS if bar == "1d" else INTRADAY_EMBARGO_SESSIONS


def check_spec(spec: FoldSpec) -> dict[str, Length]:
    """The settings of ``spec`` that need no data (scheme, folds, embargo, window
    lengths), each a one-line :class:`FinpodError` when wrong; the parsed lengths."""
    if spec.scheme not in SCHEMES:
        raise FinpodError(f"unknown scheme {spec.scheme!r}", "use rolling or expanding")
    if spec.folds is not None and spec.folds < 1:
        raise FinpodError(f"--folds must be at least 1, got {spec.folds}", "e.g. --folds 6")
    if spec.embargo is not None and int(spec.embargo) < 0:
        raise FinpodError(
            f"the embargo must be ≥ 0 sessions, got {spec.embargo}", "e.g. --embargo 5"
        )
    return {
        "train": parse_length(spec.train, "train"),
        "validation": parse_length(spec.validation, "validation"),
        "backtest": parse_length(spec.backtest, "backtest"),
    }


def plan_folds(
    timestamps: pd.DatetimeIndex,
    spec: FoldSpec,
    bar: str = "1d",
    calendar: str = "XNYS",
) -> list[Fold]:
    """The folds of ``spec`` over bars at ``timestamps`` (T,), earliest first.

    Raises :class:`FinpodError` (one line) when the settings are invalid or the data is too
    short for even one fold (or for the number of folds asked for).
    """
    lengths = check_spec(spec)
    embargo = default_embargo(bar) if spec.embargo is None else int(spec.embargo)
    sess = session_of(timestamps)
    days, first_row = np.unique(sess, return_index=True)
    stop_row = np.r_[first_row[1:], len(sess)]
    n_sess = len(days)
    if n_sess == 0:
        raise FinpodError("the dataset has no bars", "build it again with finpod download")
    cal = get_calendar(calendar)
    first_day = pd.Timestamp(days[0])

    end_date = pd.Timestamp(days[-1]) + pd.Timedelta(days=1)

    def back(stop: int, anchor: pd.Timestamp | None, length: Length, times: int = 1):
        """(first session, its calendar anchor) of the window of ``times`` × ``length``
        ending before session ``stop`` (calendar windows are measured from ``anchor``, the
        date the next window starts on); (None, None) when it starts before the data."""
        if length.unit == "sessions":
            start = stop - length.count * times
            return (start, None) if start >= 0 else (None, None)
        if anchor is None:
            anchor = pd.Timestamp(days[stop]) if stop < n_sess else end_date
        try:
            begin = anchor - calendar_offset(length) * times
        except (OverflowError, ValueError):  # out of the range of a date
            return None, None  # millennia before the data
        if begin < first_day:
            if begin < cal.first_session:
                # Earlier than the exchange calendar knows: the exchange had sessions
                # between the calendar's first and the data's first, which the data lacks
                # (or the window reaches before the calendar's records).
                return None, None
            # The window fits only if the exchange had no session the data lacks.
            missing = cal.sessions_in_range(begin, first_day - pd.Timedelta(days=1))
            if len(missing):
                return None, None
        return int(np.searchsorted(days, begin.value)), begin

    folds: list[tuple[int, int, int, int, int, int]] = []
    stop, shortfall = n_sess, None
    while spec.folds is None or len(folds) < spec.folds:
        # Backtest windows are measured from the end of the data (no calendar drift).
        bt0, bt_date = back(n_sess, end_date, lengths["backtest"], len(folds) + 1)
        v0, v_date = (None, None) if bt0 is None else back(bt0, bt_date, lengths["validation"])
        t0 = None if v0 is None else back(v0, v_date, lengths["train"])[0]
        if spec.scheme == "expanding" and v0 is not None:
            t0 = 0 if t0 is not None else None  # the train length is the minimum
        if bt0 is None or v0 is None or t0 is None:
            shortfall = "starts before the data"
            break
        ranges = (t0, v0 - embargo, v0, bt0 - embargo, bt0, stop)
        small = _too_small(ranges, first_row, stop_row)
        if small:
            shortfall = small
            break
        folds.append(ranges)
        stop = bt0
    if not folds or (spec.folds is not None and len(folds) < spec.folds):
        asked = spec.folds if spec.folds is not None else 1
        need = (
            f"{asked} fold(s) of {lengths['backtest']} backtest after {lengths['validation']} "
            f"validation and {lengths['train']} train ({spec.scheme}, embargo {embargo} sessions)"
        )
        raise FinpodError(
            f"too few bars for the windows: {need} do not fit the {n_sess} sessions from "
            f"{first_day:%Y-%m-%d} to {pd.Timestamp(days[-1]):%Y-%m-%d} "
            f"(only {len(folds)} fit; fold {len(folds)} from the end {shortfall})",
            "use fewer --folds, shorter --train/--validation/--backtest, or more data",
        )
    out = []
    for k, ranges in enumerate(reversed(folds)):
        splits = {}
        for j, name in enumerate(SPLITS):
            splits[name] = window_record(
                timestamps, first_row, stop_row, ranges[2 * j], ranges[2 * j + 1]
            )
        fold = Fold(k, splits)
        check_out_of_sample(k, {n: fold.rows(n) for n in SPLITS}, sess)
        out.append(fold)
    return out


def check_out_of_sample(index: int, rows: dict[str, tuple[int, int]], sessions: np.ndarray) -> None:
    """Refuse fold ``index`` when its backtest window shares a session with its train or
    validation window: its agent would be backtested on bars it trained or was selected
    on. ``rows``: split → (start, stop) rows; ``sessions``: (T,) session id of every row
    of the dataset (:func:`~finpod.data.calendar.session_of`). :func:`plan_folds` never
    cuts such a fold; this checks rows that come from elsewhere (a job's own)."""
    b0, b1 = rows["backtest"]
    tested = np.unique(sessions[b0:b1])
    for name in ("train", "validation"):
        s0, s1 = rows[name]
        shared = np.intersect1d(np.unique(sessions[s0:s1]), tested, assume_unique=True)
        if len(shared):
            first, last = (f"{pd.Timestamp(int(d)):%Y-%m-%d}" for d in (shared[0], shared[-1]))
            used = "trained" if name == "train" else "selected"
            raise FinpodError(
                f"fold {index}'s backtest window overlaps its {name} window on {first} → "
                f"{last} ({len(shared)} session{'' if len(shared) == 1 else 's'}): its "
                f"agent would be backtested on bars it was {used} on",
                "cut the folds with plan_folds, whose backtest windows lie after their train "
                "and validation windows",
            )


def _too_small(ranges: tuple[int, ...], first_row: np.ndarray, stop_row: np.ndarray) -> str | None:
    """Which window of a fold keeps fewer than :data:`MIN_WINDOW_BARS` bars, if any."""
    for j, name in enumerate(SPLITS):
        s0, s1 = ranges[2 * j], ranges[2 * j + 1]
        bars = 0 if s1 <= s0 else int(stop_row[s1 - 1] - first_row[s0])
        if bars < MIN_WINDOW_BARS:
            return f"has a {name} window of {bars} bars after the embargo (< {MIN_WINDOW_BARS})"
    return None


def folds_frame(folds: list[Fold]) -> pd.DataFrame:
    """One row per fold: first and last bar date and bars of each window."""
    rows = []
    for f in folds:
        row: dict[str, Any] = {"fold": f.index}
        for name in SPLITS:
            s = f.splits[name]
            row[f"{name}_start"] = str(s["start"])[:10]
            row[f"{name}_end"] = str(s["end"])[:10]
            row[f"{name}_bars"] = int(s["bars"])
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "SCHEMES",
    "Fold",
    "FoldSpec",
    "Length",
    "check_out_of_sample",
    "check_spec",
    "default_embargo",
    "folds_frame",
    "parse_length",
    "plan_folds",
]
