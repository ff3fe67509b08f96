"""Datasets on disk: build (source → clean → features → splits → Parquet + manifest) and load.

A dataset directory holds:

- ``bars.parquet``: one row per (bar, ticker) on the full calendar grid, sorted by time
  then ticker: ``timestamp, tic, open, high, low, close, volume, tradable, filled``, the
  optional bool masks ``buyable`` and ``delisted`` (when the source sets them) and one
  float32 column per feature. Prices and volumes are float64, as the source gave them
  (manifest ``price_precision``; older datasets: float32). Prices are NaN before a
  ticker's first bar.
- ``benchmark.parquet`` (when the source has one): ``timestamp, close`` of the index level
  on the same grid, each bar showing the last level known when the bar closes
  (:mod:`finpod.data.benchmark`).
- ``cleaning_report.json``: everything the cleaner dropped, repaired or masked.
- ``manifest.json``: source, universe, bar size, tickers, features and their scaling, the
  split date ranges, a cleaning summary and the content ``hash``. Also:

  - ``universe``: ``{"name", "point_in_time", "note"}``; when ``point_in_time`` is false
    the note says so in words (e.g. "members as of 2019-12-31 used for 2010–2019:
    survivorship bias");
  - ``benchmark``: ``{"name", "kind": "index level, no costs", "source"}`` or null;
  - ``bars_per_year`` and ``bars_per_year_rule``: annualization counted on the calendar;
  - ``masks``: which optional (T, N) bool columns ``bars.parquet`` holds: ``buyable``
    (False = sell only, e.g. outside a point-in-time index) and ``delisted`` (True after a
    ticker's last valid price, for good).

The content hash (:func:`~finpod.data.store.content_hash`) is of the data itself, never of
paths, build times or the Parquet encoding. Splits (:func:`~finpod.data.splits.plan_splits`)
are contiguous, in time order, and separated by an embargo of whole sessions.
"""

from __future__ import annotations

import datetime as _dt
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from finpod.atomic import atomic_write, atomic_write_json
from finpod.data import sources
from finpod.data.bars import Bars
from finpod.data.benchmark import align_benchmark
from finpod.data.calendar import BARS_PER_YEAR_RULE, TZ, bars_per_year, session_of
from finpod.data.disclosure import benchmark_name, universe_disclosure
from finpod.data.features import SCALING_DOC
from finpod.data.inmemory import bars_to_market, from_frame, market_features
from finpod.data.manifest import (
    FORMAT_VERSION,
    Manifest,
    SplitRange,
    benchmark_entry,
    cleaning_summary,
    dataset_bars_per_year,
    load_manifest,
    universe_entry,
)
from finpod.data.outdir import install, prepare_out
from finpod.data.splits import (
    DEFAULT_EMBARGO_SESSIONS,
    DEFAULT_FRACTIONS,
    INTRADAY_EMBARGO_SESSIONS,
    MIN_SESSIONS_TO_SPLIT_BY_SESSION,
    SPLITS,
    plan_splits,
)
from finpod.data.store import (
    MASKS,
    PRICE_DTYPE,
    ROWS_PER_GROUP_BARS,
    content_hash,
    load_split,
    verify_dataset,
    write_bars,
)
from finpod.data.user_features import USER_SCALING
from finpod.dates import iso_text, parse_date
from finpod.errors import FinpodError

SOURCES = tuple(sources.LOADERS)
#: Source options that name files or folders the build reads (or caches into): an
#: ``--overwrite`` is refused while one of them lies inside the dataset it would replace.
INPUT_OPTIONS = ("path", "benchmark", "cache_dir")
# The splits, the manifest and the dataset's files live in finpod.data.splits/.manifest/
# .store, align_benchmark, bars_to_market and from_frame in finpod.data.benchmark/.inmemory;
# they stay importable from here (finpod.data.synthetic_market imports bars_to_market here).
__all__ = [
    "DEFAULT_EMBARGO_SESSIONS",
    "DEFAULT_FRACTIONS",
    "FORMAT_VERSION",
    "INTRADAY_EMBARGO_SESSIONS",
    "MASKS",
    "MIN_SESSIONS_TO_SPLIT_BY_SESSION",
    "ROWS_PER_GROUP_BARS",
    "SPLITS",
    "SPLIT_GAP",
    "Manifest",
    "align_benchmark",
    "bars_to_market",
    "benchmark_name",
    "build_dataset",
    "check_bars",
    "content_hash",
    "dataset_bars_per_year",
    "from_frame",
    "load_manifest",
    "load_split",
    "plan_splits",
    "split_gaps",
    "universe_disclosure",
    "verify_dataset",
]


# --------------------------------------------------------------------------- progress
class _NoProgress:
    def add_task(self, *a, **k) -> int:
        return 0

    def advance(self, *a, **k) -> None:
        pass

    def update(self, *a, **k) -> None:
        pass


@contextmanager
def _progress(enabled: bool):
    # Bars on stderr (stdout holds only the dataset folder), and only at a terminal: in a
    # log a bar is one stale line.
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield _NoProgress()
        return

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        transient=False,
        console=console,
    ) as prog:
        yield prog


# --------------------------------------------------------------------------- build
def _iso_or_as_is(value: Any, what: str) -> Any:
    """``value`` as ISO text when it is text (:func:`finpod.dates.parse_date`: anything
    else is one error line), else unchanged (a date, a timestamp or ``None``)."""
    if isinstance(value, str):
        return iso_text(parse_date(value, what))
    return value


def build_dataset(
    source: str,
    out: str | Path,
    *,
    bar: str | None = None,
    tickers: list[str] | str | None = None,
    start: str | None = None,
    end: str | None = None,
    splits: dict[str, tuple[str | None, str | None]] | None = None,
    embargo: int | None = None,
    min_coverage: float = 0.8,
    calendar: str = "XNYS",
    progress: bool = False,
    overwrite: bool = True,
    **opts: Any,
) -> Path:
    """Build a dataset directory from ``source`` and return its path.

    Args:
        source: ``"sample"`` (shipped NASDAQ-100 daily 2010–2019), ``"yfinance"``,
            ``"files"`` (needs ``path=``) or ``"synthetic"``.
        out: dataset directory (created; an existing dataset there is replaced only with
            ``overwrite``, in one atomic swap).
        bar: bar size (``"1d"``, ``"1min"``…); source default when None.
        tickers: list of symbols (or ``"nasdaq100"`` for yfinance); unknown ones are an error.
        start, end: date range (inclusive).
        splits: explicit ``{split: (first_date, last_date)}``; default: the source's argued
            dates (sample) or 70/15/15 % of the sessions.
        embargo: sessions between splits (default 5 for daily bars, 1 intraday).
        min_coverage: tickers covering less of their life are dropped (reported).
        calendar: ``"XNYS"`` or ``"XNAS"``.
        progress: show rich progress bars.
        overwrite: replace an existing dataset directory at ``out``; without it an existing
            dataset is an error.
        opts: source options (see :mod:`finpod.data.sources`).
    """
    if source not in SOURCES:
        raise FinpodError(f"unknown source {source!r}", f"use one of {', '.join(SOURCES)}")
    if not (isinstance(min_coverage, int | float) and 0.0 <= min_coverage <= 1.0):
        raise FinpodError(
            f"--min-coverage must be a share between 0 and 1, got {min_coverage!r}", "e.g. 0.8"
        )
    out = Path(out)
    # Dates given as text are read one way from Python too (ISO 8601, as on the command
    # line): "09/01/2019" is refused, never guessed. Dates given as dates pass through.
    start, end = _iso_or_as_is(start, "start"), _iso_or_as_is(end, "end")
    if splits is not None:
        splits = {
            name: (
                _iso_or_as_is(first, f"splits[{name!r}] first"),
                _iso_or_as_is(last, f"splits[{name!r}] last"),
            )
            for name, (first, last) in splits.items()
        }
    # The output is checked (and its temporary folder made) before any work is done.
    inputs = tuple(opts[k] for k in INPUT_OPTIONS if opts.get(k) is not None)
    tmp, made = prepare_out(out, overwrite, inputs)
    try:
        return _build_into(
            tmp,
            out,
            source,
            bar=bar,
            tickers=tickers,
            start=start,
            end=end,
            splits=splits,
            embargo=embargo,
            min_coverage=min_coverage,
            calendar=calendar,
            progress=progress,
            **opts,
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in reversed(made):  # the parents this call created, deepest first
            try:
                folder.rmdir()
            except OSError:
                break
        raise


#: How a manifest note about sessions that no split holds begins (see :func:`split_gaps`).
SPLIT_GAP = "no split holds"


def split_gaps(
    timestamps: pd.DatetimeIndex, plan: dict[str, dict[str, Any]], embargo_sessions: int
) -> list[str]:
    """One note per gap between consecutive splits longer than the embargo: the sessions
    of the dataset that no split holds, e.g. ``"no split holds 2019-01-02 → 2019-08-30
    (167 sessions between validation and backtest; the embargo is 5)"``. Empty when every
    gap is the embargo (or shorter: splits that meet).

    Args:
        timestamps: (T,) bar times of the dataset.
        plan: :func:`~finpod.data.splits.plan_splits`' row ranges.
        embargo_sessions: the sessions a gap holds by design.
    """
    sessions = session_of(timestamps)
    notes = []
    for prev, nxt in zip(SPLITS, SPLITS[1:], strict=False):
        r0, r1 = plan[prev]["stop_index"], plan[nxt]["start_index"]
        days = np.unique(sessions[r0:r1])
        if len(days) <= embargo_sessions:
            continue
        first, last = (pd.Timestamp(int(d)).strftime("%Y-%m-%d") for d in (days[0], days[-1]))
        notes.append(
            f"{SPLIT_GAP} {first} → {last} ({len(days)} sessions between {prev} and {nxt}; "
            f"the embargo is {embargo_sessions})"
        )
    return notes


#: A dataset needs at least this many bars: the features look back 30 bars (RSI, CCI, DX)
#: and three splits must fit; a shorter series holds no defined feature value.
MIN_DATASET_BARS = 30


def check_bars(bars: Bars) -> list[str]:
    """What is wrong with cleaned bars (empty when nothing): finite, positive prices on
    every listed bar; stamps strictly increasing; masks consistent (a bar is real or
    filled, never both; a filled bar follows a real one; a delisted bar is not tradable);
    finite, non-negative volume."""
    problems: list[str] = []
    ts = bars.timestamps
    if len(ts) > 1 and not bool((np.diff(ts.asi8) > 0).all()):
        problems.append("timestamps are not strictly increasing")
    listed = np.maximum.accumulate(bars.tradable, axis=0) if len(ts) else bars.tradable
    for name in ("open", "high", "low", "close"):
        a = getattr(bars, name)
        if not bool((np.isfinite(a[listed]) & (a[listed] > 0)).all()):
            problems.append(f"{name} has a non-finite or non-positive price on a listed bar")
        if not bool(np.isnan(a[~listed]).all()):
            problems.append(f"{name} has a price before its ticker's first bar")
    if not bool((np.isfinite(bars.volume) & (bars.volume >= 0)).all()):
        problems.append("volume is non-finite or negative")
    if bool((bars.tradable & bars.filled).any()):
        problems.append("a bar is both real and filled")
    if bool((bars.filled & ~listed).any()):
        problems.append("a filled bar comes before its ticker's first bar")
    if bars.delisted is not None and bool((bars.delisted & bars.tradable).any()):
        problems.append("a delisted bar is tradable")
    return problems


def _build_into(
    tmp: Path,
    out: Path,
    source: str,
    *,
    bar: str | None,
    tickers: list[str] | str | None,
    start: str | None,
    end: str | None,
    splits: dict[str, tuple[str | None, str | None]] | None,
    embargo: int | None,
    min_coverage: float,
    calendar: str,
    progress: bool,
    **opts: Any,
) -> Path:
    """The build of :func:`build_dataset`, written into ``tmp`` and renamed onto ``out``."""
    with _progress(progress) as prog:
        loaded = sources.load_source(
            source,
            bar=bar,
            tickers=tickers,
            start=start,
            end=end,
            min_coverage=min_coverage,
            calendar=calendar,
            progress=prog,
            **opts,
        )
        bars = loaded.bars
        if len(bars.timestamps) < MIN_DATASET_BARS:
            raise FinpodError(
                f"only {len(bars.timestamps)} {bars.bar} bars are left after cleaning; a "
                f"dataset needs at least {MIN_DATASET_BARS}",
                "give a longer date range or more data",
            )
        problems = check_bars(bars)
        if problems:
            raise FinpodError(
                f"the cleaned bars fail the dataset checks: {'; '.join(problems)}",
                "the input holds values the cleaner let through; please report it",
            )
        task = prog.add_task("features", total=len(bars.tickers))
        user_checks: dict[str, Any] = {}
        feats, names = market_features(
            bars, progress=lambda n: prog.advance(task, n), checks=user_checks
        )
        bars.extra.clear()  # now a copy inside feats; free it before writing
        split_dates = splits if splits is not None else loaded.default_splits
        if embargo is None:
            emb = DEFAULT_EMBARGO_SESSIONS if bars.bar == "1d" else INTRADAY_EMBARGO_SESSIONS
        else:
            emb = int(embargo)
        plan = plan_splits(bars.timestamps, split_dates, emb)
        # Sessions between two splits beyond the embargo belong to none: said, never dropped
        # silently (a split's dates read another way than meant leave such a gap).
        gaps = split_gaps(bars.timestamps, plan, emb)
        bench_vals = (
            None if loaded.benchmark is None else loaded.benchmark.to_numpy(dtype=np.float64)
        )
        digest = content_hash(bars, feats, names, bench_vals, plan, PRICE_DTYPE)
        bpy = bars_per_year(bars.bar, calendar, start=bars.timestamps[0], end=bars.timestamps[-1])
        manifest = Manifest(
            format=FORMAT_VERSION,
            source=source,
            source_options=loaded.options,
            universe={"name": loaded.universe, **universe_entry(loaded.universe_info)},
            bar=bars.bar,
            calendar=calendar,
            timezone=TZ,
            bars_per_year=bpy,
            bars_per_year_rule=BARS_PER_YEAR_RULE,
            start=str(bars.timestamps[0]),
            end=str(bars.timestamps[-1]),
            bars=len(bars.timestamps),
            tickers=tuple(bars.tickers),
            features=tuple(names),
            feature_scaling={n: SCALING_DOC.get(n, USER_SCALING) for n in names},
            splits={k: SplitRange(**v) for k, v in plan.items()},
            split_rule="explicit dates" if split_dates is not None else "70/15/15 % of sessions",
            embargo_sessions=emb,
            cleaning=cleaning_summary(loaded.report),
            notes=(*loaded.notes, *gaps),
            rows_per_group_bars=ROWS_PER_GROUP_BARS,
            benchmark=benchmark_entry(loaded),
            masks={name: getattr(bars, name) is not None for name in MASKS},
            hash=digest,
            created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            files={
                "bars": "bars.parquet",
                "benchmark": "benchmark.parquet" if loaded.benchmark is not None else None,
                "cleaning_report": "cleaning_report.json",
            },
            user_features=user_checks or None,
            price_precision=np.dtype(PRICE_DTYPE).name,
        )
        wtask = prog.add_task("write parquet", total=len(bars.timestamps))
        write_bars(tmp / "bars.parquet", bars, feats, names, lambda n: prog.advance(wtask, n))
        if loaded.benchmark is not None:
            tbl = pa.table(
                {
                    "timestamp": pa.array(bars.timestamps),
                    "close": loaded.benchmark.to_numpy(dtype=np.float64),
                }
            )
            atomic_write(tmp / "benchmark.parquet", lambda p: pq.write_table(tbl, p))
        atomic_write_json(tmp / "cleaning_report.json", loaded.report)
        atomic_write_json(tmp / "manifest.json", manifest.to_dict())
        install(tmp, out)  # one swap; a link at out keeps pointing at the dataset
    return out
