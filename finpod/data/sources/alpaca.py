"""``alpaca``: years of 1-minute (to daily) US stock bars from Alpaca's market data API,
through the official ``alpaca-py`` SDK (``StockHistoricalDataClient`` + ``StockBarsRequest``).

- Keys: ``APCA_API_KEY_ID`` and ``APCA_API_SECRET_KEY`` (a free alpaca.markets account;
  paper-trading keys work for market data).
- ``FINPOD_ALPACA_DATA_URL`` points the SDK at another data server (a proxy, a test server
  on loopback); default: Alpaca's own.
- Requests are chunked: each symbol's sessions are cut into calendar months (years for hourly
  and daily bars), and symbols are grouped so a request fills about one 10,000-bar page;
  the SDK follows ``next_page_token`` for the rest.
- Rate limit: requests are paced to ``rate_per_min`` (200, the free plan's) and an HTTP 429
  (or 502/503/504) is retried with exponential backoff (``Retry-After`` when the server sends
  one), a bounded number of times; then one line says to rerun later. An HTTP 403 (e.g. SIP
  data of the last 15 minutes on the free plan) is one line naming the feed
  (:mod:`~finpod.data.sources.alpaca_client`).
- Cache: every (feed, adjustment, timeframe, symbol, chunk) of whole past days is written
  to ``data/cache/alpaca/`` as Parquet (atomically), empty chunks too. The cache is the
  resume state: a rerun after an interruption requests only the chunks not there. Today's
  (partial) day is never cached.
- Bars keep Alpaca's label: ``t`` is the bar's start, in UTC (cached so; the long table
  writes the same instant in New York time). The long table
  (``timestamp, tic, open, high, low, close, volume``) then goes through the same cleaning,
  benchmark alignment and splits as the ``files`` source (:func:`clean_vendor_bars`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.atomic import atomic_write
from finpod.data.benchmark import align_benchmark
from finpod.data.calendar import TZ, bar_minutes, normalize_bar, sessions
from finpod.data.sources.alpaca_client import (
    FREE_RATE_PER_MIN,
    URL_ENV,
    api_error,
    make_client,
    need_keys,
)
from finpod.data.sources.base import LoadedSource, ticker_list, vendor_universe
from finpod.data.sources.files import clean_vendor_bars
from finpod.data.universe import SAMPLE_DIR, nasdaq100_members
from finpod.errors import FinpodError

#: Finpod bar → (amount, unit) of Alpaca's timeframe.
ALPACA_BARS: dict[str, tuple[int, str]] = {
    "1min": (1, "Minute"),
    "5min": (5, "Minute"),
    "15min": (15, "Minute"),
    "30min": (30, "Minute"),
    "60min": (1, "Hour"),
    "1d": (1, "Day"),
}
FEEDS = ("iex", "sip")
ADJUSTMENTS = ("all", "split", "dividend", "raw")
#: Most bars Alpaca returns in one page.
PAGE_LIMIT = 10_000
#: Columns of a cached chunk: Alpaca's bar fields, ``t`` as UTC nanoseconds.
CACHE_COLUMNS = ("symbol", "t", "o", "h", "l", "c", "v", "n", "vw")
#: How a proxy ETF benchmark is labelled in the manifest.
PROXY_KIND = "ETF price used as a proxy of the index (a fund: fees inside, not the index level)"


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


def _bars_per_session(bar: str) -> int:
    minutes = bar_minutes(bar)
    return 1 if minutes is None else int(np.ceil(390 / minutes))


def _cache_file(root: Path, symbol: str, a: pd.Timestamp, b: pd.Timestamp) -> Path:
    return root / symbol.replace("/", "_") / f"{a:%Y%m%d}_{b:%Y%m%d}.parquet"


def _frame(raw: dict, symbols: list[str]) -> dict[str, pd.DataFrame]:
    """The SDK's raw ``{symbol: [{t, o, h, l, c, v, n, vw}, …]}`` → a frame per symbol."""
    out = {}
    for s in symbols:
        rows = raw.get(s) or []
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


def fetch_bars(
    symbols: list[str],
    days: pd.DatetimeIndex,
    bar: str,
    *,
    feed: str = "iex",
    adjustment: str = "all",
    cache_dir: str | Path | None = None,
    today: pd.Timestamp | None = None,
    rate_per_min: float = FREE_RATE_PER_MIN,
    progress: Any = None,
    counter: dict | None = None,
) -> pd.DataFrame:
    """Bars of ``symbols`` on the session ``days``, as Alpaca returns them (cached).

    Returns the long table ``timestamp`` (UTC bar start), ``tic``, ``open, high, low, close,
    volume, trade_count, vwap`` of every bar Alpaca has on those days, extended hours
    included (the cleaner keeps the session's bars).
    """
    # lazy: the Alpaca client is heavy and needed only when this source downloads
    from alpaca.common.exceptions import APIError
    from alpaca.data.enums import Adjustment, DataFeed
    from alpaca.data.requests import StockBarsRequest
    from alpaca.data.timeframe import TimeFrame, TimeFrameUnit

    amount, unit = ALPACA_BARS[bar]
    timeframe = TimeFrame(amount, getattr(TimeFrameUnit, unit))
    today = (
        pd.Timestamp.now(tz=TZ).tz_localize(None).normalize()
        if today is None
        else today.normalize()
    )
    root = (
        (Path(cache_dir) if cache_dir else SAMPLE_DIR.parent / "cache" / "alpaca")
        / feed
        / adjustment
        / str(timeframe)
    )
    chunks = plan_chunks(days, bar, today)
    task = None
    if progress is not None:
        task = progress.add_task(
            f"alpaca {timeframe} {feed}: symbols × days", total=len(symbols) * len(days)
        )
    counter = counter if counter is not None else {}
    client = None
    parts: list[pd.DataFrame] = []
    for a, b in chunks:
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
        per_request = max(1, PAGE_LIMIT // max(1, n_days * _bars_per_session(bar)))
        for i in range(0, len(todo), per_request):
            group = todo[i : i + per_request]
            if client is None:
                client = make_client(rate_per_min, counter)
            lo = pd.Timestamp(a).tz_localize(TZ).tz_convert("UTC")
            hi = (pd.Timestamp(b) + pd.Timedelta(days=1)).tz_localize(TZ).tz_convert("UTC")
            req = StockBarsRequest(
                symbol_or_symbols=group,
                timeframe=timeframe,
                start=lo.to_pydatetime(),
                end=(hi - pd.Timedelta(seconds=1)).to_pydatetime(),
                feed=DataFeed(feed),
                adjustment=Adjustment(adjustment),
            )
            try:
                raw = client.get_stock_bars(req)
            except APIError as err:
                raise api_error(err, feed, group, a, b) from None
            except OSError as err:  # requests' connection errors, after the retries
                url = os.environ.get(URL_ENV) or "data.alpaca.markets"
                raise FinpodError(
                    f"cannot reach Alpaca at {url}: {type(err).__name__}",
                    "check the network connection; days already fetched are cached",
                ) from None
            for s, df in _frame(raw or {}, group).items():
                if b < today:  # whole past days only: today's bars are still arriving
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


def load_alpaca(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    feed: str | None = None,
    adjustment: str | None = None,
    benchmark: str | Path | None = None,
    cache_dir: str | Path | None = None,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
    now: pd.Timestamp | None = None,
    rate_per_min: float = FREE_RATE_PER_MIN,
    drop_bad_tickers: bool = False,
) -> LoadedSource:
    """Bars from Alpaca (needs keys and network), cached per (symbol, chunk) on disk.

    Args:
        tickers: symbols, or ``"nasdaq100"`` for every member during ``[start, end]`` (each
            buyable only while a member; sellable, at its real prices, outside).
        bar: ``1min`` (default), ``5min``, ``15min``, ``30min``, ``60min`` or ``1d``.
        feed: ``iex`` (default; free) or ``sip`` (all US exchanges; the free plan lacks the
            last 15 minutes).
        adjustment: ``all`` (default: splits and dividends, like the sample), ``split``,
            ``dividend`` or ``raw``.
        benchmark: a CSV/Parquet file of index levels (aligned causally, as for ``files``),
            or a fund symbol fetched from Alpaca as a labelled **proxy** of the index
            (e.g. ``QQQ``). Alpaca has no index levels itself. Default: none.
        cache_dir: chunk cache (default ``data/cache/alpaca``); a rerun skips chunks there.
        now: the current instant (tests); its New York date is "today", never cached.
        rate_per_min: requests per minute to stay under (200 on the free plan).
        drop_bad_tickers: build without a ticker that loses most of its bars in cleaning
            (listed with its cause) instead of failing (:mod:`finpod.data.ticker_rule`).
    """
    bar = normalize_bar(bar or "1min")
    if bar not in ALPACA_BARS:
        raise FinpodError(f"alpaca has no {bar} bars here", f"use one of {', '.join(ALPACA_BARS)}")
    feed = (feed or "iex").strip().lower()
    if feed not in FEEDS:
        raise FinpodError(f"unknown --feed {feed!r}", "use iex (free) or sip")
    adjustment = (adjustment or "all").strip().lower()
    if adjustment not in ADJUSTMENTS:
        raise FinpodError(
            f"unknown --adjustment {adjustment!r}", f"use one of {', '.join(ADJUSTMENTS)}"
        )
    if start is None:
        raise FinpodError("the alpaca source needs --start", "e.g. --start 2020-01-01")
    now_ny = pd.Timestamp.now(tz=TZ) if now is None else pd.Timestamp(now).tz_convert(TZ)
    today = now_ny.tz_localize(None).normalize()
    end = end or str(today.date())
    universe_pit = isinstance(tickers, str) and tickers.strip().lower() == "nasdaq100"
    tick = nasdaq100_members(start=start, end=end) if universe_pit else ticker_list(tickers)
    if not tick:
        raise FinpodError(
            "the alpaca source needs tickers", "pass --tickers AAPL,MSFT or --tickers nasdaq100"
        )
    need_keys()
    days = sessions(start, end, calendar)
    days = days[days <= today]
    if len(days) == 0:
        raise FinpodError(f"no {calendar} session between {start} and {end}", "check the dates")
    bench_file = bench_symbol = None
    if benchmark is not None and str(benchmark).strip().lower() not in ("", "none"):
        text = str(benchmark).strip()
        if Path(text).exists() or text.lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
            bench_file = text
        else:
            bench_symbol = text.upper()
    counter: dict = {}
    symbols = tick + ([bench_symbol] if bench_symbol and bench_symbol not in tick else [])
    fetched = fetch_bars(
        symbols,
        days,
        bar,
        feed=feed,
        adjustment=adjustment,
        cache_dir=cache_dir,
        today=today,
        rate_per_min=rate_per_min,
        progress=progress,
        counter=counter,
    )
    only_bench = bench_symbol is not None and bench_symbol not in tick
    rows = fetched[fetched["tic"] != bench_symbol] if only_bench else fetched
    got = set(rows["tic"].unique())
    empty = sorted(set(tick) - got)
    if len(rows) == 0:
        raise FinpodError(
            f"Alpaca returned no {feed} bars for {', '.join(tick[:5])}"
            f"{'…' if len(tick) > 5 else ''} ({start} → {end}, {bar})",
            "check the symbols and dates (IEX data starts 2016; SIP 2016 too)",
        )
    bars, report, bench, bench_info = clean_vendor_bars(
        rows,
        bar,
        bar_label="start",  # Alpaca stamps a bar at its start
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where=f"alpaca {feed}",
        benchmark=bench_file,
        benchmark_bar_label="auto",
        drop_bad_tickers=drop_bad_tickers,
    )
    report["alpaca_requests"] = int(counter.get("requests", 0))
    report["alpaca_retries"] = int(counter.get("retries", 0))
    no_data = f"no {feed} data on Alpaca (often delisted before its data begins"
    info = vendor_universe(bars, report, tick, start, end, universe_pit, empty, "alpaca", no_data)
    notes: list[str] = []
    if bench_symbol:
        lv = fetched[fetched["tic"] == bench_symbol].sort_values("timestamp")
        if len(lv) == 0:
            raise FinpodError(
                f"Alpaca returned no {feed} bars for the benchmark {bench_symbol}",
                "name a fund Alpaca has (e.g. QQQ), pass a file of index levels, or --benchmark none",
            )
        # Daily stamps are midnight New York (in UTC): read as that session's date.
        series = pd.Series(lv["close"].to_numpy(), index=pd.Index(lv["timestamp"]))
        bench = align_benchmark(
            series, bars.timestamps, bars.bar, calendar=calendar, bar_label="start"
        )
        bench_info = {
            "name": f"{bench_symbol} (proxy)",
            "kind": PROXY_KIND,
            "source": f"alpaca {bench_symbol} close, {bar}, {feed} feed, adjustment {adjustment}",
        }
        notes.append(
            f"benchmark: {bench_symbol} is a fund used as a proxy of the index, not the index level"
        )
    elif bench_file is None:
        notes.append(
            "no index benchmark: Alpaca has no index levels; pass --benchmark FILE of index "
            "levels or --benchmark QQQ for a labelled proxy"
        )
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "tickers": "nasdaq100" if universe_pit else tick,
            "start": start,
            "end": end,
            "bar": bar,
            "feed": feed,
            "adjustment": adjustment,
            "benchmark": None if benchmark is None else str(benchmark),
        },
        universe="NASDAQ-100 point-in-time members"
        if universe_pit
        else f"{len(bars.tickers)} tickers"
        + (f" of the {len(tick)} asked" if len(bars.tickers) != len(tick) else ""),
        universe_info=info,
        benchmark=bench,
        benchmark_info=bench_info,
        notes=notes,
    )
