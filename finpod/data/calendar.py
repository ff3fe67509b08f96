"""Exchange sessions and bar grids (XNYS/XNAS via exchange-calendars).

Every dataset lives on a grid of bars derived from the exchange calendar, so holidays and
half days (e.g. the day after Thanksgiving closes at 13:00) are right by construction.

Timestamp conventions (all tz-aware, America/New_York):

- daily bars (``"1d"``): the session date at midnight, e.g. ``2019-02-11 00:00-05:00``.
- intraday bars (``"Nmin"``, ``"Nh"``): the bar's **start** time, as exchange-calendars and
  Yahoo label them; a session 09:30–16:00 has 1-minute bars 09:30 … 15:59 (390 bars).
"""

from __future__ import annotations

import functools
import re
import warnings

import exchange_calendars as xcals
import numpy as np
import pandas as pd

from finpod.errors import FinpodError

#: Time zone of every finpod timestamp.
TZ = "America/New_York"
#: Calendars finpod accepts (NASDAQ listings trade on the same sessions as NYSE).
CALENDARS = ("XNYS", "XNAS")


def bar_minutes(bar: str) -> int | None:
    """Length of an intraday bar in minutes; ``None`` for daily bars.

    ``"1d"`` → None; ``"1min"``/``"1m"`` → 1; ``"5min"`` → 5; ``"1h"`` → 60.
    """
    b = bar.strip().lower()
    if b in {"1d", "d", "day", "daily"}:
        return None
    m = re.fullmatch(r"(\d+)(min|m|h)", b)
    if not m or int(m.group(1)) <= 0:
        raise FinpodError(f"unknown bar size {bar!r}", "use 1d, Nmin (e.g. 1min, 5min) or Nh")
    return int(m.group(1)) * (60 if m.group(2) == "h" else 1)


def normalize_bar(bar: str) -> str:
    """Canonical bar name: ``"1d"`` or ``"<N>min"``."""
    minutes = bar_minutes(bar)
    return "1d" if minutes is None else f"{minutes}min"


@functools.lru_cache(maxsize=4)
def get_calendar(name: str = "XNYS") -> xcals.ExchangeCalendar:
    """The exchange calendar ``name`` (cached; 1990–2045, future sessions by the holiday rules)."""
    if name.upper() not in CALENDARS:
        raise FinpodError(
            f"unknown exchange calendar {name!r}", f"use one of {', '.join(CALENDARS)}"
        )
    with warnings.catch_warnings():
        # exchange-calendars reads tz-aware Series.values, deprecated by pandas ≥ 3.1.
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)
        if hasattr(pd.errors, "Pandas4Warning"):
            warnings.simplefilter("ignore", category=pd.errors.Pandas4Warning)
        return xcals.get_calendar(name.upper(), start="1990-01-01", end="2045-12-31")


def sessions(
    start: pd.Timestamp | str, end: pd.Timestamp | str, calendar: str = "XNYS"
) -> pd.DatetimeIndex:
    """Session dates in ``[start, end]`` (naive dates, midnight)."""
    cal = get_calendar(calendar)
    s = pd.Timestamp(start)
    e = pd.Timestamp(end)
    if s.tzinfo is not None:
        s = s.tz_convert(TZ).tz_localize(None)
    if e.tzinfo is not None:
        e = e.tz_convert(TZ).tz_localize(None)
    s, e = s.normalize(), e.normalize()
    s = max(s, cal.first_session)
    e = min(e, cal.last_session)
    if s > e:
        return pd.DatetimeIndex([])
    return cal.sessions_in_range(s, e)


def bar_grid(session_dates: pd.DatetimeIndex, bar: str, calendar: str = "XNYS") -> pd.DatetimeIndex:
    """All bar timestamps (tz-aware, New York) of ``bar`` size over ``session_dates``.

    Daily: one timestamp per session. Intraday: bar starts from the open up to the close of
    each session (half days are shorter); a last partial bar is kept.
    """
    minutes = bar_minutes(bar)
    if len(session_dates) == 0:
        return pd.DatetimeIndex([], tz=TZ)
    if minutes is None:
        return pd.DatetimeIndex(session_dates).tz_localize(TZ)
    cal = get_calendar(calendar)
    sched = cal.schedule.loc[session_dates]
    opens = sched["open"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    closes = sched["close"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    step = np.int64(minutes) * 60 * 1_000_000_000
    counts = -(-(closes - opens) // step)  # ceil: a partial last bar is still a bar
    starts = np.repeat(opens, counts)
    offsets = np.arange(counts.sum(), dtype=np.int64) - np.repeat(
        np.cumsum(counts) - counts, counts
    )
    stamps = starts + offsets * step
    return pd.DatetimeIndex(stamps.astype("datetime64[ns]")).tz_localize("UTC").tz_convert(TZ)


def session_of(timestamps: pd.DatetimeIndex) -> np.ndarray:
    """Session date (int64 ns of the naive date) of each tz-aware New York timestamp."""
    local = timestamps.tz_convert(TZ).tz_localize(None).normalize()
    return local.to_numpy(dtype="datetime64[ns]").astype(np.int64)


def session_closes(session_dates: pd.DatetimeIndex, calendar: str = "XNYS") -> np.ndarray:
    """(S,) int64 UTC nanoseconds of each session's close (half days close early)."""
    cal = get_calendar(calendar)
    sched = cal.schedule.loc[pd.DatetimeIndex(session_dates)]
    return sched["close"].to_numpy(dtype="datetime64[ns]").astype(np.int64)


def bar_ends(timestamps: pd.DatetimeIndex, bar: str, calendar: str = "XNYS") -> np.ndarray:
    """(T,) int64 UTC nanoseconds at which each bar's close is known.

    Daily bars end at their session's close; an intraday bar ends ``bar`` minutes after its
    start, or at the session's close for a last partial bar.
    """
    if len(timestamps) == 0:
        return np.zeros(0, dtype=np.int64)
    sess = session_of(timestamps)
    uniq, inv = np.unique(sess, return_inverse=True)
    closes = session_closes(pd.DatetimeIndex(uniq.astype("datetime64[ns]")), calendar)[inv]
    minutes = bar_minutes(bar)
    if minutes is None:
        return closes
    starts = timestamps.tz_convert("UTC").tz_localize(None)
    starts_ns = starts.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return np.minimum(starts_ns + np.int64(minutes) * 60_000_000_000, closes)


#: How :func:`bars_per_year` counts, recorded in each dataset's manifest.
BARS_PER_YEAR_RULE = (
    "bars of the dataset's size on its exchange calendar (half days included) over the whole "
    "calendar years its range touches, divided by the number of those years"
)


def bars_per_year(
    bar: str,
    calendar: str = "XNYS",
    *,
    start: pd.Timestamp | str,
    end: pd.Timestamp | str,
) -> float:
    """Bars of size ``bar`` per year, counted on the exchange calendar (see
    :data:`BARS_PER_YEAR_RULE`).

    Whole calendar years are counted (``start``'s year through ``end``'s year), so a week of
    minute bars is annualized with its year's sessions, not with 5 × 52. Intraday bars are
    the calendar's bar grid: a full session has 390 1-minute, 78 5-minute or 7 60-minute bars
    (09:30 … 15:30, the last one partial); a 13:00 half day has 210, 42 and 4.

    Args:
        bar: ``"1d"``, ``"Nmin"`` or ``"Nh"``.
        calendar: ``"XNYS"`` or ``"XNAS"``.
        start, end: the dataset's first and last bar (dates or timestamps).

    Returns:
        Bars per year (float), e.g. 252.0 for ``"1d"`` over 2019, 1755.0 for ``"60min"``.
    """
    y0, y1 = pd.Timestamp(start).year, pd.Timestamp(end).year
    if y1 < y0:
        raise FinpodError(f"end {end} is before start {start}")
    sess = sessions(f"{y0}-01-01", f"{y1}-12-31", calendar)
    years = y1 - y0 + 1
    minutes = bar_minutes(bar)
    if minutes is None:
        return len(sess) / years
    cal = get_calendar(calendar)
    sched = cal.schedule.loc[sess]
    length = (sched["close"] - sched["open"]).to_numpy(dtype="timedelta64[ns]").astype(np.int64)
    step = np.int64(minutes) * 60_000_000_000
    return float((-(-length // step)).sum()) / years
