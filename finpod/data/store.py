"""A dataset's files: ``bars.parquet`` written by row group and read back a split at a time,
and the content hash that ties the files to the manifest (see :mod:`finpod.data.dataset`).

Prices and volumes are stored as float64, as the sources give them (a float32 column
would turn 312473.86 into 312473.875 and a volume of 197881354 into 197881360);
:data:`PRICE_DTYPE` is recorded in the manifest (``price_precision``). Datasets of older
formats hold float32 columns and keep their hash. The env reads prices as float32 either
way (:func:`load_split`); only the dataset keeps the source's digits.

The content hash is the SHA-256 of the data itself (tickers, bar size, feature names,
timestamps, prices, volumes, masks incl. ``buyable``/``delisted`` when present, features,
benchmark, split boundaries), never of
paths, build times or the Parquet encoding: two builds of the same data agree, and any
change to the data changes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from finpod.atomic import atomic_write
from finpod.data.bars import Bars
from finpod.data.calendar import TZ
from finpod.data.liquidity import LIQUIDITY_WINDOW_SESSIONS, bars_per_session, daily_liquidity
from finpod.data.manifest import Manifest, dataset_bars_per_year
from finpod.data.market import MarketData
from finpod.errors import FinpodError

#: Bars (timestamps) per Parquet row group; load_split reads only the groups it needs.
ROWS_PER_GROUP_BARS = 4096
#: Stored type of the price and volume columns (older datasets: float32).
PRICE_DTYPE = np.float64
#: The price and volume columns of bars.parquet.
PRICE_VOLUME = ("open", "high", "low", "close", "volume")
#: Optional (T, N) bool columns of bars.parquet, written when the source sets them.
MASKS = ("buyable", "delisted")


def content_hash(
    bars: Bars,
    features: np.ndarray,
    feature_names: list[str],
    benchmark: np.ndarray | None,
    splits: dict[str, dict[str, Any]] | None,
    price_dtype: Any = np.float32,
) -> str:
    """SHA-256 of the dataset's content (see the module docstring); prices and volumes
    are hashed as ``price_dtype``, the type they are stored in (float32: older datasets)."""
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
            a = np.nan_to_num(arr[t0:t1], nan=0.0).astype(price_dtype)
            h.update(a.tobytes())
        h.update(bars.volume[t0:t1].astype(price_dtype).tobytes())
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


def write_bars(
    path: Path, bars: Bars, feats: np.ndarray, names: list[str], advance: Callable[[int], None]
) -> None:
    """Write the (T, N) grid of ``bars`` and its features ``feats`` (named ``names``) to one
    Parquet file at ``path``, in row groups, calling ``advance(rows)`` as it goes."""
    T, N = bars.close.shape
    masks = [m for m in MASKS if getattr(bars, m) is not None]
    tic_dict = pa.array(list(bars.tickers), type=pa.string())
    ts_type = pa.timestamp("ns", tz=TZ)
    fields = [
        pa.field("timestamp", ts_type),
        pa.field("tic", pa.dictionary(pa.int32(), pa.string())),
        *[pa.field(c, pa.from_numpy_dtype(PRICE_DTYPE)) for c in PRICE_VOLUME],
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
                        pa.array(getattr(bars, c)[t0:t1].reshape(-1).astype(PRICE_DTYPE))
                        for c in PRICE_VOLUME
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
    manifest = Manifest.load(dataset_dir)
    if split == "all":
        r0, r1 = 0, int(manifest.bars)  # type: ignore[arg-type]
    elif split in manifest.splits:
        r0, r1 = manifest.splits[split].start_index, manifest.splits[split].stop_index
    else:
        raise FinpodError(f"unknown split {split!r}", "use train, validation, backtest or all")
    tickers: list[str] = list(manifest.tickers)
    names: list[str] = list(manifest.features)
    N = len(tickers)
    bars_path = dataset_dir / str(manifest.file("bars", "bars.parquet"))
    if not bars_path.exists():
        raise FinpodError(f"{bars_path} is missing", "rebuild the dataset with finpod download")
    group = manifest.rows_per_group_bars or ROWS_PER_GROUP_BARS
    # The liquidity window's sessions before the split are read too (past bars only).
    warm = int(round(LIQUIDITY_WINDOW_SESSIONS * bars_per_session(str(manifest.bar))))
    rw = max(0, r0 - warm)
    g0, g1 = rw // group, (r1 - 1) // group + 1
    try:
        pf = pq.ParquetFile(bars_path)
        masks = [m for m in MASKS if m in pf.schema_arrow.names]
        cols = ["timestamp", "tic", "open", "close", "volume", "tradable", *masks, *names]
        table = pf.read_row_groups(list(range(g0, g1)), columns=cols)
    except (OSError, pa.ArrowInvalid, IndexError) as err:
        raise FinpodError(
            f"cannot read {bars_path}: {err}", "the file is damaged; rebuild the dataset"
        ) from err
    lo, hi = (r0 - g0 * group) * N, (r1 - g0 * group) * N
    lw = (rw - g0 * group) * N
    liquidity = _split_liquidity(table.slice(lw, hi - lw), r1 - rw, N, r0 - rw, manifest.bar)
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
    bench_file = manifest.file("benchmark")
    if bench_file:
        bt = pq.read_table(dataset_dir / bench_file)
        vals = bt.column("close").to_numpy()[r0:r1]
        bench = pd.Series(vals, index=ts, name=manifest.benchmark_name or "benchmark")
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
        bar=manifest.bar,
        split=split,
        benchmark=bench,
        buyable=mask.get("buyable"),
        delisted=mask.get("delisted"),
        bars_per_year=dataset_bars_per_year(manifest),
        volume=torch.from_numpy(np.nan_to_num(grid("volume"), nan=0.0)).to(device),
        liquidity=liquidity.to(device),
    )


def _split_liquidity(table: pa.Table, rows: int, n: int, skip: int, bar: str) -> torch.Tensor:
    """(rows − skip, N, 2) :func:`daily_liquidity` of the last ``rows − skip`` bars of
    ``table`` (``rows`` bars × ``n`` tickers), computed over all ``rows``."""
    grid = _grid_reader(table, rows, n)
    close = torch.from_numpy(np.nan_to_num(grid("close", np.float64), nan=0.0))
    # A float64 column read as float64 is Arrow's own read-only buffer: copied for torch.
    volume = torch.from_numpy(np.array(grid("volume", np.float64)))
    sigma, adv = daily_liquidity(close, volume, str(bar))
    return torch.stack([sigma[skip:], adv[skip:]], dim=2).float()


def verify_dataset(dataset_dir: str | Path) -> str:
    """Recompute the content hash from the files and compare it with the manifest's.

    Returns the hash; raises :class:`FinpodError` when the files no longer match the
    manifest (edited, truncated or swapped), so a run can trust the dataset it names.
    """
    dataset_dir = Path(dataset_dir)
    man = Manifest.load(dataset_dir)
    tickers, names = list(man.tickers), list(man.features)
    T, N = int(man.bars), len(tickers)  # type: ignore[arg-type]
    path = dataset_dir / str(man.file("bars", "bars.parquet"))
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
    stored = table.schema.field("close").type.to_pandas_dtype()  # float32: older datasets
    bars = Bars(
        timestamps=ts,
        tickers=tickers,
        open=grid("open", stored),
        high=grid("high", stored),
        low=grid("low", stored),
        close=grid("close", stored),
        volume=grid("volume", stored),
        tradable=grid("tradable", np.bool_),
        filled=grid("filled", np.bool_),
        bar=man.bar,
        **{m: grid(m, np.bool_) for m in MASKS if m in table.column_names},
    )
    feats = np.stack([grid(n) for n in names], axis=-1)
    bench = None
    bench_file = man.file("benchmark")
    if bench_file:
        bench = pq.read_table(dataset_dir / bench_file).column("close").to_numpy()
    splits = {k: s.to_dict() for k, s in man.splits.items()}
    digest = content_hash(bars, feats, names, bench, splits, stored)
    if digest != man.hash:
        raise FinpodError(
            f"{dataset_dir} does not match its manifest (content hash {digest[:12]} ≠ {man.hash[:12]})",
            "the files were changed after the build; rebuild the dataset",
        )
    return digest
