"""What the ``alpaca`` source asks for: chunks of sessions (the cache and resume unit), the
requests of a chunk, the SIP end clamp, and the request plan of a download.

A request names symbols, a start and an end; Alpaca answers with every bar in between,
extended hours (04:00–20:00 New York) included, in pages of at most 10,000 bars, and every
page counts against the rate limit. The cleaner keeps the regular session only, so for
minute bars a chunk is requested in one of two ways, whichever takes fewer pages:

- ``span``: one request per symbol group over the whole chunk (extended hours included:
  about 960 1-minute bars a symbol-day on SIP, of which 390 are kept);
- ``sessions``: one request per symbol group per session, from the open to the close
  (half days close early), so that no extended-hours bar is requested at all.

Hourly and daily bars are always requested as ``span`` (Alpaca's hourly bars start on the
hour, not at 09:30).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ, bar_minutes, get_calendar, session_closes

#: Most bars Alpaca returns in one page.
PAGE_LIMIT = 10_000
#: Minutes of a regular session and of Alpaca's extended day (04:00–20:00 New York).
REGULAR_MINUTES, EXTENDED_MINUTES = 390, 960
#: How far behind now the free plan serves SIP bars.
SIP_DELAY = pd.Timedelta(minutes=15)


def plan_chunks(
    days: pd.DatetimeIndex, bar: str, today: pd.Timestamp
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Session days → ``[(first_day, last_day)]`` chunks: calendar months for intraday bars
    up to 30 minutes, calendar years for hourly and daily bars; ``today`` (never cached) is
    always a chunk of its own."""
    if len(days) == 0:
        return []
    minutes = bar_minutes(bar)
    key = days.year * 100 + days.month if minutes is not None and minutes <= 30 else days.year
    key = np.where(days >= today, -days.asi8, key)  # today (and later): one chunk each
    chunks = []
    for k in pd.unique(key):
        sel = days[key == k]
        chunks.append((sel[0], sel[-1]))
    return chunks


def bars_per_session(bar: str, extended: bool = False) -> int:
    """Bars of one symbol in a regular session (or in Alpaca's extended day)."""
    minutes = bar_minutes(bar)
    if minutes is None:
        return 1
    return math.ceil((EXTENDED_MINUTES if extended else REGULAR_MINUTES) / minutes)


def span_groups(n_days: int, bar: str) -> int:
    """Symbols per ``span`` request: as many as one page of regular-session bars holds."""
    return max(1, PAGE_LIMIT // max(1, n_days * bars_per_session(bar)))


def session_groups(bar: str) -> int:
    """Symbols per ``sessions`` request: one page of one regular session's bars."""
    return max(1, PAGE_LIMIT // bars_per_session(bar))


def span_pages(n_symbols: int, n_days: int, bar: str) -> int:
    """Pages of a chunk requested whole, at most (every extended-hours bar present)."""
    per = span_groups(n_days, bar)
    full, rest = divmod(n_symbols, per)
    ext = n_days * bars_per_session(bar, extended=True)
    return full * math.ceil(per * ext / PAGE_LIMIT) + math.ceil(rest * ext / PAGE_LIMIT)


def chunk_requests(n_symbols: int, n_days: int, bar: str) -> tuple[str, int]:
    """``(mode, pages)``: how a chunk of ``n_days`` sessions of ``n_symbols`` is requested
    (``span`` or ``sessions``) and how many pages that takes at most (full extended hours)."""
    if n_symbols == 0 or n_days == 0:
        return "span", 0
    span = span_pages(n_symbols, n_days, bar)
    minutes = bar_minutes(bar)
    if minutes is None or minutes > 30:
        return "span", span
    sessions_ = n_days * math.ceil(n_symbols / session_groups(bar))
    return ("sessions", sessions_) if sessions_ < span else ("span", span)


def session_windows(
    days: pd.DatetimeIndex, calendar: str = "XNYS"
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``[(open, close)]`` of each session, tz-aware UTC (half days close early)."""
    sched = get_calendar(calendar).schedule.loc[pd.DatetimeIndex(days)]
    opens = pd.DatetimeIndex(sched["open"].to_numpy(dtype="datetime64[ns]")).tz_localize("UTC")
    closes = pd.DatetimeIndex(session_closes(days, calendar).astype("datetime64[ns]"))
    return list(zip(opens, closes.tz_localize("UTC"), strict=True))


def sip_end(now: pd.Timestamp) -> pd.Timestamp:
    """The latest instant the free plan serves SIP bars up to: 15 minutes before ``now``."""
    return pd.Timestamp(now).tz_convert("UTC") - SIP_DELAY


def clamp_line(limit: pd.Timestamp) -> str:
    """The console line saying that SIP requests end 15 minutes before now."""
    return (
        f"sip feed: requests end at {limit.tz_convert(TZ):%Y-%m-%d %H:%M} New York, 15 minutes "
        "before now (the free plan serves no SIP bars of the last 15 minutes)"
    )


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class RequestPlan:
    """How many requests a download takes at most, and how long at the rate limit."""

    symbols: int
    """Symbols asked (a point-in-time universe: every member of the period)."""
    sessions: int
    """Sessions of the range."""
    bar: str
    """Bar size."""
    feed: str
    """``sip`` or ``iex``."""
    requests: int
    """Pages requested (each counts against the rate limit), at most."""
    span_requests: int
    """Pages if every chunk were requested whole (extended hours included)."""
    rate_per_min: float
    """Requests per minute the download is paced to."""

    @property
    def minutes(self) -> float:
        """Minutes the requests take at :attr:`rate_per_min`."""
        return self.requests / self.rate_per_min

    def line(self) -> str:
        """The plan in one line."""
        saved = (
            f"; {self.span_requests:,} with extended hours"
            if self.span_requests != self.requests
            else ""
        )
        took = (
            f"{self.minutes:,.1f} min"
            if self.minutes >= 1
            else f"{max(1.0, self.minutes * 60):.0f} s"
        )
        return (
            f"alpaca plan: {_n(self.symbols, 'symbol')} × {_n(self.sessions, 'session')} of "
            f"{self.bar} {self.feed} bars: at most {_n(self.requests, 'request')}{saved}; "
            f"{took} at {self.rate_per_min:g} requests/min"
        )


def request_plan(
    n_symbols: int,
    days: pd.DatetimeIndex,
    bar: str,
    feed: str,
    rate_per_min: float,
    today: pd.Timestamp | None = None,
) -> RequestPlan:
    """The :class:`RequestPlan` of ``n_symbols`` over the session ``days`` (nothing cached)."""
    today = pd.Timestamp.max.normalize() if today is None else today
    total = span = 0
    for a, b in plan_chunks(days, bar, today):
        n_days = int(((days >= a) & (days <= b)).sum())
        total += chunk_requests(n_symbols, n_days, bar)[1]
        span += span_pages(n_symbols, n_days, bar)
    return RequestPlan(n_symbols, len(days), bar, feed, total, span, rate_per_min)
