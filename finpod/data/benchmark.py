"""Index benchmarks: read a file of index levels and align it to the bars causally.

A benchmark is an **index level with no costs** (e.g. ^NDX): a yardstick, not a portfolio
anyone could hold for free. Alignment never shows a level before it was known:

- every level gets the instant it became known: a **daily** level (one per session) is
  known at that session's close (13:00 on a half day); an **intraday** level at the end of
  its bar (start-labelled stamps + the bar length, end-labelled stamps as they are);
- every dataset bar gets the instant its own close is known: a daily bar at the session's
  close, an intraday bar at its end;
- a bar shows the last level known at or before its own end. So on daily bars the index's
  close of a session sits on that session's bar, and on intraday bars a daily level first
  appears on the session's last bar (earlier bars of the day show the previous close).

Which session a daily level belongs to: a date-only stamp, or a stamp at midnight in its own
zone (``2019-01-02``, ``2019-01-02 00:00+00:00``), is that session's date; any other stamp is
an instant read in New York (``2019-01-02 16:00-05:00`` and ``2019-01-02 21:00Z`` are both
2019-01-02). A file is daily when its most common spacing is a day or more.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.bars import normalize_columns
from finpod.data.calendar import TZ, bar_ends, session_closes, session_of, sessions
from finpod.data.timestamps import (
    detect_bar_label,
    read_stamps,
    stamp_dates,
)
from finpod.data.vendor import read_table, refuse_excel_serials
from finpod.errors import FinpodError

#: How the manifest labels every benchmark.
BENCHMARK_KIND = "index level, no costs"
#: Value columns accepted in a benchmark file, in order of preference (lower-cased).
LEVEL_COLUMNS = ("close", "adj_close", "adj close", "level", "value", "price", "index", "last")
_DAY_NS = 86_400_000_000_000


def level_times(
    series: pd.Series,
    *,
    calendar: str = "XNYS",
    timezone: str = TZ,
    bar_label: str = "auto",
    where: str | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """When each level of ``series`` became known.

    Two levels known at the same instant (a date given twice): the later row wins, unless
    ``where`` (the file's name) is given: then two that differ are an error naming the
    date and both levels (keeping either would make a fake move); equal ones are one.

    Args:
        series: index levels; its index holds the stamps (text, naive or aware datetimes).
        calendar: exchange calendar of the sessions.
        timezone: zone of naive stamps that carry a time of day.
        bar_label: intraday stamps mark the bar ``"start"``, ``"end"`` or ``"auto"``.

    Returns:
        ``(known_ns, values, info)``: (K,) int64 UTC ns sorted ascending, (K,) float64
        levels, and ``info`` (``"frequency"``, dropped counts).
    """
    stamps = pd.Series(series.index, index=np.arange(len(series)))
    vals = pd.to_numeric(pd.Series(np.asarray(series), index=stamps.index), errors="coerce")
    refuse_excel_serials(stamps, f"benchmark file {where}" if where else "the benchmark")
    instant, wall, notes = read_stamps(stamps, timezone)
    ok = instant.notna() & wall.notna() & vals.notna() & (vals > 0)
    info: dict = {"dropped_unreadable": int((~ok).sum())}
    instant, wall, vals = instant[ok], wall[ok], vals[ok].to_numpy(dtype=np.float64)
    if len(vals) == 0:
        raise FinpodError("the benchmark has no readable level", "check its date and close columns")
    inst_ns = instant.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(dtype="datetime64[ns]")
    inst_ns = inst_ns.astype(np.int64)
    at_midnight = bool((wall == wall.dt.normalize()).all())
    diffs = np.diff(np.unique(inst_ns))
    step = int(pd.Series(diffs).mode().iloc[0]) if len(diffs) else _DAY_NS
    daily = at_midnight or step >= _DAY_NS * 20 // 24
    if daily:
        info["frequency"] = "daily (known at the session's close)"
        dates = stamp_dates(instant, wall)
        date_ns = dates.to_numpy(dtype="datetime64[ns]").astype(np.int64)
        sess = sessions(pd.Timestamp(date_ns.min()), pd.Timestamp(date_ns.max()), calendar)
        sess_ns = sess.to_numpy(dtype="datetime64[ns]").astype(np.int64)
        pos = np.minimum(np.searchsorted(sess_ns, date_ns), max(len(sess_ns) - 1, 0))
        on_session = (len(sess_ns) > 0) & (sess_ns[pos] == date_ns)
        if (~on_session).any():
            info["dropped_not_a_session"] = int((~on_session).sum())
        if not on_session.any():
            raise FinpodError(
                "no benchmark date falls on an exchange session", "are the dates right?"
            )
        known = session_closes(sess[pos[on_session]], calendar)
        vals = vals[on_session]
    else:
        label = bar_label
        if label == "auto":
            label = detect_bar_label(pd.DatetimeIndex(instant), step // 60_000_000_000)
        if label not in ("start", "end"):
            raise FinpodError(f"unknown bar label {bar_label!r}", "use start, end or auto")
        info["frequency"] = f"intraday, {step // 60_000_000_000} min, stamps mark the bar {label}"
        known = inst_ns + (np.int64(step) if label == "start" else np.int64(0))
    info.update({k: v for k, v in notes.items() if k != "input_timezone"})
    order = np.argsort(known, kind="stable")
    known, vals = known[order], vals[order]
    same = known[1:] == known[:-1]
    clash = same & (vals[1:] != vals[:-1])
    if where is not None and clash.any():
        k = int(np.flatnonzero(clash)[0])
        day = _known_label(int(known[k]), daily)
        raise FinpodError(
            f"benchmark file {where}: {day} is given {int((known == known[k]).sum())} times "
            f"with different levels ({vals[k]:g} and {vals[k + 1]:g}; {int(clash.sum())} "
            "such date(s))",
            "keep one row per date",
        )
    if same.any():
        info["duplicate_rows"] = int(same.sum())
    last = np.r_[~same, True]  # duplicates: the later row wins
    return known[last], vals[last], info


def _known_label(known_ns: int, daily: bool) -> str:
    """The session date (daily) or New York time (intraday) a level known at
    ``known_ns`` belongs to, as text."""
    stamp = pd.Timestamp(known_ns - 1, tz="UTC").tz_convert(TZ)
    return stamp.strftime("%Y-%m-%d") if daily else stamp.strftime("%Y-%m-%d %H:%M")


def check_benchmark_span(
    known: np.ndarray, timestamps: pd.DatetimeIndex, bar: str, where: str, calendar: str = "XNYS"
) -> None:
    """Raise when the levels (known at ``known``, sorted int64 UTC ns) start after the
    bars' first session or stop before their last: a level carried over sessions it does
    not cover would be a flat line, a bar before the first one no level at all."""
    if len(known) == 0 or len(timestamps) == 0:
        return
    ends = bar_ends(timestamps, bar, calendar)
    first_day = pd.Timestamp(int(known[0]) - 1, tz="UTC").tz_convert(TZ).normalize()
    last_day = pd.Timestamp(int(known[-1]) - 1, tz="UTC").tz_convert(TZ).normalize()
    bar_first = pd.Timestamp(int(ends[0]) - 1, tz="UTC").tz_convert(TZ).normalize()
    bar_last = pd.Timestamp(int(ends[-1]) - 1, tz="UTC").tz_convert(TZ).normalize()
    hint = "give index levels covering the bars' dates, or choose --start/--end inside them"
    if first_day > bar_first:
        raise FinpodError(
            f"benchmark file {where} starts after the data: its first level is of "
            f"{first_day:%Y-%m-%d}, the first bar of {bar_first:%Y-%m-%d}",
            hint,
        )
    if last_day < bar_last:
        raise FinpodError(
            f"benchmark file {where} stops before the data: its last level is of "
            f"{last_day:%Y-%m-%d}, the last bar of {bar_last:%Y-%m-%d}",
            hint,
        )


def check_benchmark_gaps(
    known: np.ndarray,
    timestamps: pd.DatetimeIndex,
    observed: np.ndarray,
    where: str,
    calendar: str = "XNYS",
) -> None:
    """Raise when the levels (known at ``known``) leave a run of sessions without a new
    level that is longer than any run of sessions the bars themselves lack (``observed``:
    (T, N) bool, a ticker's real bar): over such a gap the index would be a flat line
    while the stocks move.

    A session has a level when one becomes known after the previous session's close and
    by its own close (a daily level, or any intraday level of that day).
    """
    if len(known) == 0 or len(timestamps) == 0:
        return
    sess_ns = session_of(timestamps)
    days, inverse = np.unique(sess_ns, return_inverse=True)
    any_bar = np.zeros(len(days), dtype=bool)
    np.logical_or.at(any_bar, inverse, np.asarray(observed).any(axis=1))
    closes = session_closes(pd.DatetimeIndex(days.astype("datetime64[ns]")), calendar)
    upto = np.searchsorted(known, closes, side="right")
    fresh = np.r_[True, upto[1:] > upto[:-1]]
    bench_run, bench_at = _longest_run(~fresh)
    own_run, _ = _longest_run(~any_bar)
    if bench_run > own_run:
        first = pd.Timestamp(int(days[bench_at])).strftime("%Y-%m-%d")
        last = pd.Timestamp(int(days[bench_at + bench_run - 1])).strftime("%Y-%m-%d")
        raise FinpodError(
            f"benchmark file {where} has no level for {bench_run} session(s) in a row "
            f"({first} → {last}), a longer gap than any in the bars ({own_run})",
            "fill the benchmark's missing dates: its level would be a flat line there",
        )


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """(length, start) of the longest run of True in ``mask``; (0, 0) if none."""
    if not mask.any():
        return 0, 0
    padded = np.r_[False, mask, False].astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, ends = edges[::2], edges[1::2]
    k = int(np.argmax(ends - starts))
    return int(ends[k] - starts[k]), int(starts[k])


def align_benchmark(
    series: pd.Series,
    timestamps: pd.DatetimeIndex,
    bar: str = "1d",
    *,
    calendar: str = "XNYS",
    timezone: str = TZ,
    bar_label: str = "auto",
) -> pd.Series:
    """Index levels on the bars ``timestamps``: the last level known when each bar closes
    (NaN before the first), never a later one (see the module docstring).

    Args:
        series: index levels indexed by their stamps (dates, naive or aware times).
        timestamps: (T,) tz-aware bar times of the dataset.
        bar: the dataset's bar size.
        calendar, timezone, bar_label: see :func:`level_times`.

    Returns:
        (T,) float64 Series named ``"benchmark"`` on ``timestamps``.
    """
    known, vals, _ = level_times(series, calendar=calendar, timezone=timezone, bar_label=bar_label)
    ends = bar_ends(timestamps, bar, calendar)
    pos = np.searchsorted(known, ends, side="right") - 1
    out = np.where(pos >= 0, vals[np.maximum(pos, 0)], np.nan)
    return pd.Series(out, index=timestamps, name="benchmark")


def read_benchmark_file(
    path: str | Path, columns: dict[str, str] | None = None
) -> tuple[pd.Series, str]:
    """A CSV or Parquet file of index levels → (levels indexed by their raw stamps, name).

    The stamp column is found like a bar file's (``date``, ``datetime``, ``<DATE>,<TIME>``…,
    or a datetime index of a Parquet file); the level column is the first of
    :data:`LEVEL_COLUMNS` present, else the only numeric column. A ticker column with one
    symbol names the benchmark; otherwise the file name does.
    """
    p = Path(path)
    if not p.is_file():
        raise FinpodError(
            f"benchmark file {p} does not exist", "pass --benchmark with a CSV or Parquet file"
        )
    df = read_table(p)
    if len(df) == 0:
        raise FinpodError(f"benchmark file {p} has no rows", "fill it with index levels")
    if isinstance(df.index, pd.DatetimeIndex):
        df = df.reset_index(names="timestamp")
    df = normalize_columns(df, columns)
    if "timestamp" not in df.columns:
        raise FinpodError(
            f"benchmark file {p}: no date or time column (found: {', '.join(map(str, df.columns))})",
            "name it date or timestamp, or pass --column NAME=timestamp",
        )
    lower = {re.sub(r"\s+", " ", str(c).strip().lower()): c for c in df.columns}
    col = next((lower[c] for c in LEVEL_COLUMNS if c in lower), None)
    if col is None:
        numeric = [
            c
            for c in df.columns
            if c not in ("timestamp", "tic") and pd.api.types.is_numeric_dtype(df[c])
        ]
        if len(numeric) != 1:
            raise FinpodError(
                f"benchmark file {p}: cannot tell which column holds the index level "
                f"(found: {', '.join(map(str, df.columns))})",
                "name it close (or level), or keep only one numeric column",
            )
        col = numeric[0]
    name = re.sub(r"(\.csv|\.csv\.gz|\.parquet|\.pq|\.txt)$", "", p.name, flags=re.I)
    if "tic" in df.columns:
        tics = df["tic"].dropna().astype(str).str.strip().unique()
        if len(tics) > 1:
            raise FinpodError(
                f"benchmark file {p} holds {len(tics)} symbols ({', '.join(tics[:4])}…)",
                "give a file with one index only",
            )
        if len(tics) == 1:
            name = tics[0]
    return pd.Series(df[col].to_numpy(), index=pd.Index(df["timestamp"]), name=name), name


__all__ = [
    "BENCHMARK_KIND",
    "align_benchmark",
    "check_benchmark_gaps",
    "check_benchmark_span",
    "level_times",
    "read_benchmark_file",
]
