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
the latest one complete at the time the bars are served up to, give or take one bar and
:data:`STALE_TOLERANCE`.

The data plan (:data:`PLANS`): Alpaca's free plan serves SIP bars only up to 15 minutes
before now (:data:`~finpod.data.sources.alpaca_plan.SIP_DELAY`; a request of more recent
SIP bars is answered HTTP 403) and IEX bars in real time; a paid plan serves SIP bars in
real time. On the free plan an agent trained on SIP bars decides on SIP bars complete 15
minutes before the clock (the decision's bars are the training feed's, and their delay is
said and recorded): :func:`plan_delay`. :func:`sip_in_real_time` asks the data API which
plan the keys have; :func:`delay_refusal` says when a strategy decides too often for the
delay.

An agent of SIP bars trading on IEX bars (``--feed iex``): a minute without an IEX trade
has no IEX bar, where SIP, which holds every exchange's trades, almost always has one.
:func:`carry_last_trades` carries the ticker's last trade's price over such bars and
keeps it tradable there (never valued at zero, never taken for delisted), and the trader
records which tickers were carried at each decision.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch

from finpod.data.calendar import TZ, bar_minutes, sessions
from finpod.data.inmemory import from_frame
from finpod.data.market import MarketData
from finpod.data.sources.alpaca import fetch_bars
from finpod.data.sources.alpaca_client import api_error, make_client
from finpod.data.sources.alpaca_plan import SIP_DELAY
from finpod.env.config import SESSION_CLOSE_MIN, EnvConfig, decision_minutes
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
#: ``--plan``: ``auto`` asks the data API (:func:`sip_in_real_time`), ``free`` (SIP bars
#: 15 minutes late, IEX in real time), ``paid`` (SIP bars in real time).
PLANS = ("auto", "free", "paid")
#: How far back the plan's probe asks for 1-minute SIP bars (the free plan refuses any
#: request that ends within the last 15 minutes).
PROBE_SPAN = pd.Timedelta(minutes=5)


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
    delay: pd.Timedelta = SIP_DELAY,
    write_cache: bool = True,
) -> pd.DataFrame:
    """The long table of the tickers' bars complete ``delay`` before ``now`` (the broker's
    clock) over the window ending there. ``delay`` (:func:`plan_delay`): the requests end
    there too (the free plan's SIP bars); ``write_cache=False`` reads the cache and writes
    nothing (a dry run)."""

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
        delayed=delay > pd.Timedelta(0),
        write_cache=write_cache,
    )
    if df.empty:
        return df
    stamps = pd.DatetimeIndex(df["timestamp"])
    return df[bar_end(stamps, bar) <= now - delay].reset_index(drop=True)


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


def plan_delay(feed: str, plan: str) -> pd.Timedelta:
    """How late the bars of ``feed`` are on the data ``plan`` (``free`` or ``paid``): the
    free plan's SIP bars :data:`~finpod.data.sources.alpaca_plan.SIP_DELAY`, all others 0."""
    return SIP_DELAY if feed == "sip" and plan == "free" else pd.Timedelta(0)


def sip_in_real_time(symbol: str, now: pd.Timestamp) -> bool:
    """Whether the keys' data plan serves SIP bars up to ``now``: the 1-minute SIP bars of
    ``symbol`` over the last :data:`PROBE_SPAN` are served (a paid plan) or refused with
    HTTP 403 (the free plan). Any other failure is the data API's one-line error."""
    # lazy: the Alpaca SDK loads only to trade (tests/test_boundaries.py)
    from alpaca.common.exceptions import APIError
    from alpaca.data.enums import DataFeed
    from alpaca.data.requests import StockBarsRequest
    from alpaca.data.timeframe import TimeFrame, TimeFrameUnit

    end = pd.Timestamp(now).tz_convert("UTC")
    start = end - PROBE_SPAN
    request = StockBarsRequest(
        symbol_or_symbols=[symbol],
        timeframe=TimeFrame(1, TimeFrameUnit.Minute),
        start=start.to_pydatetime(),
        end=end.to_pydatetime(),
        feed=DataFeed.SIP,
    )
    try:
        make_client().get_stock_bars(request)
    except APIError as err:
        if getattr(err, "status_code", None) == 403:
            return False
        raise api_error(err, "sip", [symbol], start, end) from None
    return True


def decision_period(config: EnvConfig, bar: str) -> pd.Timedelta | None:
    """The shortest time between two decisions of a strategy on ``bar`` bars: the bar
    times ``decision_interval``, or the shortest gap between two ``decision_times``;
    None for daily bars or a single decision time a session."""
    minutes = bar_minutes(bar)
    if minutes is None:
        return None
    if config.decision_times:
        times = decision_minutes(config.decision_times)
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        return pd.Timedelta(minutes=max(min(gaps), minutes)) if gaps else None
    return pd.Timedelta(minutes=minutes * int(config.decision_interval))


def delay_refusal(config: EnvConfig, bar: str, feed: str, delay: pd.Timedelta) -> str | None:
    """Why a strategy cannot decide honestly on bars ``delay`` late (None when it can): it
    decides more often than the delay (each decision would come after the next decision
    bar), it goes flat at the close, or decides at times whose bars complete later than
    the delay before the close (those orders would come after the close)."""
    minutes = bar_minutes(bar)
    if delay <= pd.Timedelta(0) or minutes is None:
        return None
    late = f"{feed} bars {delay.total_seconds() / 60:g} min late"
    period = decision_period(config, bar)
    if period is not None and period < delay:
        return (
            f"the strategy decides every {period.total_seconds() / 60:g} min, more often than "
            f"its {late} allow (each decision would come after the next decision bar)"
        )
    if config.flat_at_close:
        return f"the strategy goes flat at the close, and on {late} its last orders come after it"
    last = SESSION_CLOSE_MIN - delay.total_seconds() / 60
    after = [t for t in config.decision_times if decision_minutes([t])[0] > last]
    if after:
        return f"on {late} the decision(s) at {', '.join(after)} come after the close"
    return None


def carry_last_trades(market: MarketData) -> tuple[MarketData, dict[str, float]]:
    """``market`` (IEX bars) with every bar a ticker has no trade in, after its first one
    in the window, tradable at its last trade's price (the close the cleaner carried), and
    none delisted; and ``{ticker: carried price}`` of those at the window's last bar."""
    close = market.close
    seen = torch.cumsum(market.tradable.to(torch.int32), dim=0) > 0
    carry = seen & ~market.tradable & torch.isfinite(close) & (close > 0)
    last = {  # float32 prices, to the hundredth of a cent as quoted
        t: round(float(close[-1, i]), 4) for i, t in enumerate(market.tickers) if bool(carry[-1, i])
    }
    if not bool(carry.any()) and market.delisted is None:
        return market, last
    delisted = None if market.delisted is None else market.delisted & ~seen
    return replace(market, tradable=market.tradable | carry, delisted=delisted), last


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
    feed: str,
    bar: str,
    delay: pd.Timedelta,
    last: pd.Timestamp,
    now: pd.Timestamp,
    late: pd.Timedelta,
) -> str:
    """The one line of a decision refused on a bar that ended ``late`` before the time the
    bars are served up to (``now`` less the plan's ``delay``)."""
    lag = delay.total_seconds() / 60
    served = f"{lag:g} min before the clock ({now})" if lag else f"the clock ({now})"
    return (
        f"no decision: the last {feed} bar ({last}) ended {int(late.total_seconds() // 60)} "
        f"min before {served}, more than one {bar} bar and "
        f"{STALE_TOLERANCE.total_seconds() / 60:g} min (the feed is behind: waiting for "
        "fresh bars)"
    )
