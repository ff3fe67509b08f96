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
  data of the last 15 minutes on the free plan) is one line naming the feed.
- Cache: every (feed, adjustment, timeframe, symbol, chunk) of whole past days is written
  to ``data/cache/alpaca/`` as Parquet (atomically), empty chunks too. The cache is the
  resume state: a rerun after an interruption requests only the chunks not there. Today's
  (partial) day is never cached.
- Bars keep Alpaca's label: ``t`` is the bar's start, in UTC. The long table
  (``timestamp, tic, open, high, low, close, volume``) then goes through the same cleaning,
  benchmark alignment and splits as the ``files`` source (:func:`clean_vendor_bars`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ, bar_minutes, normalize_bar, sessions
from finpod.data.sources.base import LoadedSource, ticker_list
from finpod.data.sources.files import clean_vendor_bars
from finpod.data.universe import SAMPLE_DIR, apply_membership, nasdaq100_members, universe_info
from finpod.errors import FinpodError

#: Environment variables of the keys (the SDK's own names).
KEY_ENV, SECRET_ENV = "APCA_API_KEY_ID", "APCA_API_SECRET_KEY"
#: Environment variable of the data server's base URL (default: Alpaca's).
URL_ENV = "FINPOD_ALPACA_DATA_URL"
#: Environment variable of the first backoff wait after an HTTP 429, in seconds.
BACKOFF_ENV = "FINPOD_ALPACA_BACKOFF_S"
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
#: Requests per minute of the free plan.
FREE_RATE_PER_MIN = 200
#: Retries of a request answered 429/502/503/504, and the longest wait between two.
RETRIES, MAX_WAIT_S = 7, 60.0
RETRY_STATUS = (429, 502, 503, 504)
#: Seconds before a silent connection is given up (then retried like a 503).
TIMEOUT_S = 60.0
#: Columns of a cached chunk: Alpaca's bar fields, ``t`` as UTC nanoseconds.
CACHE_COLUMNS = ("symbol", "t", "o", "h", "l", "c", "v", "n", "vw")
#: How a proxy ETF benchmark is labelled in the manifest.
PROXY_KIND = "ETF price used as a proxy of the index (a fund: fees inside, not the index level)"


def _need_keys() -> tuple[str, str]:
    key, secret = os.environ.get(KEY_ENV, "").strip(), os.environ.get(SECRET_ENV, "").strip()
    if not key or not secret:
        missing = " and ".join(n for n, v in ((KEY_ENV, key), (SECRET_ENV, secret)) if not v)
        raise FinpodError(
            f"the alpaca source needs API keys: {missing} not set",
            "make a free account at alpaca.markets (paper-trading keys work for market data), "
            f"then export {KEY_ENV}=... {SECRET_ENV}=...",
        )
    return key, secret


def _backoff_s() -> float:
    try:
        return max(0.0, float(os.environ.get(BACKOFF_ENV, "2")))
    except ValueError as err:
        raise FinpodError(f"{BACKOFF_ENV} must be a number of seconds", "e.g. 2") from err


def _paced_session(rate_per_min: float, backoff_s: float, counter: dict):
    """A ``requests.Session`` that paces requests to ``rate_per_min`` (a token bucket of one
    minute's requests), sets a timeout, and retries 429/5xx-busy answers and dropped
    connections with exponential backoff; the final answer goes back to the SDK."""
    import requests

    class PacedSession(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = float(rate_per_min)
            self.stamp = time.monotonic()
            self.lock = threading.Lock()

        def _take(self) -> None:
            with self.lock:
                while True:
                    now = time.monotonic()
                    self.tokens = min(
                        rate_per_min, self.tokens + (now - self.stamp) * rate_per_min / 60.0
                    )
                    self.stamp = now
                    if self.tokens >= 1.0:
                        self.tokens -= 1.0
                        return
                    time.sleep((1.0 - self.tokens) * 60.0 / rate_per_min)

        def request(self, method, url, **kwargs):  # type: ignore[override]
            kwargs.setdefault("timeout", TIMEOUT_S)
            for attempt in range(RETRIES + 1):
                self._take()
                counter["requests"] += 1
                try:
                    resp = super().request(method, url, **kwargs)
                except (requests.ConnectionError, requests.Timeout):
                    if attempt == RETRIES:
                        raise
                    resp = None
                if resp is not None and (
                    resp.status_code not in RETRY_STATUS or attempt == RETRIES
                ):
                    return resp
                wait = min(MAX_WAIT_S, backoff_s * 2**attempt)
                if resp is not None and resp.headers.get("Retry-After", "").isdigit():
                    wait = min(MAX_WAIT_S, float(resp.headers["Retry-After"]))
                counter["retries"] += 1
                counter["waited_s"] += wait
                time.sleep(wait)
            raise AssertionError("unreachable")

    return PacedSession()


def make_client(rate_per_min: float = FREE_RATE_PER_MIN, counter: dict | None = None):
    """The SDK's ``StockHistoricalDataClient`` with the keys from the environment, the URL of
    ``FINPOD_ALPACA_DATA_URL`` if set, and the paced, retrying HTTP session."""
    key, secret = _need_keys()
    from alpaca.data.historical import StockHistoricalDataClient

    url = os.environ.get(URL_ENV, "").strip().rstrip("/") or None
    client = StockHistoricalDataClient(key, secret, raw_data=True, url_override=url)
    counter = counter if counter is not None else {}
    for k in ("requests", "retries", "waited_s"):
        counter.setdefault(k, 0)
    # The SDK's own retry waits a fixed 3 s on 429/504; the session above retries with
    # exponential backoff instead, so the SDK's is switched off (it then raises at once).
    client._session = _paced_session(rate_per_min, _backoff_s(), counter)
    client._retry_codes = [0]
    return client


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


def _api_error(err: Exception, feed: str, symbols: list[str], a, b) -> FinpodError:
    status = getattr(err, "status_code", None)
    try:
        msg = str(getattr(err, "message", "") or err)
    except Exception:  # noqa: BLE001 - the SDK parses the body as JSON here
        msg = str(err)
    msg = " ".join(msg.split())[:160]
    what = f"{','.join(symbols[:3])}{'…' if len(symbols) > 3 else ''} {a.date()}→{b.date()}"
    if status == 403:
        return FinpodError(
            f"Alpaca refused the {feed} feed data for {what} (HTTP 403: {msg})",
            "the free plan has no SIP data of the last 15 minutes: use --feed iex, or an --end "
            "earlier than 15 minutes ago; check that the keys are for market data",
        )
    if status == 401:
        return FinpodError(
            f"Alpaca rejected the API keys (HTTP 401: {msg})",
            f"check {KEY_ENV} and {SECRET_ENV} (alpaca.markets → API keys)",
        )
    if status in RETRY_STATUS:
        return FinpodError(
            f"Alpaca kept answering HTTP {status} (rate limit or busy) for {what} after "
            f"{RETRIES} retries with backoff",
            "wait a few minutes and rerun the same command: the days already fetched are "
            "cached and are not requested again",
        )
    return FinpodError(
        f"Alpaca request for {what} failed (HTTP {status}: {msg})",
        "check the symbols, --feed and dates; days already fetched are cached",
    )


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
    from alpaca.common.exceptions import APIError
    from alpaca.data.enums import Adjustment, DataFeed
    from alpaca.data.requests import StockBarsRequest
    from alpaca.data.timeframe import TimeFrame, TimeFrameUnit

    from finpod.atomic import atomic_write

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
                raise _api_error(err, feed, group, a, b) from None
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
    """Alpaca's bar fields → the long table the ``files`` source reads (UTC bar starts)."""
    return pd.DataFrame(
        {
            "timestamp": pd.DatetimeIndex(cached["t"].to_numpy(dtype="int64")).tz_localize("UTC"),
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
    _need_keys()
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
    )
    report["alpaca_requests"] = int(counter.get("requests", 0))
    report["alpaca_retries"] = int(counter.get("retries", 0))
    if empty:
        report["no_data_from_alpaca"] = empty
    notes: list[str] = []
    if universe_pit:
        apply_membership(bars, report)
        note = (
            f"NASDAQ-100 point-in-time: every member during {start} → {end}, each buyable only "
            "while in the index"
        )
        if empty:
            note += (
                f"; {len(empty)} member(s) have no {feed} data on Alpaca (often delisted "
                f"before its data begins: {' '.join(empty[:8])}), so some survivorship bias remains"
            )
        info = universe_info(not empty, note)
    else:
        info = universe_info(
            False,
            f"tickers chosen by the user ({', '.join(tick[:5])}{'…' if len(tick) > 5 else ''}) "
            f"for {start} → {end}: if chosen with hindsight (e.g. today's index members), "
            "survivorship bias",
        )
    if bench_symbol:
        from finpod.data.benchmark import align_benchmark

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
        universe="NASDAQ-100 point-in-time members" if universe_pit else f"{len(tick)} tickers",
        universe_info=info,
        benchmark=bench,
        benchmark_info=bench_info,
        notes=notes,
    )
