"""Datasets on disk: build (source → clean → features → splits → Parquet + manifest) and load.

A dataset directory holds:

- ``bars.parquet``: one row per (bar, ticker) on the full calendar grid, sorted by time
  then ticker: ``timestamp, tic, open, high, low, close, volume, tradable, filled``, the
  optional bool masks ``buyable`` and ``delisted`` (when the source sets them) and one
  float32 column per feature. Prices are NaN before a ticker's first bar.
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

The content hash is the SHA-256 of the data itself (tickers, bar size, feature names,
timestamps, prices, volumes, masks incl. ``buyable``/``delisted`` when present, features,
benchmark, split boundaries), never of
paths, build times or the Parquet encoding: two builds of the same data agree, and any
change to the data changes it.

Splits (``train``, ``validation``, ``backtest``) are contiguous, in time order, never
overlap, and are separated by an embargo of whole sessions (default 5 for daily bars, 1
for intraday bars): with orders filled at bar t+1, the last training step already looks
one bar ahead, so a gap keeps
every price a training episode can touch out of the validation period (and likewise
validation → backtest). Features are computed once over the whole time line; they are
causal, so a validation bar's features use only earlier prices (possibly from the train
period), never later ones.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from finpod.atomic import atomic_write, atomic_write_json, replace_dir
from finpod.data import sources
from finpod.data.bars import Bars
from finpod.data.benchmark import BENCHMARK_KIND, align_benchmark
from finpod.data.calendar import BARS_PER_YEAR_RULE, TZ, bars_per_year, session_of
from finpod.data.disclosure import benchmark_name, universe_disclosure
from finpod.data.features import SCALING_DOC
from finpod.data.inmemory import bars_to_market, from_frame, market_features
from finpod.data.market import MarketData
from finpod.errors import FinpodError

SPLITS = ("train", "validation", "backtest")
#: Fractions of the sessions used when a source has no default split dates.
DEFAULT_FRACTIONS = (0.70, 0.15, 0.15)
#: Sessions left out between consecutive splits.
DEFAULT_EMBARGO_SESSIONS = 5
#: Sessions between splits for intraday bars (one whole day already separates them).
INTRADAY_EMBARGO_SESSIONS = 1
#: With fewer sessions than this (and no dates) the 70/15/15 cut is made on bars.
MIN_SESSIONS_TO_SPLIT_BY_SESSION = 20
#: Bars (timestamps) per Parquet row group; load_split reads only the groups it needs.
ROWS_PER_GROUP_BARS = 4096
#: Manifest format. 2: ``universe`` and ``benchmark`` are dicts, ``bars_per_year``, and
#: optional ``buyable``/``delisted`` mask columns (listed under ``masks``). Format-1
#: datasets still load (no masks, bars per year from the calendar at load time).
FORMAT_VERSION = 2
SOURCES = tuple(sources.LOADERS)
# align_benchmark, bars_to_market and from_frame live in finpod.data.benchmark/.inmemory;
# they stay importable from here (finpod.data.synthetic imports bars_to_market here).
__all__ = [
    "SPLITS",
    "align_benchmark",
    "bars_to_market",
    "benchmark_name",
    "build_dataset",
    "content_hash",
    "dataset_bars_per_year",
    "from_frame",
    "load_manifest",
    "load_split",
    "plan_splits",
    "universe_disclosure",
    "verify_dataset",
]
#: Optional (T, N) bool columns of bars.parquet, written when the source sets them.
MASKS = ("buyable", "delisted")


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
    if not enabled:
        yield _NoProgress()
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        transient=False,
    ) as prog:
        yield prog


# --------------------------------------------------------------------------- splits
def plan_splits(
    timestamps: pd.DatetimeIndex,
    dates: dict[str, tuple[str | None, str | None]] | None = None,
    embargo_sessions: int = DEFAULT_EMBARGO_SESSIONS,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
) -> dict[str, dict[str, Any]]:
    """Row ranges of the three splits on ``timestamps``.

    Args:
        timestamps: (T,) bar times of the dataset.
        dates: ``{split: (first_date, last_date)}`` inclusive; ``None`` uses ``fractions``
            of the sessions in time order. A missing split or bound is an error.
        embargo_sessions: at least this many whole sessions between the last bar of one
            split and the first bar of the next (taken from the start of the later split).
        fractions: train/validation/backtest shares of the sessions when ``dates`` is None.

    Returns:
        ``{split: {"start", "end", "start_index", "stop_index", "bars", "sessions"}}``.
    """
    if embargo_sessions < 0:
        raise FinpodError("the embargo must be ≥ 0 sessions")
    sess = session_of(timestamps)
    uniq, first_row = np.unique(sess, return_index=True)
    if dates is None and len(uniq) < MIN_SESSIONS_TO_SPLIT_BY_SESSION:
        # Too few sessions to cut whole days (a week of minute bars): cut by bars instead,
        # the embargo then counting bars.
        uniq = np.arange(len(sess), dtype=np.int64)
        first_row = np.arange(len(sess))
    n_sess = len(uniq)
    stop_row = np.r_[first_row[1:], len(sess)]
    ranges: dict[str, tuple[int, int]] = {}
    if dates is None:
        if abs(sum(fractions) - 1) > 1e-9 or min(fractions) <= 0:
            raise FinpodError(f"split fractions {fractions} must be positive and sum to 1")
        a = int(round(fractions[0] * n_sess))
        b = int(round((fractions[0] + fractions[1]) * n_sess))
        ranges = {"train": (0, a), "validation": (a, b), "backtest": (b, n_sess)}
    else:
        unknown = set(dates) - set(SPLITS)
        if unknown:
            raise FinpodError(
                f"unknown split(s) {sorted(unknown)}", "use train, validation and backtest"
            )
        for name in SPLITS:
            if name not in dates:
                raise FinpodError(
                    f"no dates given for the {name} split", "give all three splits or none"
                )
            lo, hi = dates[name]
            lo_ns = _date_ns(lo) if lo is not None else int(uniq[0])
            hi_ns = _date_ns(hi) if hi is not None else int(uniq[-1])
            if hi_ns < lo_ns:
                raise FinpodError(f"the {name} split ends ({hi}) before it starts ({lo})")
            ranges[name] = (
                int(np.searchsorted(uniq, lo_ns)),
                int(np.searchsorted(uniq, hi_ns, side="right")),
            )
        for prev, nxt in zip(SPLITS, SPLITS[1:], strict=False):
            if ranges[nxt][0] < ranges[prev][1]:
                raise FinpodError(
                    f"the {prev} and {nxt} splits overlap ({dates[prev]} vs {dates[nxt]})",
                    f"make {nxt} start after {prev} ends",
                )
    out: dict[str, dict[str, Any]] = {}
    prev_stop = None
    for name in SPLITS:
        s0, s1 = ranges[name]
        if prev_stop is not None:
            s0 = max(s0, prev_stop + embargo_sessions)
        if s1 <= s0:
            raise FinpodError(
                f"the {name} split is empty ({n_sess} sessions in the data, embargo {embargo_sessions})",
                "widen its dates, shorten the embargo or use more data",
            )
        prev_stop = s1
        r0, r1 = int(first_row[s0]), int(stop_row[s1 - 1])
        out[name] = {
            "start": str(timestamps[r0]),
            "end": str(timestamps[r1 - 1]),
            "start_index": r0,
            "stop_index": r1,
            "bars": r1 - r0,
            "sessions": int(len(np.unique(sess[r0:r1]))),
        }
    return out


def _date_ns(x: str) -> int:
    t = pd.Timestamp(x)
    if t.tzinfo is not None:
        t = t.tz_convert(TZ).tz_localize(None)
    return int(t.normalize().value)


# --------------------------------------------------------------------------- hashing
def content_hash(
    bars: Bars,
    features: np.ndarray,
    feature_names: list[str],
    benchmark: np.ndarray | None,
    splits: dict[str, dict[str, Any]] | None,
) -> str:
    """SHA-256 of the dataset's content (see the module docstring)."""
    h = hashlib.sha256()
    header = {
        "tickers": list(bars.tickers),
        "bar": bars.bar,
        "features": list(feature_names),
        "splits": {k: [v["start_index"], v["stop_index"]] for k, v in (splits or {}).items()},
    }
    h.update(json.dumps(header, sort_keys=True).encode())
    h.update(bars.timestamps.to_numpy(dtype="datetime64[ns]").astype(np.int64).tobytes())
    T = len(bars.timestamps)
    step = max(1, 2_000_000 // max(1, len(bars.tickers)))
    for t0 in range(0, T, step):
        t1 = min(T, t0 + step)
        for arr in (bars.open, bars.high, bars.low, bars.close):
            # NaN payloads can differ; hash the tensor form (0.0 = no price) plus the mask.
            a = np.nan_to_num(arr[t0:t1], nan=0.0).astype(np.float32)
            h.update(a.tobytes())
        h.update(bars.volume[t0:t1].astype(np.float32).tobytes())
        h.update(bars.tradable[t0:t1].tobytes())
        h.update(bars.filled[t0:t1].tobytes())
        h.update(np.ascontiguousarray(features[t0:t1], dtype=np.float32).tobytes())
    for name in MASKS:
        mask = getattr(bars, name, None)
        if mask is not None:
            # Only present masks are hashed, so a dataset without them keeps its hash.
            h.update(name.encode())
            h.update(np.ascontiguousarray(mask, dtype=np.bool_).tobytes())
    if benchmark is not None:
        h.update(np.nan_to_num(np.asarray(benchmark, dtype=np.float64), nan=0.0).tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- build
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
    # The output is checked (and its temporary folder made) before any work is done.
    tmp, made = _prepare_out(out, overwrite)
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


#: A dataset needs at least this many bars: the features look back 30 bars (RSI, CCI, DX)
#: and three splits must fit; a shorter series holds no defined feature value.
MIN_DATASET_BARS = 30


def _prepare_out(out: Path, overwrite: bool) -> tuple[Path, list[Path]]:
    """Check that ``out`` can receive a dataset and make the temporary folder beside it.

    Returns ``(tmp, made)``: the temporary folder and the parent folders created for it
    (removed again if the build fails). Raises :class:`FinpodError` when ``out`` is a file,
    lies under a file, is a non-dataset folder with content, already holds a dataset and
    ``overwrite`` is False, or cannot be written.
    """
    hint = "choose another --out"
    if out.exists() and not out.is_dir():
        raise FinpodError(f"--out {out} is a file, not a directory", hint)
    if out.is_dir():
        try:
            content = any(out.iterdir())
        except OSError as err:
            raise FinpodError(f"cannot read --out {out}: {err.strerror or err}", hint) from err
        if content and not (out / "manifest.json").exists():
            raise FinpodError(
                f"{out} exists and is not a finpod dataset",
                "choose an empty or new --out directory",
            )
        if content and not overwrite:
            raise FinpodError(
                f"{out} already holds a dataset",
                "use it as it is, or pass --overwrite to replace it",
            )
    parent = out.absolute().parent
    ancestor = parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise FinpodError(f"--out {out} lies under {ancestor}, which is a file", hint)
    made = [p for p in reversed(parent.parents) if not p.exists()]
    made += [parent] if not parent.exists() else []
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as err:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                break
        raise FinpodError(
            f"cannot write the dataset to {out}: {err.strerror or err}",
            "choose a writable --out directory",
        ) from err
    # mkdtemp makes a private (0700) folder; the dataset gets the mode mkdir would give.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp, made


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
        feats, names = market_features(bars, progress=lambda n: prog.advance(task, n))
        bars.extra.clear()  # now a copy inside feats; free it before writing
        split_dates = splits if splits is not None else loaded.default_splits
        if embargo is None:
            emb = DEFAULT_EMBARGO_SESSIONS if bars.bar == "1d" else INTRADAY_EMBARGO_SESSIONS
        else:
            emb = int(embargo)
        plan = plan_splits(bars.timestamps, split_dates, emb)
        bench_vals = (
            None if loaded.benchmark is None else loaded.benchmark.to_numpy(dtype=np.float64)
        )
        digest = content_hash(bars, feats, names, bench_vals, plan)
        bpy = bars_per_year(bars.bar, calendar, start=bars.timestamps[0], end=bars.timestamps[-1])
        manifest = {
            "format": FORMAT_VERSION,
            "source": source,
            "source_options": loaded.options,
            "universe": {"name": loaded.universe, **_universe(loaded.universe_info)},
            "bar": bars.bar,
            "calendar": calendar,
            "timezone": TZ,
            "bars_per_year": bpy,
            "bars_per_year_rule": BARS_PER_YEAR_RULE,
            "start": str(bars.timestamps[0]),
            "end": str(bars.timestamps[-1]),
            "bars": len(bars.timestamps),
            "tickers": list(bars.tickers),
            "features": names,
            "feature_scaling": {n: SCALING_DOC.get(n, "source-provided, O(1)") for n in names},
            "splits": plan,
            "split_rule": "explicit dates" if split_dates is not None else "70/15/15 % of sessions",
            "embargo_sessions": emb,
            "cleaning": _cleaning_summary(loaded.report),
            "notes": loaded.notes,
            "rows_per_group_bars": ROWS_PER_GROUP_BARS,
            "benchmark": _benchmark(loaded),
            "masks": {name: getattr(bars, name) is not None for name in MASKS},
            "hash": digest,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "files": {
                "bars": "bars.parquet",
                "benchmark": "benchmark.parquet" if loaded.benchmark is not None else None,
                "cleaning_report": "cleaning_report.json",
            },
        }
        wtask = prog.add_task("write parquet", total=len(bars.timestamps))
        _write_bars(tmp / "bars.parquet", bars, feats, names, lambda n: prog.advance(wtask, n))
        if loaded.benchmark is not None:
            tbl = pa.table(
                {
                    "timestamp": pa.array(bars.timestamps),
                    "close": loaded.benchmark.to_numpy(dtype=np.float64),
                }
            )
            atomic_write(tmp / "benchmark.parquet", lambda p: pq.write_table(tbl, p))
        atomic_write_json(tmp / "cleaning_report.json", loaded.report)
        atomic_write_json(tmp / "manifest.json", manifest)
        replace_dir(tmp, out)
    return out


def _universe(info: dict) -> dict:
    point_in_time = bool(info.get("point_in_time", False))
    note = info.get("note") or (
        "point-in-time universe"
        if point_in_time
        else "not point-in-time: the tickers may have been chosen with hindsight (survivorship bias)"
    )
    return {"point_in_time": point_in_time, "note": note}


def _benchmark(loaded: sources.LoadedSource) -> dict | None:
    if loaded.benchmark is None:
        return None
    info = dict(loaded.benchmark_info or {})
    info.setdefault("name", "benchmark")
    info.setdefault("kind", BENCHMARK_KIND)
    info.setdefault("source", None)
    return info


def _cleaning_summary(report: dict) -> dict:
    summ: dict[str, Any] = {}
    for k, v in report.items():
        if isinstance(v, dict):
            summ[k] = (
                {kk: vv for kk, vv in v.items() if not isinstance(vv, dict)}
                if k in ("dropped", "repaired")
                else len(v)
            )
        elif isinstance(v, list):
            summ[k] = len(v)
        else:
            summ[k] = v
    return summ


def _write_bars(
    path: Path, bars: Bars, feats: np.ndarray, names: list[str], advance: Callable[[int], None]
) -> None:
    T, N = bars.close.shape
    masks = [m for m in MASKS if getattr(bars, m) is not None]
    tic_dict = pa.array(list(bars.tickers), type=pa.string())
    ts_type = pa.timestamp("ns", tz=TZ)
    fields = [
        pa.field("timestamp", ts_type),
        pa.field("tic", pa.dictionary(pa.int32(), pa.string())),
        *[pa.field(c, pa.float32()) for c in ("open", "high", "low", "close", "volume")],
        pa.field("tradable", pa.bool_()),
        pa.field("filled", pa.bool_()),
        *[pa.field(m, pa.bool_()) for m in masks],
        *[pa.field(n, pa.float32()) for n in names],
    ]
    schema = pa.schema(fields)
    ts_ns = bars.timestamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)

    def write(p: Path) -> None:
        # Dictionary-encoding float columns costs more than it saves on market data; only
        # the ticker column is dictionary-encoded, only timestamps carry statistics.
        with pq.ParquetWriter(
            p, schema, compression="zstd", use_dictionary=["tic"], write_statistics=["timestamp"]
        ) as w:
            for t0 in range(0, T, ROWS_PER_GROUP_BARS):
                t1 = min(T, t0 + ROWS_PER_GROUP_BARS)
                n = t1 - t0
                cols = [
                    pa.array(np.repeat(ts_ns[t0:t1], N), type=pa.int64()).cast(ts_type),
                    pa.DictionaryArray.from_arrays(
                        pa.array(np.tile(np.arange(N, dtype=np.int32), n)), tic_dict
                    ),
                    *[
                        pa.array(getattr(bars, c)[t0:t1].reshape(-1))
                        for c in ("open", "high", "low", "close", "volume")
                    ],
                    pa.array(bars.tradable[t0:t1].reshape(-1)),
                    pa.array(bars.filled[t0:t1].reshape(-1)),
                    *[pa.array(getattr(bars, m)[t0:t1].reshape(-1)) for m in masks],
                    *[
                        pa.array(np.ascontiguousarray(feats[t0:t1, :, j]).reshape(-1))
                        for j in range(len(names))
                    ],
                ]
                w.write_batch(pa.RecordBatch.from_arrays(cols, schema=schema), row_group_size=n * N)
                advance(n)

    atomic_write(path, write)


# --------------------------------------------------------------------------- load


def _grid_reader(table: pa.Table, T: int, N: int) -> Callable[..., np.ndarray]:
    """``grid(column, dtype)`` → the column of a (bar, ticker)-ordered table as (T, N)."""

    def grid(name: str, dtype: Any = np.float32) -> np.ndarray:
        return table.column(name).to_numpy().astype(dtype, copy=False).reshape(T, N)

    return grid


def _timestamps(grid: Callable[..., np.ndarray]) -> pd.DatetimeIndex:
    """(T,) bar times (stored as UTC) in New York time."""
    return (
        pd.DatetimeIndex(grid("timestamp", "datetime64[ns]")[:, 0])
        .tz_localize("UTC")
        .tz_convert(TZ)
    )


def load_manifest(dataset_dir: str | Path) -> dict:
    """The dataset's ``manifest.json`` as a dict (keys include ``hash``, ``bar``, ``splits``,
    ``tickers``, ``features``; format 2 adds ``universe`` as ``{"name", "point_in_time",
    "note"}``, ``benchmark`` as ``{"name", "kind", "source"}``, ``bars_per_year`` and
    ``masks``; read a universe or benchmark of either format with
    :func:`universe_disclosure` / :func:`benchmark_name`)."""
    path = Path(dataset_dir) / "manifest.json"
    if not path.exists():
        raise FinpodError(
            f"{dataset_dir} is not a finpod dataset (no manifest.json)",
            "build one with: finpod download --out DIR",
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FinpodError(
            f"{path} is not valid JSON ({err.msg})", "rebuild the dataset with finpod download"
        ) from err
    for key in ("hash", "bar", "splits", "tickers", "features"):
        if key not in manifest:
            raise FinpodError(
                f"{path} has no {key!r} entry", "rebuild the dataset with finpod download"
            )
    return manifest


def load_split(
    dataset_dir: str | Path, split: str, device: torch.device | str = "cpu"
) -> MarketData:
    """One split of a dataset as :class:`MarketData` on ``device``.

    Args:
        dataset_dir: directory written by :func:`build_dataset`.
        split: ``"train"``, ``"validation"``, ``"backtest"`` or ``"all"`` (every bar).
        device: torch device of the tensors.
    """
    dataset_dir = Path(dataset_dir)
    manifest = load_manifest(dataset_dir)
    if split == "all":
        r0, r1 = 0, int(manifest["bars"])
    elif split in manifest["splits"]:
        r0, r1 = (
            int(manifest["splits"][split]["start_index"]),
            int(manifest["splits"][split]["stop_index"]),
        )
    else:
        raise FinpodError(f"unknown split {split!r}", "use train, validation, backtest or all")
    tickers: list[str] = list(manifest["tickers"])
    names: list[str] = list(manifest["features"])
    N = len(tickers)
    bars_path = dataset_dir / manifest.get("files", {}).get("bars", "bars.parquet")
    if not bars_path.exists():
        raise FinpodError(f"{bars_path} is missing", "rebuild the dataset with finpod download")
    group = int(manifest.get("rows_per_group_bars", ROWS_PER_GROUP_BARS))
    g0, g1 = r0 // group, (r1 - 1) // group + 1
    try:
        pf = pq.ParquetFile(bars_path)
        masks = [m for m in MASKS if m in pf.schema_arrow.names]
        cols = ["timestamp", "tic", "open", "close", "tradable", *masks, *names]
        table = pf.read_row_groups(list(range(g0, g1)), columns=cols)
    except (OSError, pa.ArrowInvalid, IndexError) as err:
        raise FinpodError(
            f"cannot read {bars_path}: {err}", "the file is damaged; rebuild the dataset"
        ) from err
    lo, hi = (r0 - g0 * group) * N, (r1 - g0 * group) * N
    table = table.slice(lo, hi - lo)
    T = r1 - r0
    if table.num_rows != T * N:
        raise FinpodError(
            f"{bars_path} has {table.num_rows} rows where {T * N} were expected",
            "rebuild the dataset",
        )
    tic_col = table.column("tic").combine_chunks()
    if tic_col.dictionary.to_pylist() != tickers or not np.array_equal(
        tic_col.indices.to_numpy()[:N], np.arange(N)
    ):
        raise FinpodError(
            f"{bars_path} does not match its manifest's tickers", "rebuild the dataset"
        )

    grid = _grid_reader(table, T, N)
    ts = _timestamps(grid)
    feats = np.empty((T, N, len(names)), dtype=np.float32)
    for j, n in enumerate(names):
        feats[:, :, j] = grid(n)
    bench = None
    bench_file = manifest.get("files", {}).get("benchmark")
    if bench_file:
        bt = pq.read_table(dataset_dir / bench_file)
        vals = bt.column("close").to_numpy()[r0:r1]
        bench = pd.Series(vals, index=ts, name=benchmark_name(manifest) or "benchmark")
    for col in ("open", "close"):
        values = grid(col)
        if np.isinf(values).any() or (values <= 0).any():
            raise FinpodError(
                f"{bars_path} holds non-finite or non-positive {col} prices",
                "rebuild the dataset with this version of finpod download",
            )
    mask = {m: torch.from_numpy(grid(m, np.bool_)).to(device) for m in masks}
    return MarketData(
        timestamps=ts,
        tickers=tickers,
        open=torch.from_numpy(np.nan_to_num(grid("open"), nan=0.0)).to(device),
        close=torch.from_numpy(np.nan_to_num(grid("close"), nan=0.0)).to(device),
        features=torch.from_numpy(feats).to(device),
        feature_names=names,
        tradable=torch.from_numpy(grid("tradable", np.bool_)).to(device),
        bar=manifest["bar"],
        split=split,
        benchmark=bench,
        buyable=mask.get("buyable"),
        delisted=mask.get("delisted"),
        bars_per_year=dataset_bars_per_year(manifest),
    )


def dataset_bars_per_year(manifest: dict) -> float:
    """Bars per year of a dataset: the manifest's, or (format 1) counted now on its calendar."""
    if manifest.get("bars_per_year"):
        return float(manifest["bars_per_year"])
    return bars_per_year(
        manifest["bar"],
        manifest.get("calendar", "XNYS"),
        start=manifest.get("start") or manifest["splits"]["train"]["start"],
        end=manifest.get("end") or manifest["splits"]["backtest"]["end"],
    )


def verify_dataset(dataset_dir: str | Path) -> str:
    """Recompute the content hash from the files and compare it with the manifest's.

    Returns the hash; raises :class:`FinpodError` when the files no longer match the
    manifest (edited, truncated or swapped), so a run can trust the dataset it names.
    """
    dataset_dir = Path(dataset_dir)
    man = load_manifest(dataset_dir)
    tickers, names = list(man["tickers"]), list(man["features"])
    T, N = int(man["bars"]), len(tickers)
    path = dataset_dir / man.get("files", {}).get("bars", "bars.parquet")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise FinpodError(f"cannot read {path}: {err}", "rebuild the dataset") from err
    if table.num_rows != T * N:
        raise FinpodError(
            f"{path} has {table.num_rows} rows, the manifest says {T * N}", "rebuild the dataset"
        )

    grid = _grid_reader(table, T, N)
    ts = _timestamps(grid)
    bars = Bars(
        timestamps=ts,
        tickers=tickers,
        open=grid("open"),
        high=grid("high"),
        low=grid("low"),
        close=grid("close"),
        volume=grid("volume"),
        tradable=grid("tradable", np.bool_),
        filled=grid("filled", np.bool_),
        bar=man["bar"],
        **{m: grid(m, np.bool_) for m in MASKS if m in table.column_names},
    )
    feats = np.stack([grid(n) for n in names], axis=-1)
    bench = None
    if man.get("files", {}).get("benchmark"):
        bench = pq.read_table(dataset_dir / man["files"]["benchmark"]).column("close").to_numpy()
    digest = content_hash(bars, feats, names, bench, man["splits"])
    if digest != man["hash"]:
        raise FinpodError(
            f"{dataset_dir} does not match its manifest (content hash {digest[:12]} ≠ {man['hash'][:12]})",
            "the files were changed after the build; rebuild the dataset",
        )
    return digest
