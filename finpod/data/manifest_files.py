"""The cheap check of a manifest against its Parquet files, made on every dataset open.

``manifest.json`` says how many bars the dataset has, where each split starts and stops
and at which times. Those claims are compared with what the Parquet footers say, without
reading the data: the row count (bars × tickers) of ``bars.parquet`` and the row count of
the benchmark file, and the smallest and largest timestamp of each row group (its
statistics) against the dataset's first and last bar and each split's first and last bar.
A split boundary that falls on a row group's edge is checked exactly; one inside a group
must lie within the group's times. The full check (the content hash, which reads every
value) is :func:`finpod.data.store.verify_dataset` (``finpod info --verify``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finpod.errors import FinpodError

_HINT = "the manifest or the files were changed after the build; rebuild the dataset"


def check_manifest_files(dataset_dir: str | Path, manifest: Any) -> None:
    """Compare ``manifest`` (a :class:`~finpod.data.manifest.Manifest`) with the footers of
    the dataset's Parquet files; a disagreement is one :class:`FinpodError` line. A bars
    file that is not there is left to the readers (they name it)."""
    dataset_dir = Path(dataset_dir)
    files = manifest.files or {}
    path = dataset_dir / str(files.get("bars") or "bars.parquet")
    if not path.is_file():
        return
    where = f"{dataset_dir / 'manifest.json'} disagrees with {path.name}"
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise FinpodError(f"cannot read {path}: {err}", "the file is damaged; rebuild") from err
    n = len(manifest.tickers)
    bars = manifest.bars
    if n == 0 or meta.num_rows % n:
        raise FinpodError(f"{where}: {meta.num_rows} rows are not whole bars of {n} tickers", _HINT)
    if bars is not None and meta.num_rows != bars * n:
        raise FinpodError(
            f"{where}: the manifest says {bars} bars, the file holds {meta.num_rows // n} "
            f"({meta.num_rows} rows of {n} tickers)",
            _HINT,
        )
    total = meta.num_rows // n
    groups = _group_times(meta, n)
    if groups:
        _check_time(where, "the first bar", manifest.start, groups, 0, total)
        _check_time(where, "the last bar", manifest.end, groups, total - 1, total)
    _check_splits(where, manifest.splits, groups, total)
    bench = files.get("benchmark")
    if bench and (dataset_dir / str(bench)).is_file():
        rows = pq.read_metadata(dataset_dir / str(bench)).num_rows
        if rows != total:
            raise FinpodError(
                f"{dataset_dir / 'manifest.json'} disagrees with {bench}: {rows} benchmark "
                f"levels for {total} bars",
                _HINT,
            )


#: (first bar, stop bar, earliest time, latest time) of one row group.
Group = tuple[int, int, pd.Timestamp, pd.Timestamp]


def _group_times(meta: pq.FileMetaData, n: int) -> list[Group]:
    """Each row group's bar range and timestamp statistics ([] when a group has none)."""
    schema = meta.schema.to_arrow_schema()
    column = schema.get_field_index("timestamp")
    if column < 0:
        return []
    out: list[Group] = []
    row = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        stats = group.column(column).statistics
        if stats is None or not stats.has_min_max:
            return []
        out.append((row // n, (row + group.num_rows) // n, _utc(stats.min), _utc(stats.max)))
        row += group.num_rows
    return out


def _utc(value: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tz is None else stamp.tz_convert("UTC")


def _check_time(
    where: str, what: str, text: str | None, groups: list[Group], bar: int, total: int
) -> None:
    """``text`` (a manifest time) against the row group holding ``bar``: equal to the
    group's first (last) time when ``bar`` is its first (last) bar, within it otherwise."""
    if text is None or not 0 <= bar < total:
        return
    try:
        stamp = _utc(text)
    except (ValueError, TypeError) as err:
        raise FinpodError(f"{where}: {what} is {text!r}, not a time", _HINT) from err
    for first, stop, lo, hi in groups:
        if not first <= bar < stop:
            continue
        exact = lo if bar == first else hi if bar == stop - 1 else None
        if (exact is not None and stamp != exact) or not lo <= stamp <= hi:
            shown = exact if exact is not None else f"between {lo} and {hi}"
            raise FinpodError(
                f"{where}: the manifest puts {what} (bar {bar}) at {text}, the file at {shown}",
                _HINT,
            )
        return


def _check_splits(where: str, splits: Any, groups: list[Group], total: int) -> None:
    """Each split's bar count and row range, then its first and last bar's times."""
    stop_before = 0
    for name, split in sorted(splits.items(), key=lambda kv: kv[1].start_index):
        start, stop = split.start_index, split.stop_index
        if not stop_before <= start < stop <= total:
            raise FinpodError(
                f"{where}: the {name} split's rows [{start}, {stop}) do not fit the file's "
                f"{total} bars after the previous split",
                _HINT,
            )
        if split.bars != stop - start:
            raise FinpodError(
                f"{where}: the {name} split says {split.bars} bars for rows [{start}, {stop})",
                _HINT,
            )
        if groups:
            _check_time(where, f"the {name} split's first bar", split.start, groups, start, total)
            _check_time(where, f"the {name} split's last bar", split.end, groups, stop - 1, total)
        stop_before = stop
