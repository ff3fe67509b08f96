"""Live bars → a small :class:`~finpod.data.market.MarketData` window, through the code that
built the run's dataset.

The bars come from Alpaca's data API through the alpaca source's own fetcher
(:func:`finpod.data.sources.alpaca.fetch_bars`: paced, retried, past days cached in
``RUN/paper/cache``); the long table goes through :func:`finpod.data.inmemory.from_frame`,
the cleaner and feature code of every dataset. Features at bar t use bars ≤ t only, so the
window's last bar has the features the dataset would give it; the exponential averages
(MACD, RSI, DX) start at the window's first bar, which moves them by less than
exp(−window / 30) of their value (≈ 5e-5 for the default 300 sessions of daily bars).
A bar still forming (its end after the clock's time) is left out.

A decision is taken on fresh bars only (:func:`staleness`): the window's last bar must be
the latest one complete at the clock's time, give or take one bar and
:data:`STALE_TOLERANCE` (the free plan's SIP bars are 15 minutes late, so an intraday
agent on them is refused unless the plan serves real-time SIP bars).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from finpod.data.calendar import TZ, bar_minutes, sessions
from finpod.data.inmemory import from_frame
from finpod.data.market import MarketData
from finpod.data.sources.alpaca import fetch_bars
from finpod.errors import FinpodError

#: Sessions of history in the window by default: daily bars need 60 bars for the slowest
#: moving average and 253 sessions for turbulence; intraday bars 60 bars and 253 sessions
#: of session closes for turbulence. Past sessions are fetched once and cached.
DEFAULT_LOOKBACK_SESSIONS = 300
#: Session close in minutes after midnight, New York: a daily bar is complete after it.
DAILY_CLOSE_MIN = 16 * 60
#: Session open in minutes after midnight, New York.
OPEN_MIN = 9 * 60 + 30
#: How much later than one bar after its end a bar may still be decided on.
STALE_TOLERANCE = pd.Timedelta(minutes=2)


def bar_end(start: pd.DatetimeIndex, bar: str) -> pd.DatetimeIndex:
    """When each bar (labelled by its start, New York) is complete."""
    minutes = bar_minutes(bar)
    if minutes is None:
        return start.normalize() + pd.Timedelta(minutes=DAILY_CLOSE_MIN)
    return start + pd.Timedelta(minutes=minutes)


def window_sessions(now: pd.Timestamp, count: int, calendar: str) -> pd.DatetimeIndex:
    """The last ``count`` sessions up to ``now``'s date (naive dates)."""
    now = pd.Timestamp(now).tz_convert(TZ)
    first = now.tz_localize(None).normalize() - pd.Timedelta(days=int(count * 1.6) + 10)
    days = sessions(first, now.tz_localize(None), calendar)
    return days[-count:]


def fetch_window(
    tickers: list[str],
    bar: str,
    now: pd.Timestamp,
    *,
    feed: str,
    lookback_sessions: int,
    calendar: str,
    cache_dir: Path,
    delayed: bool = True,
    write_cache: bool = True,
) -> pd.DataFrame:
    """The long table of the tickers' complete bars over the window ending at ``now`` (the
    broker's clock). ``delayed``: SIP requests end 15 minutes before ``now`` (the free
    plan); ``write_cache=False`` reads the cache and writes nothing (a dry run)."""

    now = pd.Timestamp(now).tz_convert(TZ)
    days = window_sessions(now, lookback_sessions, calendar)
    df = fetch_bars(
        list(tickers),
        days,
        bar,
        feed=feed,
        cache_dir=cache_dir,
        today=now.tz_localize(None).normalize(),
        now=now,
        delayed=delayed,
        write_cache=write_cache,
    )
    if df.empty:
        return df
    stamps = pd.DatetimeIndex(df["timestamp"])
    return df[bar_end(stamps, bar) <= now].reset_index(drop=True)


def window_market(
    bars: pd.DataFrame,
    tickers: list[str],
    bar: str,
    calendar: str,
    device: torch.device,
    feature_file: str | Path | None = None,
    feature_columns: list[str] | None = None,
) -> MarketData:
    """The window as a :class:`MarketData` whose ticker axis is the run's ``tickers``.

    No ticker is dropped for sparse coverage (a thin name keeps its holes, not tradable, as
    in the dataset); a ticker with no bar at all in the window is an error. User feature
    columns come from ``feature_file`` (:mod:`finpod.data.feature_table`): each value at
    its own bar of the window, whose last bar is the last complete one, so a row of a later
    bar is never read. A real bar without its row is
    :class:`~finpod.data.user_features.MissingUserValues`.
    """
    if bars.empty:
        raise FinpodError(
            "Alpaca returned no bars for the window", "check the symbols, the feed and the keys"
        )
    missing = sorted(set(tickers) - set(bars["tic"].astype(str)))
    if missing:
        raise FinpodError(
            f"no live bars for {', '.join(missing)} in the window",
            "a symbol the run trades is not served by this feed (renamed or delisted?)",
        )
    bars = bars[bars["tic"].isin(tickers)]
    market = from_frame(
        bars,
        bar,
        device=device,
        calendar=calendar,
        min_coverage=0.0,
        min_bars=1,
        bar_label="start",  # Alpaca stamps a bar at its start; so does the feature file
        feature_columns=feature_columns or None,
        feature_file=feature_file if feature_columns else None,
    )
    if market.tickers == list(tickers):
        return market
    return market.take_tickers(list(tickers))


def stale_tickers(market: MarketData) -> list[str]:
    """Tickers without a real bar at the window's last bar (halted, or no trade in it)."""
    last = market.tradable[-1].cpu()
    return [t for t, ok in zip(market.tickers, last.tolist(), strict=True) if not ok]


def staleness(
    last: pd.Timestamp, now: pd.Timestamp, bar: str, calendar: str
) -> pd.Timedelta | None:
    """How long before ``now`` the window's ``last`` bar (labelled by its start) ended, when
    that is too long ago to decide on; None when it is the latest bar one may expect.

    Intraday: too long is more than one bar plus :data:`STALE_TOLERANCE`, counted from the
    end of the first bar of ``now``'s session (before that, the previous session's last
    bar is the latest). Daily: a later session closed more than the tolerance ago."""
    now = pd.Timestamp(now).tz_convert(TZ)
    last = pd.Timestamp(last).tz_convert(TZ)
    ended = now - bar_end(pd.DatetimeIndex([last]), bar)[0]
    minutes = bar_minutes(bar)
    if minutes is None:
        day = last.tz_localize(None).normalize()
        later = sessions(day + pd.Timedelta(days=1), now.tz_localize(None).normalize(), calendar)
        closes = bar_end(later.tz_localize(TZ), bar)
        return ended if bool((closes + STALE_TOLERANCE <= now).any()) else None
    step = pd.Timedelta(minutes=minutes)
    first_end = now.normalize() + pd.Timedelta(minutes=OPEN_MIN) + step
    if now < first_end + STALE_TOLERANCE or ended <= step + STALE_TOLERANCE:
        return None
    return ended


def stale_line(
    feed: str, bar: str, realtime: bool, last: pd.Timestamp, now: pd.Timestamp, late: pd.Timedelta
) -> str:
    """The one line of a decision refused on a bar that ended ``late`` before ``now``."""
    line = (
        f"no decision: the last {feed} bar ({last}) ended {int(late.total_seconds() // 60)} "
        f"min before the clock ({now}), more than one {bar} bar and "
        f"{STALE_TOLERANCE.total_seconds() / 60:g} min"
    )
    if feed == "sip" and not realtime and bar != "1d":
        return line + (
            " (the free plan's SIP bars are 15 minutes late: pass --realtime if your plan "
            "serves real-time SIP bars)"
        )
    return line + " (the feed is behind: waiting for fresh bars)"
