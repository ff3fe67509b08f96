"""The four sources behind one interface: :func:`load_source` → :class:`LoadedSource`.

- ``sample``: NASDAQ-100 daily bars 2010–2019 (95 members of 2019-12-31) and the ^NDX index,
  shipped in the repository's ``data/sample`` folder; works offline.
- ``yfinance``: Yahoo Finance through yfinance, chunked within Yahoo's per-interval limits,
  cached per chunk on disk (a rerun resumes where it stopped).
- ``files``: a directory (or one file) of vendor CSV/Parquet bars, one file per ticker or
  one long table.
- ``synthetic``: the seeded generator of :mod:`finpod.data.synthetic`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ, normalize_bar
from finpod.data.clean import Bars, clean_long
from finpod.errors import FinpodError

#: Where the shipped sample lives (the repository's data/sample folder).
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "sample"
SAMPLE_DAILY = "nasdaq100_daily_2010-2019.csv.gz"
SAMPLE_INDEX = "ndx_index_daily_1985-2019.csv"
SAMPLE_UNIVERSE = "nasdaq100_daily_2010-2019.universe.json"
MEMBERSHIP = "nasdaq100_membership.csv"

#: Default sample splits. Train 2010–2016 (7 years: a full cycle incl. the 2011 and 2015–16
#: drawdowns), validation 2017–2018 (two years ≈ 500 sessions, enough for a Sharpe estimate
#: with a standard error near 0.7 and containing the late-2018 sell-off, so selection is
#: not rewarded for pure beta), backtest 2019 (the last year, untouched until the backtest).
SAMPLE_SPLITS: dict[str, tuple[str, str]] = {
    "train": ("2010-01-01", "2016-12-31"),
    "validation": ("2017-01-01", "2018-12-31"),
    "backtest": ("2019-01-01", "2019-12-31"),
}


@dataclass
class LoadedSource:
    """What a source hands to the dataset builder."""

    bars: Bars
    report: dict
    options: dict
    universe: str
    benchmark: pd.Series | None = None
    benchmark_name: str | None = None
    default_splits: dict[str, tuple[str, str]] | None = None
    notes: list[str] = field(default_factory=list)


def load_source(source: str, *, progress: Any = None, **opts: Any) -> LoadedSource:
    """Dispatch to ``load_<source>``; unknown options are an error naming them."""
    fn = {
        "sample": load_sample,
        "yfinance": load_yfinance,
        "files": load_files,
        "synthetic": load_synthetic,
    }.get(source)
    if fn is None:
        raise FinpodError(f"unknown source {source!r}", "use sample, yfinance, files or synthetic")
    import inspect

    params = inspect.signature(fn).parameters
    unknown = [k for k, v in opts.items() if k not in params and v is not None]
    if unknown:
        raise FinpodError(
            f"option(s) {', '.join(unknown)} do not apply to the {source} source",
            "see finpod download --help",
        )
    kwargs = {k: v for k, v in opts.items() if k in params}
    if "progress" in params:
        kwargs["progress"] = progress
    return fn(**kwargs)


def _ticker_list(tickers: list[str] | str | None) -> list[str] | None:
    if tickers is None:
        return None
    if isinstance(tickers, str):
        tickers = [t for t in re.split(r"[,\s]+", tickers) if t]
    return [t.strip().upper() for t in tickers if t.strip()]


def _check_known(asked: list[str] | None, known: list[str], where: str) -> None:
    if asked is None:
        return
    unknown = sorted(set(asked) - set(known))
    if unknown:
        raise FinpodError(
            f"unknown ticker(s) {', '.join(unknown)} in {where}",
            f"{where} has {len(known)} tickers, e.g. {', '.join(sorted(known)[:5])}",
        )


# --------------------------------------------------------------------------- membership
def load_membership(path: Path | None = None) -> pd.DataFrame:
    """Point-in-time NASDAQ-100 membership: ``symbol, name, start, end`` (end NaT = still in)."""
    path = path or SAMPLE_DIR / MEMBERSHIP
    if not path.exists():
        raise FinpodError(
            f"membership file {path} not found", "run from a finpod checkout with data/sample"
        )
    m = pd.read_csv(path)
    m = m.rename(columns={"opt-in": "start", "opt-out": "end"})
    m["start"] = pd.to_datetime(m["start"])
    m["end"] = pd.to_datetime(m["end"])
    return m


def nasdaq100_members(
    on: str | pd.Timestamp | None = None, start: str | None = None, end: str | None = None
) -> list[str]:
    """Symbols that were members on ``on``, or at any time in ``[start, end]``."""
    m = load_membership()
    if on is not None:
        d = pd.Timestamp(on)
        sel = (m["start"] <= d) & (m["end"].isna() | (m["end"] > d))
    else:
        lo = pd.Timestamp(start or "1900-01-01")
        hi = pd.Timestamp(end or "2100-01-01")
        sel = (m["start"] <= hi) & (m["end"].isna() | (m["end"] > lo))
    return sorted(m.loc[sel, "symbol"].astype(str).str.upper().unique())


def membership_mask(bars: Bars) -> np.ndarray:
    """(T, N) bool: ticker was a NASDAQ-100 member on that bar's session."""
    m = load_membership()
    dates = bars.timestamps.tz_convert(TZ).tz_localize(None).normalize()
    mask = np.zeros(bars.close.shape, dtype=bool)
    for j, tic in enumerate(bars.tickers):
        for _, row in m[m["symbol"].str.upper() == tic].iterrows():
            hi = row["end"] if pd.notna(row["end"]) else pd.Timestamp("2100-01-01")
            mask[:, j] |= np.asarray((dates >= row["start"]) & (dates < hi))
    return mask


# --------------------------------------------------------------------------- sample
def load_sample(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    adjust: str = "split",
    point_in_time: bool = False,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
) -> LoadedSource:
    """The shipped NASDAQ-100 daily sample.

    Args:
        adjust: ``"split"`` (prices as shipped: split-adjusted, comparable with the ^NDX
            price index) or ``"total"`` (OHLC scaled by adj_close/close: dividends
            reinvested).
        point_in_time: also mask each ticker outside its NASDAQ-100 membership (the sample
            holds the 2019-12-31 members only, so this does not remove survivorship bias;
            it only stops trading a stock before it joined the index).
    """
    if bar is not None and normalize_bar(bar) != "1d":
        raise FinpodError(
            f"the sample has daily bars only, not {bar}", "use --bar 1d or another source"
        )
    if adjust not in ("split", "total"):
        raise FinpodError(f"unknown adjustment {adjust!r}", "use split or total")
    path = SAMPLE_DIR / SAMPLE_DAILY
    if not path.exists():
        raise FinpodError(
            f"sample data not found at {path}", "run finpod from a checkout that has data/sample"
        )
    df = pd.read_csv(path)
    tick = _ticker_list(tickers)
    known = sorted(df["tic"].unique())
    _check_known(tick, known, "the sample")
    if tick is not None:
        df = df[df["tic"].isin(tick)]
    if adjust == "total":
        f = df["adj_close"] / df["close"]
        for c in ("open", "high", "low", "close"):
            df[c] = df[c] * f
    df = df.drop(columns=["adj_close"])
    bars, report = clean_long(
        df,
        "1d",
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where="the sample",
    )
    universe = json.loads((SAMPLE_DIR / SAMPLE_UNIVERSE).read_text(encoding="utf-8"))
    missing = universe.get("skipped_not_in_source", [])
    notes = [
        "survivorship: the tickers are the NASDAQ-100 members of 2019-12-31; earlier leavers are absent",
        f"members without data in the source (absent): {' '.join(missing)}",
        "prices split-adjusted as of download (2024-03)"
        + ("; dividends reinvested" if adjust == "total" else ""),
    ]
    if point_in_time:
        mem = membership_mask(bars)
        report["masked_outside_membership"] = int((bars.tradable & ~mem).sum())
        bars.tradable &= mem
        notes.append("tradable only while a NASDAQ-100 member (point-in-time membership)")
    idx = pd.read_csv(SAMPLE_DIR / SAMPLE_INDEX, usecols=["Date", "Close"])
    idx_series = pd.Series(
        idx["Close"].to_numpy(), index=pd.to_datetime(idx["Date"]).dt.tz_localize(TZ)
    )
    from finpod.data.dataset import align_benchmark

    bench = align_benchmark(idx_series, bars.timestamps)
    default = SAMPLE_SPLITS if start is None and end is None else None
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "tickers": tick,
            "start": start,
            "end": end,
            "adjust": adjust,
            "point_in_time": point_in_time,
        },
        universe="NASDAQ-100 members on 2019-12-31 (95 with data)",
        benchmark=bench,
        benchmark_name="^NDX",
        default_splits=default,
        notes=notes,
    )


# --------------------------------------------------------------------------- files
def read_table(path: Path) -> pd.DataFrame:
    """Read one CSV (optionally .gz) or Parquet file; an empty or unreadable file is an error."""
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(path)
    except pd.errors.EmptyDataError as err:
        raise FinpodError(f"{path} is empty", "remove it or fill it with bars") from err
    except (pd.errors.ParserError, OSError, ValueError) as err:
        raise FinpodError(
            f"cannot read {path}: {str(err).splitlines()[0]}",
            "is it a CSV or Parquet file of bars?",
        ) from err
    raise FinpodError(f"{path} is neither CSV nor Parquet", "use .csv, .csv.gz or .parquet files")


def load_files(
    path: str | Path | None = None,
    bar: str | None = None,
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    columns: dict[str, str] | None = None,
    timezone: str = TZ,
    bar_label: str = "auto",
    ticker_pattern: str = r"^([A-Za-z0-9.\-^]+?)(?:_.*)?$",
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
) -> LoadedSource:
    """Vendor bars from ``path`` (a directory of files or one file).

    A file with a ticker column is a long table; otherwise its ticker is the first group
    of ``ticker_pattern`` matched against the file name without extension (default: the
    part before the first ``_``, so ``AAPL_1min.csv`` → ``AAPL``).

    Args:
        columns: vendor → canonical column renames, e.g. ``{"Date": "timestamp"}``.
        timezone: zone of naive timestamps (aware ones are converted).
        bar_label: intraday timestamps mark the bar ``"start"``/``"end"``/``"auto"``.
        Sort order does not matter: rows are sorted (and the report says so).
    """
    if path is None:
        raise FinpodError("the files source needs a path", "pass --path DIR")
    root = Path(path)
    if not root.exists():
        raise FinpodError(
            f"{root} does not exist", "pass --path with a directory of CSV/Parquet bars"
        )
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.iterdir()
            if p.is_file()
            and p.name.lower().endswith((".csv", ".csv.gz", ".parquet", ".pq", ".txt"))
        )
    )
    if not files:
        raise FinpodError(
            f"no CSV or Parquet files in {root}", "put one file per ticker or one long table there"
        )
    tick = _ticker_list(tickers)
    frames = []
    task = progress.add_task("read files", total=len(files)) if progress is not None else None
    for f in files:
        df = read_table(f)
        if len(df) == 0:
            raise FinpodError(f"{f} has no rows", "remove it or fill it with bars")
        from finpod.data.clean import normalize_columns

        df = normalize_columns(df, columns)
        if "tic" not in df.columns:
            stem = re.sub(r"(\.csv|\.csv\.gz|\.parquet|\.pq|\.txt)$", "", f.name, flags=re.I)
            m = re.match(ticker_pattern, stem)
            if not m:
                raise FinpodError(
                    f"cannot read a ticker from the file name {f.name}",
                    "add a tic column or pass --ticker-pattern",
                )
            df["tic"] = m.group(1).upper()
        frames.append(df)
        if task is not None:
            progress.advance(task, 1)
    df = pd.concat(frames, ignore_index=True)
    known = sorted(df["tic"].astype(str).str.upper().unique())
    _check_known(tick, known, str(root))
    if tick is not None:
        df = df[df["tic"].astype(str).str.upper().isin(tick)]
    bars, report = clean_long(
        df,
        bar,
        timezone=timezone,
        bar_label=bar_label,
        start=start,
        end=end,
        min_coverage=min_coverage,
        calendar=calendar,
        where=str(root),
    )
    report["files"] = [f.name for f in files]
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "path": str(root),
            "tickers": tick,
            "start": start,
            "end": end,
            "timezone": timezone,
            "bar_label": bar_label,
            "columns": columns,
        },
        universe=f"{len(known)} tickers from {root.name}",
    )


# --------------------------------------------------------------------------- yfinance
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


def load_yfinance(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    cache_dir: str | Path | None = None,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
    now: pd.Timestamp | None = None,
) -> LoadedSource:
    """Bars from Yahoo Finance (needs network), one cached Parquet per (ticker, chunk).

    Args:
        tickers: symbols, or ``"nasdaq100"`` for every member during ``[start, end]`` (each
            masked outside its membership).
        cache_dir: chunk cache (default ``data/cache/yfinance`` in the repository); a rerun
            skips chunks already there, so an interrupted download resumes.
    """
    import yfinance as yf

    from finpod.atomic import atomic_write

    bar = normalize_bar(bar or "1d")
    interval = YF_INTERVALS.get(bar)
    if interval is None:
        raise FinpodError(f"yfinance has no {bar} bars", f"use one of {', '.join(YF_INTERVALS)}")
    if start is None:
        raise FinpodError("the yfinance source needs --start", "e.g. --start 2015-01-01")
    end = end or str(pd.Timestamp.now().date())
    universe_pit = isinstance(tickers, str) and tickers.strip().lower() == "nasdaq100"
    tick = nasdaq100_members(start=start, end=end) if universe_pit else _ticker_list(tickers)
    if not tick:
        raise FinpodError(
            "the yfinance source needs tickers", "pass --tickers AAPL,MSFT or --tickers nasdaq100"
        )
    chunks = plan_chunks(start, end, interval, now)
    today = (
        pd.Timestamp.now(tz="UTC").tz_convert(None) if now is None else pd.Timestamp(now)
    ).normalize()
    cache = Path(cache_dir) if cache_dir else SAMPLE_DIR.parent / "cache" / "yfinance"
    frames = []
    task = (
        progress.add_task("yfinance", total=len(tick) * len(chunks))
        if progress is not None
        else None
    )
    empty = []
    for tic in tick:
        for a, b in chunks:
            f = cache / interval / tic / f"{a:%Y%m%d%H%M}_{b:%Y%m%d%H%M}.parquet"
            if f.exists():
                part = pd.read_parquet(f)
            else:
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
                part = _yf_frame(raw, tic)
                if len(part) == 0:
                    empty.append(tic)
                elif b <= today:
                    # Only whole past days are cached: today's bars are still arriving.
                    atomic_write(f, lambda p, part=part: part.to_parquet(p))
            frames.append(part)
            if task is not None:
                progress.advance(task, 1)
    frames = [f for f in frames if len(f)]
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
    )
    if empty:
        report["no_data_from_yahoo"] = sorted(set(empty))
    if universe_pit:
        mem = membership_mask(bars)
        report["masked_outside_membership"] = int((bars.tradable & ~mem).sum())
        bars.tradable &= mem
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "tickers": "nasdaq100" if universe_pit else tick,
            "start": start,
            "end": end,
            "interval": interval,
        },
        universe="NASDAQ-100 point-in-time members" if universe_pit else f"{len(tick)} tickers",
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


# --------------------------------------------------------------------------- synthetic
def _advance(progress: Any, label: str):
    task = progress.add_task(label, total=None)
    return lambda n: progress.advance(task, n)


def load_synthetic(
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    bar: str | None = None,
    n_tickers: int = 10,
    n_bars: int | None = None,
    years: float | None = None,
    regime: str = "null",
    seed: int = 0,
    late_listings: int = 0,
    alpha_strength: float = 0.1,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: Any = None,
) -> LoadedSource:
    """A seeded synthetic market (see :mod:`finpod.data.synthetic`); default 1 year."""
    from finpod.data.synthetic import synthetic_bars

    if tickers is not None:
        raise FinpodError(
            "the synthetic source makes its own tickers", "use --n-tickers instead of --tickers"
        )
    if end is not None:
        raise FinpodError("the synthetic source takes --years or --n-bars, not --end")
    bar = normalize_bar(bar or "1d")
    if n_bars is None and years is None:
        years = 1.0
    bars = synthetic_bars(
        n_tickers,
        n_bars,
        years=years,
        bar=bar,
        regime=regime,
        seed=seed,
        start=start or "2015-01-02",
        late_listings=late_listings,
        alpha_strength=alpha_strength,
        progress=None if progress is None else _advance(progress, "generate bars"),
    )
    report = {
        "input_rows": int(bars.tradable.sum()),
        "dropped": {},
        "repaired": {},
        "tickers": len(bars.tickers),
        "bars": len(bars.timestamps),
    }
    return LoadedSource(
        bars=bars,
        report=report,
        options={
            "n_tickers": n_tickers,
            "n_bars": n_bars,
            "years": years,
            "regime": regime,
            "seed": seed,
            "late_listings": late_listings,
            "alpha_strength": alpha_strength,
            "bar": bar,
        },
        universe=f"synthetic ({regime}), {n_tickers} tickers",
        notes=[
            f"synthetic market, regime {regime}; feature alpha_signal predicts close[t+1]→close[t+2]"
        ],
    )


__all__ = [
    "SAMPLE_SPLITS",
    "LoadedSource",
    "load_files",
    "load_sample",
    "load_source",
    "load_synthetic",
    "load_yfinance",
    "nasdaq100_members",
    "plan_chunks",
]
