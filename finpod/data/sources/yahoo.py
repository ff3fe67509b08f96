"""``yfinance``: Yahoo Finance bars through yfinance, chunked within Yahoo's per-interval
limits, cached per chunk on disk (a rerun resumes where it stopped), with the ^NDX index
fetched alongside as the benchmark."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.atomic import atomic_write
from finpod.data.benchmark import BENCHMARK_KIND, align_benchmark
from finpod.data.calendar import normalize_bar
from finpod.data.clean import clean_long
from finpod.data.sources.loaded import LoadedSource, ticker_list, vendor_universe
from finpod.data.universe import SAMPLE_DIR, nasdaq100_members
from finpod.errors import FinpodError

#: Yahoo's limits per interval: (longest span per request, how far back data exists).
#: None = unlimited. Days are calendar days.
YF_LIMITS: dict[str, tuple[int | None, int | None]] = {
    "1m": (7, 30),
    "2m": (60, 60),
    "5m": (60, 60),
    "15m": (60, 60),
    "30m": (60, 60),
    "60m": (730, 730),
    "90m": (60, 60),
    "1h": (730, 730),
    "1d": (None, None),
}
#: Finpod bar → Yahoo interval.
YF_INTERVALS = {
    "1min": "1m",
    "2min": "2m",
    "5min": "5m",
    "15min": "15m",
    "30min": "30m",
    "60min": "60m",
    "90min": "90m",
    "1d": "1d",
}
#: The index fetched with the bars unless another symbol is asked for.
DEFAULT_INDEX = "^NDX"


def plan_chunks(
    start: str | pd.Timestamp,
    end: str | pd.Timestamp,
    interval: str,
    now: pd.Timestamp | None = None,
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Request windows ``[a, b)`` covering ``[start, end]`` within Yahoo's limits.

    Raises:
        FinpodError: unknown interval, or ``start`` older than the interval allows.
    """
    if interval not in YF_LIMITS:
        raise FinpodError(
            f"yfinance has no {interval!r} interval", f"use one of {', '.join(YF_LIMITS)}"
        )
    now = (
        pd.Timestamp.now(tz="UTC").tz_convert(None)
        if now is None
        else pd.Timestamp(now).tz_localize(None)
    )
    s = pd.Timestamp(start).tz_localize(None) if pd.Timestamp(start).tzinfo else pd.Timestamp(start)
    e = pd.Timestamp(end).tz_localize(None) if pd.Timestamp(end).tzinfo else pd.Timestamp(end)
    e = e.normalize() + pd.Timedelta(days=1)  # end is inclusive
    if e <= s:
        raise FinpodError(f"end {end} is before start {start}")
    span, lookback = YF_LIMITS[interval]
    if lookback is not None and s < now.normalize() - pd.Timedelta(days=lookback - 1):
        raise FinpodError(
            f"Yahoo keeps {interval} bars for only the last ~{lookback} days, but start is {s.date()}",
            f"start on or after {(now.normalize() - pd.Timedelta(days=lookback - 1)).date()}, use a coarser --bar, or bring vendor files with --source files",
        )
    if span is None:
        return [(s, e)]
    chunks = []
    a = s
    while a < e:
        b = min(e, a + pd.Timedelta(days=span))
        chunks.append((a, b))
        a = b
    return chunks


#: curl's errors that mean no network (yfinance logs them and returns an empty frame):
#: 5/6 host not resolved, 7 no connection, 28 timed out, 35 TLS handshake failed.
_CURL_NETWORK = re.compile(r"curl: \((5|6|7|28|35)\) (.+?)(?:\. See |\.?$)")


class _NetworkWatch(logging.Handler):
    """Notes the first curl network error yfinance logs (it does not raise them)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.cause: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        found = _CURL_NETWORK.search(record.getMessage())
        if found and self.cause is None:
            self.cause = f"{found.group(2).strip()} (curl error {found.group(1)})"


def _fetch(
    tic: str,
    chunks: list[tuple[pd.Timestamp, pd.Timestamp]],
    interval: str,
    cache: Path,
    today: pd.Timestamp,
    progress: Any,
    task: Any,
) -> list[pd.DataFrame]:
    """Long rows of ``tic`` for every chunk, from the cache or from Yahoo (then cached)."""
    # lazy: yfinance loads only to download (tests/test_boundaries.py)
    import yfinance as yf

    frames = []
    for a, b in chunks:
        f = cache / interval / tic / f"{a:%Y%m%d%H%M}_{b:%Y%m%d%H%M}.parquet"
        if f.exists():
            part = pd.read_parquet(f)
        else:
            watch = _NetworkWatch()
            logging.getLogger("yfinance").addHandler(watch)
            try:
                raw = yf.download(
                    tic,
                    start=a,
                    end=b,
                    interval=interval,
                    auto_adjust=False,
                    progress=False,
                    threads=False,
                )
            except Exception as err:  # noqa: BLE001 - network stacks raise many types
                raise FinpodError(
                    f"yfinance request for {tic} failed: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
                    "check the network connection; chunks already downloaded are cached",
                ) from err
            finally:
                logging.getLogger("yfinance").removeHandler(watch)
            part = _yf_frame(raw, tic)
            if len(part) == 0 and watch.cause:
                # yfinance logs a lost network and returns nothing: one line now, rather
                # than the same failure for every ticker and chunk left.
                raise FinpodError(
                    f"cannot reach Yahoo Finance: {watch.cause}",
                    "check the network connection; chunks already downloaded are cached; "
                    "offline, use --source sample or --source files",
                )
            if len(part) and b <= today:
                # Only whole past days are cached: today's bars are still arriving.
                atomic_write(f, lambda p, part=part: part.to_parquet(p))
        frames.append(part)
        if task is not None:
            progress.advance(task, 1)
    return frames


def load_yfinance(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    cache_dir: str | Path | None = None,
    benchmark: str | None = None,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
    now: pd.Timestamp | None = None,
    drop_bad_tickers: bool = False,
) -> LoadedSource:
    """Bars from Yahoo Finance (needs network), one cached Parquet per (ticker, chunk).

    Args:
        tickers: symbols, or ``"nasdaq100"`` for every member during ``[start, end]`` (each
            buyable only while a member; sellable, at its real prices, outside).
        cache_dir: chunk cache (default ``data/cache/yfinance`` in the repository); a rerun
            skips chunks already there, so an interrupted download resumes.
        benchmark: the index symbol fetched with the bars (default ``^NDX``; ``"none"``
            fetches none). Its levels are aligned causally to the bars.
        drop_bad_tickers: build without a ticker that loses most of its bars in cleaning
            (listed with its cause) instead of failing (:mod:`finpod.data.ticker_rule`).
    """
    bar = normalize_bar(bar or "1d")
    interval = YF_INTERVALS.get(bar)
    if interval is None:
        raise FinpodError(f"yfinance has no {bar} bars", f"use one of {', '.join(YF_INTERVALS)}")
    if start is None:
        raise FinpodError("the yfinance source needs --start", "e.g. --start 2015-01-01")
    end = end or str(pd.Timestamp.now().date())
    universe_pit = isinstance(tickers, str) and tickers.strip().lower() == "nasdaq100"
    tick = nasdaq100_members(start=start, end=end) if universe_pit else ticker_list(tickers)
    if not tick:
        raise FinpodError(
            "the yfinance source needs tickers", "pass --tickers AAPL,MSFT or --tickers nasdaq100"
        )
    index = DEFAULT_INDEX if benchmark is None else str(benchmark).strip()
    if index.lower() in ("", "none"):
        index = ""
    chunks = plan_chunks(start, end, interval, now)
    today = (
        pd.Timestamp.now(tz="UTC").tz_convert(None) if now is None else pd.Timestamp(now)
    ).normalize()
    cache = Path(cache_dir) if cache_dir else SAMPLE_DIR.parent / "cache" / "yfinance"
    total = (len(tick) + bool(index)) * len(chunks)
    task = progress.add_task("yfinance", total=total) if progress is not None else None
    frames, empty = [], []
    for tic in tick:
        parts = [p for p in _fetch(tic, chunks, interval, cache, today, progress, task) if len(p)]
        if not parts:
            empty.append(tic)
        frames.extend(parts)
    if not frames:
        raise FinpodError(
            f"yfinance returned no data for {', '.join(tick[:5])}{'…' if len(tick) > 5 else ''} ({start} → {end}, {interval})",
            "check the network connection and the ticker symbols; offline, use --source sample or --source files",
        )
    df = pd.concat(frames, ignore_index=True)
    bars, report = clean_long(
        df,
        bar,
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where="yfinance",
        drop_bad_tickers=drop_bad_tickers,
    )
    no_data = "no data on Yahoo (often delisted"
    info = vendor_universe(bars, report, tick, start, end, universe_pit, empty, "yahoo", no_data)
    notes: list[str] = []
    bench = bench_info = None
    if index:
        parts = [p for p in _fetch(index, chunks, interval, cache, today, progress, task) if len(p)]
        if parts:
            lv = pd.concat(parts, ignore_index=True).drop_duplicates("timestamp", keep="last")
            series = pd.Series(lv["close"].to_numpy(), index=pd.Index(lv["timestamp"]))
            bench = align_benchmark(
                series,
                bars.timestamps,
                bars.bar,
                calendar=calendar,
                bar_label="start",  # Yahoo stamps intraday bars at their start
            )
            bench_info = {
                "name": index,
                "kind": BENCHMARK_KIND,
                "source": f"yfinance {index} close, {interval}",
            }
        else:
            notes.append(f"no {index} levels from Yahoo for this range: no index benchmark")
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "tickers": "nasdaq100" if universe_pit else tick,
            "start": start,
            "end": end,
            "interval": interval,
            "benchmark": index or None,
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


def _yf_frame(raw: pd.DataFrame | None, tic: str) -> pd.DataFrame:
    """yfinance's frame (possibly with a (field, ticker) column MultiIndex) → long rows."""
    if raw is None or len(raw) == 0:
        return pd.DataFrame(columns=["timestamp", "tic", "open", "high", "low", "close", "volume"])
    df = raw.copy()
    if isinstance(df.columns, pd.MultiIndex):
        lvl = 0 if "Close" in df.columns.get_level_values(0) else 1
        df.columns = df.columns.get_level_values(lvl)
    df = df.rename(columns=str.lower)
    df = df.reset_index()
    df = df.rename(columns={df.columns[0]: "timestamp"})
    df["tic"] = tic
    return df[["timestamp", "tic", "open", "high", "low", "close", "volume"]]
