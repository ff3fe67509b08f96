"""Prices and volumes keep the source's digits in the dataset (float64), and the manifest
says how they are stored."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from finpod.data import verify_dataset
from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download


def test_prices_and_volumes_keep_the_sources_digits(tmp_path, capsys):
    df = make_daily(("AAA", "BBB"), n=60)
    first = df.index[df.tic == "AAA"][10]
    df.loc[first, ["open", "high", "low", "close"]] = [312470.11, 312480.5, 312460.25, 312473.86]
    df.loc[first, "volume"] = 197881354.0
    # the rest of AAA near that level, so the row is no outlier
    rest = (df.tic == "AAA") & (df.index != first)
    df.loc[rest, ["open", "high", "low", "close"]] *= 312473.86 / df.loc[first - 1, "close"]
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    assert code == 0, err
    table = pq.read_table(tmp_path / "ds" / "bars.parquet").to_pandas()
    day = table.timestamp.dt.strftime("%Y-%m-%d") == df.loc[first, "date"]
    row = table[(table.tic == "AAA") & day]
    assert len(row) == 1
    # as Python floats: a float32 compared with a Python float is compared in float32
    assert float(row["close"].iloc[0]) == 312473.86
    assert float(row["open"].iloc[0]) == 312470.11
    assert float(row["volume"].iloc[0]) == 197881354.0
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["price_precision"] == "float64"
    assert verify_dataset(tmp_path / "ds") == manifest["hash"]


def test_an_older_float32_dataset_still_verifies(tmp_path):
    """A dataset written before prices were float64 keeps its hash (float32 values)."""
    legacy = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_run_format" / "dataset"
    schema = pq.read_schema(legacy / "bars.parquet")
    assert str(schema.field("close").type) == "float"  # float32 on disk
    manifest = json.loads((legacy / "manifest.json").read_text())
    assert "price_precision" not in manifest
    assert verify_dataset(legacy) == manifest["hash"]
