"""Fields other code trusts are what they say: the tournament's data plane recomputes the
content hash from the files, and the manifest's ``sessions`` per split counts sessions."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from finpod.data import build_dataset
from finpod.data.calendar import session_of
from finpod.data.store import load_split
from finpod.errors import FinpodError
from finpod.tournament.dataplane import DataPlane, verified_hash


def _edit_one_close(ds) -> None:
    """Rewrite bars.parquet with one close × 1.5 (same layout); the manifest is untouched."""
    path = ds / "bars.parquet"
    table = pq.read_table(path)
    close = table.column("close").to_numpy().copy()
    row = int(np.flatnonzero(np.isfinite(close))[len(close) // 3])
    close[row] *= 1.5
    i = table.schema.get_field_index("close")
    table = table.set_column(i, "close", pa.array(close, type=table.schema.field(i).type))
    pq.write_table(table, path)


@pytest.fixture
def edited(tmp_path):
    ds = build_dataset("synthetic", tmp_path / "ds", n_tickers=3, years=0.4)
    want = json.loads((ds / "manifest.json").read_text())["hash"]
    _edit_one_close(ds)
    return ds, want


def test_the_data_plane_recomputes_the_hash_rather_than_trust_the_manifest(edited):
    ds, manifest_hash = edited
    with pytest.raises(FinpodError, match="does not match its manifest"):
        verified_hash(ds, manifest_hash)  # a resumed run passes the manifest's own hash


def test_publishing_an_edited_dataset_is_refused_before_anything_is_shipped(edited):
    ds, manifest_hash = edited
    with pytest.raises(FinpodError, match="does not match its manifest"):
        DataPlane.publish(ds, manifest_hash)


@pytest.mark.parametrize(
    ("bar", "extra"),
    [
        ("15min", {"n_bars": 26 * 40}),  # split by sessions
        ("15min", {"n_bars": 26 * 10}),  # too few sessions: split by bars
        ("1d", {"years": 0.5}),
    ],
)
def test_the_manifest_sessions_per_split_counts_sessions_not_bars(tmp_path, bar, extra):
    ds = build_dataset("synthetic", tmp_path / "ds", n_tickers=2, bar=bar, **extra)
    manifest = json.loads((ds / "manifest.json").read_text())
    for name, split in manifest["splits"].items():
        ts = load_split(ds, name).timestamps
        assert split["sessions"] == len(np.unique(session_of(ts))), name
        assert split["bars"] == len(ts)
        if bar != "1d":
            assert split["sessions"] < split["bars"]
