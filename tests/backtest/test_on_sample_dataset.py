"""run_backtest on the shipped NASDAQ-100 sample dataset: only the backtest split is read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import finpod.data
from finpod.backtest import run_backtest
from finpod.data import build_dataset, load_manifest, load_split

from .fakes import make_run_dir


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    dataset = build_dataset("sample", root / "dataset")
    manifest = load_manifest(dataset)
    run = make_run_dir(
        root,
        load_split(dataset, "backtest"),
        num_entries=2,
        dataset_path=str(dataset),
        dataset_hash=manifest["hash"],
        env={},
    )
    return dataset, run, manifest


def _poison_outside_backtest(dataset, manifest):
    """Overwrite every bar outside the backtest split (and the index) with garbage."""
    bt = manifest["splits"]["backtest"]
    n = len(manifest["tickers"])
    path = dataset / "bars.parquet"
    table = pq.read_table(path)
    row = np.arange(table.num_rows) // n
    outside = pa.array((row < bt["start_index"]) | (row >= bt["stop_index"]))
    for name in ("open", "close", *manifest["features"]):
        i = table.schema.get_field_index(name)
        garbage = pa.array(np.full(table.num_rows, 7.0e5, dtype=np.float32))
        table = table.set_column(i, name, pc.if_else(outside, garbage, table.column(name)))
    group = manifest["rows_per_group_bars"] * n
    pq.write_table(table, path, row_group_size=group)
    bench_path = dataset / manifest["files"]["benchmark"]
    bench = pq.read_table(bench_path)
    rows = np.arange(bench.num_rows)
    mask = pa.array((rows < bt["start_index"]) | (rows >= bt["stop_index"]))
    i = bench.schema.get_field_index("close")
    nan = pa.array(np.full(bench.num_rows, np.nan))
    bench = bench.set_column(i, "close", pc.if_else(mask, nan, bench.column("close")))
    pq.write_table(bench, bench_path)


def test_backtest_reads_no_bar_outside_the_backtest_split(
    sample, monkeypatch, tmp_path, patch_everywhere
):
    dataset, run, manifest = sample
    requested = []
    real = finpod.data.load_split

    def spy(dataset_dir, split, device="cpu"):
        requested.append(split)
        return real(dataset_dir, split, device)

    patch_everywhere(finpod.data, "load_split", spy)
    clean = run_backtest(run)
    assert requested == ["backtest"]
    start = pd.Timestamp(manifest["splits"]["backtest"]["start"])
    end = pd.Timestamp(manifest["splits"]["backtest"]["end"])
    assert clean.account_value.index[0] == start and clean.account_value.index[-1] == end
    for frame in (clean.returns, clean.positions, clean.all_returns):
        assert frame.index.min() >= start and frame.index.max() <= end
    assert clean.index_returns is not None and clean.index_returns.notna().all()
    assert np.isfinite(clean.metrics.loc["beta", "agent"])

    # same dataset with every bar of train and validation (and the index there) poisoned
    _poison_outside_backtest(dataset, manifest)
    poisoned = run_backtest(run)
    pd.testing.assert_frame_equal(clean.metrics, poisoned.metrics)
    pd.testing.assert_frame_equal(clean.positions, poisoned.positions)
    pd.testing.assert_frame_equal(clean.benchmark_returns, poisoned.benchmark_returns)


def test_the_sample_report_discloses_survivorship_and_the_index(sample):
    dataset, run, manifest = sample
    result = run_backtest(run)
    # the sample's universe is the members of 2019-12-31, used for 2010–2019
    text = result.disclosures["universe"]
    assert "not point-in-time" in text and "2019-12-31" in text and "survivorship bias" in text
    assert "index level" in result.disclosures["benchmark"]
    assert "no costs" in result.disclosures["benchmark"]
    assert result.bars_per_year == pytest.approx(load_split(dataset, "backtest").annualization)
