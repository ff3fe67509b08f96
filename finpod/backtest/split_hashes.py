"""SHA-256 of the bars each split of a dataset reads: recorded by a run, checked by its
backtest.

The dataset's manifest carries a content hash of the whole dataset, but a backtest reads
only ``bars.parquet``'s rows of the backtest split (and the liquidity window's sessions
before it), and the manifest cannot notice a file rewritten with the same layout. A run
therefore records, in ``run.json``'s ``dataset.splits``, the SHA-256 of the rows each split
reads (every column, in the file's order, and the benchmark's levels over the split); a
backtest recomputes the one it reads and refuses a dataset whose bars changed, naming the
file (:func:`check_dataset_bars`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from finpod.data.liquidity import LIQUIDITY_WINDOW_SESSIONS, bars_per_session
from finpod.data.manifest import Manifest
from finpod.data.store import ROWS_PER_GROUP_BARS
from finpod.errors import FinpodError

#: The splits a run records.
SPLITS = ("train", "validation", "backtest")
#: ``run.json``'s key (under ``dataset``) of the record.
SPLITS_KEY = "splits"


def _column_bytes(column: pa.ChunkedArray) -> list[bytes]:
    """The values of one column as bytes that change when any value changes."""
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        words = "\x1f".join(str(v) for v in array.dictionary.to_pylist()).encode("utf-8")
        return [words, np.ascontiguousarray(array.indices.to_numpy(zero_copy_only=False)).tobytes()]
    if pa.types.is_timestamp(array.type):
        array = array.cast(pa.int64())
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return ["\x1f".join(str(v) for v in array.to_pylist()).encode("utf-8")]
    values = np.asarray(array.to_numpy(zero_copy_only=False))
    valid = array.is_valid().to_numpy(zero_copy_only=False) if array.null_count else None
    out = [
        np.ascontiguousarray(values).tobytes()
        if values.dtype != object
        else repr(values.tolist()).encode("utf-8")
    ]
    if valid is not None:
        out.append(np.packbits(valid).tobytes())
    return out


def split_sha256(dataset_dir: str | Path, split: str, manifest: Manifest | None = None) -> str:
    """SHA-256 of the bars ``split`` reads (see the module doc).

    Args:
        dataset_dir: the dataset directory (``finpod download``).
        split: ``"train"``, ``"validation"`` or ``"backtest"``.
        manifest: the dataset's manifest (read when not given).
    """
    dataset_dir = Path(dataset_dir)
    man = manifest if manifest is not None else Manifest.load(dataset_dir)
    if split not in man.splits:
        raise FinpodError(f"the dataset has no {split} split", "rebuild the dataset")
    r0, r1 = man.splits[split].start_index, man.splits[split].stop_index
    n = len(man.tickers)
    warm = int(round(LIQUIDITY_WINDOW_SESSIONS * bars_per_session(str(man.bar))))
    rw = max(0, r0 - warm)
    group = man.rows_per_group_bars or ROWS_PER_GROUP_BARS
    g0, g1 = rw // group, (r1 - 1) // group + 1
    path = dataset_dir / str(man.file("bars", "bars.parquet"))
    h = hashlib.sha256(f"{split}:{rw}:{r0}:{r1}:{n}".encode())
    try:
        table = pq.ParquetFile(path).read_row_groups(list(range(g0, g1)))
        bench_file = man.file("benchmark")
        bench = pq.read_table(dataset_dir / bench_file) if bench_file else None
    except (OSError, pa.ArrowInvalid, IndexError) as err:
        raise FinpodError(
            f"cannot read {path}: {err}", "the file is damaged; rebuild the dataset"
        ) from err
    table = table.slice((rw - g0 * group) * n, (r1 - rw) * n)
    for name in table.column_names:
        h.update(name.encode("utf-8"))
        for chunk in _column_bytes(table.column(name)):
            h.update(chunk)
    if bench is not None and "close" in bench.column_names:
        h.update(b"benchmark")
        for chunk in _column_bytes(bench.column("close").slice(r0, r1 - r0)):
            h.update(chunk)
    return h.hexdigest()


def split_hashes(dataset_dir: str | Path, manifest: Manifest | None = None) -> dict[str, str]:
    """:func:`split_sha256` of each of :data:`SPLITS` (what ``run.json`` records)."""
    man = manifest if manifest is not None else Manifest.load(dataset_dir)
    return {s: split_sha256(dataset_dir, s, man) for s in SPLITS if s in man.splits}


def check_split(
    dataset_dir: str | Path, run_meta: Mapping[str, Any], split: str, run_name: str
) -> bool:
    """Refuse a dataset whose ``split`` bars are not those the run recorded.

    Returns False when the run recorded no hash of ``split`` (a run written before runs
    recorded them: nothing to check), True when the bars are the recorded ones.

    Raises:
        FinpodError: the bars differ, naming the bars file and the run.
    """
    recorded = ((run_meta.get("dataset") or {}).get(SPLITS_KEY) or {}).get(split)
    if not recorded:
        return False
    man = Manifest.load(dataset_dir)
    digest = split_sha256(dataset_dir, split, man)
    if digest != recorded:
        path = Path(dataset_dir) / str(man.file("bars", "bars.parquet"))
        raise FinpodError(
            f"the dataset's bars {path} changed since run {run_name} was trained: its "
            f"{split} split reads other bars (sha256 {digest[:12]} ≠ recorded {recorded[:12]})",
            "restore the dataset the run was trained on, or rebuild it with finpod download "
            "and train a new run",
        )
    return True


def check_dataset_bars(dataset: str | Path, run_meta: Mapping[str, Any], run_name: str) -> bool:
    """Refuse a dataset whose backtest bars are not those run ``run_name`` recorded, naming
    it (:func:`check_split`). Every run records them (one agent or a tournament); one
    written before runs did is checked by its manifest's content hash alone, and False
    says so (the report flags it: :func:`unchecked_bars_note`)."""
    return check_split(dataset, run_meta, "backtest", run_name)


def unchecked_bars_note(run_name: str) -> str:
    """The report's note on a run that recorded no hash of its backtest bars."""
    return (
        f"Run {run_name} recorded no hash of its backtest bars (written before runs did): "
        "bars edited in place since the run, with the manifest left as it was, could not be "
        "detected."
    )
