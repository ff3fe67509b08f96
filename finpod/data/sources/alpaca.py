"""``alpaca``: years of 1-minute (to daily) US stock bars from Alpaca's market data API,
through the official ``alpaca-py`` SDK (``StockHistoricalDataClient`` + ``StockBarsRequest``).

- Keys: ``APCA_API_KEY_ID`` and ``APCA_API_SECRET_KEY`` (a free alpaca.markets account;
  paper-trading keys work for market data).
- ``FINPOD_ALPACA_DATA_URL`` points the SDK at another data server (a proxy, a test server
  on loopback); default: Alpaca's own.
- Feed: ``sip`` (default: every US exchange, consolidated) or ``iex`` (IEX's own trades,
  ~3.5 % of the volume, no bar in a minute without an IEX trade). SIP requests end 15
  minutes before now (the free plan's delay), and the console says so in one line.
- Requests are chunked: each symbol's sessions are cut into calendar months (years for hourly
  and daily bars); a chunk is requested whole or session by session (open to close, no
  extended hours), whichever takes fewer pages, with symbols grouped to fill 10,000-bar
  pages; the SDK follows ``next_page_token`` for the rest (:mod:`.alpaca_plan`, which also
  gives the request plan of a download).
- Rate limit: requests are paced to ``rate_per_min`` (200, the free plan's); an HTTP 429
  (or 502/503/504) gets the long backoff, each wait shown; a refused connection is one line
  within seconds; an HTTP 403 (e.g. SIP data of the last 15 minutes on the free plan) is
  one line naming the feed (:mod:`.alpaca_client`).
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

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.data.benchmark import align_benchmark
from finpod.data.calendar import TZ, normalize_bar, sessions
from finpod.data.feature_table import check_feature_request, read_feature_file
from finpod.data.sources.alpaca_client import FREE_RATE_PER_MIN, need_keys
from finpod.data.sources.alpaca_fetch import ALPACA_BARS, fetch_bars
from finpod.data.sources.alpaca_plan import RequestPlan, request_plan
from finpod.data.sources.files import clean_vendor_bars
from finpod.data.sources.loaded import LoadedSource, ticker_list, vendor_universe
from finpod.data.universe import nasdaq100_members
from finpod.errors import FinpodError

FEEDS = ("sip", "iex")
ADJUSTMENTS = ("all", "split", "dividend", "raw")
#: How a proxy ETF benchmark is labelled in the manifest.
PROXY_KIND = "ETF price used as a proxy of the index (a fund: fees inside, not the index level)"


def _scope(tickers, start, end, bar, feed, calendar, now):
    """The checked ``(bar, feed, tickers, universe_pit, session days, now (New York), end)``
    of a download."""
    bar = normalize_bar(bar or "1min")
    if bar not in ALPACA_BARS:
        raise FinpodError(f"alpaca has no {bar} bars here", f"use one of {', '.join(ALPACA_BARS)}")
    feed = (feed or "sip").strip().lower()
    if feed not in FEEDS:
        raise FinpodError(f"unknown --feed {feed!r}", "use sip (default) or iex")
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
    days = sessions(start, end, calendar)
    days = days[days <= today]
    if len(days) == 0:
        raise FinpodError(f"no {calendar} session between {start} and {end}", "check the dates")
    return bar, feed, tick, universe_pit, days, now_ny, end


def plan_download(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    feed: str | None = None,
    calendar: str = "XNYS",
    rate_per_min: float = FREE_RATE_PER_MIN,
    now: pd.Timestamp | None = None,
) -> RequestPlan:
    """The request plan of a download (nothing cached counted; no keys needed): at most how
    many requests, and their minutes at ``rate_per_min``."""
    bar, feed, tick, _, days, _, _ = _scope(tickers, start, end, bar, feed, calendar, now)
    return request_plan(len(tick), days, bar, feed, rate_per_min)


def _say(progress: Any) -> Callable[[str], None]:
    """A one-line message to the console: above the progress bars when there are some."""
    console = getattr(progress, "console", None)
    if console is not None:
        return lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True)
    return lambda line: print(line, file=sys.stderr, flush=True)


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
    feature_file: str | Path | None = None,
    feature_columns: list[str] | str | None = None,
) -> LoadedSource:
    """Bars from Alpaca (needs keys and network), cached per (symbol, chunk) on disk.

    Args:
        tickers: symbols, or ``"nasdaq100"`` for every member during ``[start, end]`` (each
            buyable only while a member; sellable, at its real prices, outside).
        bar: ``1min`` (default), ``5min``, ``15min``, ``30min``, ``60min`` or ``1d``.
        feed: ``sip`` (default: all US exchanges; requests end 15 minutes before now, the
            free plan's delay) or ``iex`` (IEX's trades only).
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
        feature_file, feature_columns: user feature columns (``--feature-column NAME``)
            read from a CSV/Parquet table of ``timestamp|date, tic, NAME…`` (intraday stamps
            mark the bar's start, as Alpaca's do), placed at their own bars and checked like
            every user feature (:mod:`finpod.data.feature_table`).
    """
    bar, feed, tick, universe_pit, days, now_ny, end = _scope(
        tickers, start, end, bar, feed, calendar, now
    )
    wanted = check_feature_request(feature_file, feature_columns, "alpaca")
    if feature_file is not None and not Path(feature_file).is_file():
        raise FinpodError(f"feature file {feature_file} does not exist", "check the path")
    adjustment = (adjustment or "all").strip().lower()
    if adjustment not in ADJUSTMENTS:
        raise FinpodError(
            f"unknown --adjustment {adjustment!r}", f"use one of {', '.join(ADJUSTMENTS)}"
        )
    need_keys()
    today = now_ny.tz_localize(None).normalize()
    say = _say(progress)
    bench_file = bench_symbol = None
    if benchmark is not None and str(benchmark).strip().lower() not in ("", "none"):
        text = str(benchmark).strip()
        if Path(text).exists() or text.lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
            bench_file = text
        else:
            bench_symbol = text.upper()
    say(request_plan(len(tick), days, bar, feed, rate_per_min, today).line())
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
        now=now_ny,
        calendar=calendar,
        rate_per_min=rate_per_min,
        progress=progress,
        counter=counter,
        say=say,
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
    if wanted:
        bars.extra.update(read_feature_file(feature_file, wanted, bars, report=report))
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
            "feature_file": None if feature_file is None else str(feature_file),
            "feature_columns": wanted or None,
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
