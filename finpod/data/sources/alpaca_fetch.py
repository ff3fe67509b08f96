"""The requests and the cache of the ``alpaca`` source: each chunk of sessions fetched
through the SDK (whole or session by session, :mod:`.alpaca_plan`), written per (feed,
adjustment, timeframe, symbol, chunk) as Parquet, and turned into the long table the
``files`` cleaner reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.atomic import atomic_write
from finpod.data.calendar import TZ
from finpod.data.sources.alpaca_client import FREE_RATE_PER_MIN, api_error, make_client
from finpod.data.sources.alpaca_plan import (
    chunk_requests,
    clamp_line,
    plan_chunks,
    session_groups,
    session_windows,
    sip_end,
    span_groups,
)
from finpod.data.universe import SAMPLE_DIR

#: Finpod bar → (amount, unit) of Alpaca's timeframe.
ALPACA_BARS: dict[str, tuple[int, str]] = {
    "1min": (1, "Minute"),
    "5min": (5, "Minute"),
    "15min": (15, "Minute"),
    "30min": (30, "Minute"),
    "60min": (1, "Hour"),
    "1d": (1, "Day"),
}
#: Columns of a cached chunk: Alpaca's bar fields, ``t`` as UTC nanoseconds.
CACHE_COLUMNS = ("symbol", "t", "o", "h", "l", "c", "v", "n", "vw")


def _cache_file(root: Path, symbol: str, a: pd.Timestamp, b: pd.Timestamp) -> Path:
    return root / symbol.replace("/", "_") / f"{a:%Y%m%d}_{b:%Y%m%d}.parquet"


def _frame(raws: list[dict], symbols: list[str]) -> dict[str, pd.DataFrame]:
    """The SDK's raw answers ``{symbol: [{t, o, h, l, c, v, n, vw}, …]}`` → a frame per
    symbol (the answers in time order)."""
    out = {}
    for s in symbols:
        rows = [row for raw in raws for row in raw.get(s) or []]
        df = pd.DataFrame(rows, columns=[c for c in CACHE_COLUMNS if c != "symbol"])
        t = pd.to_datetime(df["t"], utc=True, format="ISO8601") if len(df) else df["t"]
        df = df.assign(
            t=pd.DatetimeIndex(t).as_unit("ns").asi8 if len(df) else np.zeros(0, "int64")
        )
        df.insert(0, "symbol", s)
        out[s] = df.astype(
            {
                "t": "int64",
                "o": "float64",
                "h": "float64",
                "l": "float64",
                "c": "float64",
                "v": "float64",
                "n": "float64",
                "vw": "float64",
            }
        )
    return out


def _windows(
    a: pd.Timestamp, b: pd.Timestamp, days: pd.DatetimeIndex, mode: str, calendar: str
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The ``[(start, end)]`` (UTC, end inclusive) a group's requests for the chunk cover."""
    if mode == "sessions":
        sel = days[(days >= a) & (days <= b)]
        return [(o, c - pd.Timedelta(seconds=1)) for o, c in session_windows(sel, calendar)]
    lo = pd.Timestamp(a).tz_localize(TZ).tz_convert("UTC")
    hi = (pd.Timestamp(b) + pd.Timedelta(days=1)).tz_localize(TZ).tz_convert("UTC")
    return [(lo, hi - pd.Timedelta(seconds=1))]


def fetch_bars(
    symbols: list[str],
    days: pd.DatetimeIndex,
    bar: str,
    *,
    feed: str = "sip",
    adjustment: str = "all",
    cache_dir: str | Path | None = None,
    today: pd.Timestamp | None = None,
    now: pd.Timestamp | None = None,
    calendar: str = "XNYS",
    rate_per_min: float = FREE_RATE_PER_MIN,
    progress: Any = None,
    counter: dict | None = None,
    say: Callable[[str], None] | None = None,
    mode: str | None = None,
    delayed: bool = True,
    write_cache: bool = True,
) -> pd.DataFrame:
    """Bars of ``symbols`` on the session ``days``, as Alpaca returns them (cached).

    Each chunk is requested whole or session by session, whichever takes fewer pages
    (:func:`~finpod.data.sources.alpaca_plan.chunk_requests`; ``mode`` = ``"span"`` or
    ``"sessions"`` forces one). SIP requests end 15 minutes before ``now`` (the free plan's
    delay; ``delayed=False`` for a plan that serves real-time SIP bars), and ``say`` shows
    that line once (and each retry wait). ``write_cache=False`` reads the cache and writes
    nothing to it.

    Returns the long table ``timestamp`` (New York bar start), ``tic``, ``open, high, low,
    close, volume`` of every bar Alpaca sent (the cleaner keeps the session's bars).
    """
    # lazy: the Alpaca SDK loads only to download (tests/test_boundaries.py)
    from alpaca.common.exceptions import APIError
    from alpaca.data.enums import Adjustment, DataFeed
    from alpaca.data.requests import StockBarsRequest
    from alpaca.data.timeframe import TimeFrame, TimeFrameUnit

    say = say or (lambda line: None)
    amount, unit = ALPACA_BARS[bar]
    timeframe = TimeFrame(amount, getattr(TimeFrameUnit, unit))
    now = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now).tz_convert("UTC")
    today = now.tz_convert(TZ).tz_localize(None).normalize() if today is None else today
    limit = sip_end(now) if feed == "sip" and delayed else None
    root = (
        (Path(cache_dir) if cache_dir else SAMPLE_DIR.parent / "cache" / "alpaca")
        / feed
        / adjustment
        / str(timeframe)
    )
    task = None
    if progress is not None:
        task = progress.add_task(
            f"alpaca {timeframe} {feed}: symbols × days", total=len(symbols) * len(days)
        )
    counter = counter if counter is not None else {}
    client = None
    clamped = False
    parts: list[pd.DataFrame] = []
    for a, b in plan_chunks(days, bar, today.normalize()):
        n_days = int(((days >= a) & (days <= b)).sum())
        todo = []
        for s in symbols:
            f = _cache_file(root, s, a, b)
            if f.exists():
                parts.append(pd.read_parquet(f))
                if task is not None:
                    progress.advance(task, n_days)
            else:
                todo.append(s)
        how = mode or chunk_requests(len(todo), n_days, bar)[0]
        per_request = session_groups(bar) if how == "sessions" else span_groups(n_days, bar)
        windows = _windows(a, b, days, how, calendar)
        if limit is not None and todo and windows[-1][1] > limit:
            windows = [(lo, min(hi, limit)) for lo, hi in windows if lo < limit]
            if not clamped:
                say(clamp_line(limit))
                clamped = True
        for i in range(0, len(todo), per_request):
            group = todo[i : i + per_request]
            if client is None:
                client = make_client(rate_per_min, counter, say)
            raws = []
            for lo, hi in windows:
                req = StockBarsRequest(
                    symbol_or_symbols=group,
                    timeframe=timeframe,
                    start=lo.to_pydatetime(),
                    end=hi.to_pydatetime(),
                    feed=DataFeed(feed),
                    adjustment=Adjustment(adjustment),
                )
                try:
                    raws.append(client.get_stock_bars(req) or {})
                except APIError as err:
                    raise api_error(err, feed, group, a, b) from None
            for s, df in _frame(raws, group).items():
                if (
                    write_cache and b < today
                ):  # whole past days only: today's bars are still arriving
                    atomic_write(_cache_file(root, s, a, b), lambda p, df=df: df.to_parquet(p))
                parts.append(df)
            if task is not None:
                progress.advance(task, n_days * len(group))
    if not parts:
        return pd.DataFrame(columns=["timestamp", "tic", "open", "high", "low", "close", "volume"])
    df = pd.concat(parts, ignore_index=True)
    return long_table(df)


def long_table(cached: pd.DataFrame) -> pd.DataFrame:
    """Alpaca's bar fields → the long table the ``files`` source reads (bar starts, New York).

    The instants are Alpaca's (UTC); they are written in New York time because the cleaner
    reads a stamp at midnight on its own clock as a date: in winter the extended-hours bar
    of 19:00 New York is 00:00 UTC, and would be refused as a daily row beside minute bars.
    """
    utc = pd.DatetimeIndex(cached["t"].to_numpy(dtype="int64")).tz_localize("UTC")
    return pd.DataFrame(
        {
            "timestamp": utc.tz_convert(TZ),
            "tic": cached["symbol"].astype(str).to_numpy(),
            "open": cached["o"].to_numpy(),
            "high": cached["h"].to_numpy(),
            "low": cached["l"].to_numpy(),
            "close": cached["c"].to_numpy(),
            "volume": cached["v"].to_numpy(),
        }
    )
