"""Datasets on disk: the sample, splits, the content hash, loading."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.data import build_dataset, load_manifest, load_split, plan_splits
from finpod.data.calendar import bar_grid, sessions
from finpod.data.sources import SAMPLE_DIR, SAMPLE_INDEX
from finpod.errors import FinpodError

from .conftest import make_daily


def test_sample_builds_offline_under_a_minute(tmp_path, sample_dir):
    t0 = time.perf_counter()
    out = build_dataset("sample", tmp_path / "ds")
    assert time.perf_counter() - t0 < 60
    man = load_manifest(out)
    assert man["hash"] == load_manifest(sample_dir)["hash"]  # a rebuild is bit-identical
    assert len(man["tickers"]) == 95 and man["bar"] == "1d" and man["source"] == "sample"
    for name in ("bars.parquet", "benchmark.parquet", "cleaning_report.json", "manifest.json"):
        assert (out / name).exists()


def test_sample_splits_are_the_argued_dates_with_embargo(sample_dir):
    man = load_manifest(sample_dir)
    sp = man["splits"]
    assert sp["train"]["start"].startswith("2010-01-04") and sp["train"]["end"].startswith(
        "2016-12-30"
    )
    assert sp["validation"]["start"].startswith("2017-01")
    assert sp["validation"]["end"].startswith("2018-12-31")
    assert sp["backtest"]["start"].startswith("2019-01") and sp["backtest"]["end"].startswith(
        "2019-12-31"
    )
    assert sp["train"]["stop_index"] + 5 == sp["validation"]["start_index"]
    assert sp["validation"]["stop_index"] + 5 == sp["backtest"]["start_index"]


def test_load_split_shapes_and_benchmark(sample_dir):
    man = load_manifest(sample_dir)
    ndx = pd.read_csv(SAMPLE_DIR / SAMPLE_INDEX, index_col="Date", parse_dates=True)["Close"]
    for split in ("train", "validation", "backtest"):
        m = load_split(sample_dir, split)
        T = man["splits"][split]["bars"]
        assert m.close.shape == (T, 95) and m.features.shape == (T, 95, len(man["features"]))
        assert m.close.dtype == torch.float32 and m.tradable.dtype == torch.bool
        assert m.split == split and str(m.timestamps.tz) == "America/New_York"
        assert m.benchmark is not None and m.benchmark.index.equals(m.timestamps)
        dates = m.timestamps.tz_localize(None)
        np.testing.assert_allclose(m.benchmark.to_numpy(), ndx.loc[dates].to_numpy())
        # A price exists wherever the ticker is tradable, and 0.0 marks "no price yet".
        assert (m.close[m.tradable] > 0).all() and (m.open[m.tradable] > 0).all()


def test_tickers_masked_before_they_existed(sample_dir):
    train = load_split(sample_dir, "train")
    back = load_split(sample_dir, "backtest")
    for tic in ("FOX", "FOXA"):
        j = train.tickers.index(tic)
        assert (train.close[:, j] == 0).all() and not train.tradable[:, j].any()
        jb = back.tickers.index(tic)
        assert back.tradable[-50:, jb].all()
    j = train.tickers.index("PYPL")  # listed 2015-07-06
    first = int(train.tradable[:, j].float().argmax())
    assert str(train.timestamps[first].date()) == "2015-07-06"
    assert (train.close[:first, j] == 0).all() and (train.close[first:, j] > 0).all()


def test_load_split_on_device(sample_dir):
    m = load_split(sample_dir, "validation", device="cpu")
    assert m.device.type == "cpu"
    if torch.cuda.is_available():
        g = load_split(sample_dir, "validation", device="cuda")
        assert g.close.is_cuda and torch.equal(g.close.cpu(), m.close)


def _csv_dataset(tmp_path, df, name):
    d = tmp_path / f"src_{name}"
    d.mkdir()
    df.to_csv(d / "bars.csv", index=False)
    return load_manifest(build_dataset("files", tmp_path / f"ds_{name}", path=d))["hash"]


def test_hash_changes_iff_data_changes(tmp_path):
    df = make_daily(n=60)
    h0 = _csv_dataset(tmp_path, df, "a")
    # Same data, other row order, other directory, another build time: same hash.
    h1 = _csv_dataset(tmp_path, df.sample(frac=1.0, random_state=1), "b")
    assert h0 == h1
    # One price changes: another hash.
    bumped = df.copy()
    bumped.loc[17, "close"] *= 1.0001
    bumped.loc[17, "high"] = max(bumped.loc[17, "high"], bumped.loc[17, "close"])
    assert _csv_dataset(tmp_path, bumped, "c") != h0
    # One volume changes: another hash.
    vol = df.copy()
    vol.loc[3, "volume"] += 1
    assert _csv_dataset(tmp_path, vol, "d") != h0


def test_rebuild_in_place_replaces_atomically(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    make_daily(n=60).to_csv(d / "bars.csv", index=False)
    out = build_dataset("files", tmp_path / "ds", path=d)
    h = load_manifest(out)["hash"]
    out2 = build_dataset("files", tmp_path / "ds", path=d)
    assert out2 == out and load_manifest(out)["hash"] == h
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "src"]  # no temp leftovers


def test_refuses_to_overwrite_a_non_dataset_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FinpodError, match="not a finpod dataset"):
        build_dataset("synthetic", tmp_path, n_tickers=3)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@settings(max_examples=40, deadline=None)
@given(
    n_sess=st.integers(30, 400),
    embargo=st.integers(0, 4),
    f=st.tuples(st.floats(0.3, 0.8), st.floats(0.05, 0.3)),
)
def test_splits_never_overlap_and_keep_the_embargo(n_sess, embargo, f):
    days = sessions("2015-01-02", "2017-12-31")[:n_sess]
    ts = bar_grid(days, "1d")
    fr = (f[0], f[1], 1 - f[0] - f[1])
    if fr[2] <= 0.02:
        return
    try:
        plan = plan_splits(ts, None, embargo, fr)
    except FinpodError as err:
        assert "empty" in str(err)
        return
    tr, va, bt = (plan[k] for k in ("train", "validation", "backtest"))
    assert 0 == tr["start_index"] < tr["stop_index"]
    assert (
        va["start_index"] - tr["stop_index"] == embargo
        or va["start_index"] >= tr["stop_index"] + embargo
    )
    assert bt["start_index"] >= va["stop_index"] + embargo
    assert bt["stop_index"] == len(ts)
    assert (
        pd.Timestamp(tr["end"])
        < pd.Timestamp(va["start"])
        <= pd.Timestamp(va["end"])
        < pd.Timestamp(bt["start"])
    )


def test_split_minute_bars_on_session_boundaries():
    days = sessions("2019-01-02", "2019-03-29")
    ts = bar_grid(days, "5min")
    plan = plan_splits(ts, None, 1)
    for k in ("validation", "backtest"):
        first = pd.Timestamp(plan[k]["start"])
        assert first.strftime("%H:%M") == "09:30"


def test_overlapping_or_incomplete_split_dates_are_errors():
    ts = bar_grid(sessions("2015-01-02", "2016-12-30"), "1d")
    bad = {
        "train": ("2015-01-01", "2015-12-31"),
        "validation": ("2015-06-01", "2016-06-30"),
        "backtest": ("2016-07-01", None),
    }
    with pytest.raises(FinpodError, match="overlap"):
        plan_splits(ts, bad)
    with pytest.raises(FinpodError, match="no dates given for the backtest"):
        plan_splits(
            ts, {"train": ("2015-01-01", "2015-06-30"), "validation": ("2015-07-01", "2015-12-31")}
        )
    with pytest.raises(FinpodError, match="ends"):
        plan_splits(
            ts,
            {
                "train": ("2015-06-01", "2015-01-01"),
                "validation": (None, None),
                "backtest": (None, None),
            },
        )


def test_default_split_is_70_15_15_of_sessions(tmp_path):
    out = build_dataset("synthetic", tmp_path / "s", n_tickers=3, n_bars=400, embargo=0)
    sp = load_manifest(out)["splits"]
    assert (sp["train"]["bars"], sp["validation"]["bars"], sp["backtest"]["bars"]) == (280, 60, 60)


def test_loading_a_broken_dataset_is_an_error(tmp_path, sample_dir):
    with pytest.raises(FinpodError, match="not a finpod dataset"):
        load_split(tmp_path, "train")
    out = build_dataset("synthetic", tmp_path / "s", n_tickers=3, n_bars=300)
    with pytest.raises(FinpodError, match="unknown split"):
        load_split(out, "test")
    (out / "bars.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(FinpodError, match="cannot read"):
        load_split(out, "train")
    (out / "manifest.json").write_text("{")
    with pytest.raises(FinpodError, match="not valid JSON"):
        load_manifest(out)


def test_cleaning_report_saved(sample_dir):
    rep = json.loads((sample_dir / "cleaning_report.json").read_text())
    assert rep["listed_late"]["PYPL"].startswith("2015-07-06")
    assert load_manifest(sample_dir)["cleaning"]["listed_late"] == len(rep["listed_late"])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_load_split_on_cuda_matches_cpu(sample_dir):
    cpu = load_split(sample_dir, "backtest")
    gpu = load_split(sample_dir, "backtest", device="cuda")
    assert gpu.close.is_cuda and gpu.features.is_cuda and gpu.tradable.is_cuda
    assert torch.equal(gpu.features.cpu(), cpu.features) and torch.equal(
        gpu.tradable.cpu(), cpu.tradable
    )


def test_verify_recomputes_the_hash_from_disk_and_catches_edits(tmp_path):
    import pyarrow.parquet as pq

    from finpod.data import verify_dataset

    out = build_dataset("synthetic", tmp_path / "s", n_tickers=4, n_bars=300, late_listings=1)
    assert verify_dataset(out) == load_manifest(out)["hash"]
    table = pq.read_table(out / "bars.parquet")
    close = table.column("close").to_numpy().copy()
    close[500] *= 1.01
    pq.write_table(
        table.set_column(table.schema.get_field_index("close"), "close", [close]),
        out / "bars.parquet",
    )
    with pytest.raises(FinpodError, match="does not match its manifest"):
        verify_dataset(out)


def test_sample_hash_verifies(sample_dir):
    from finpod.data import verify_dataset

    assert verify_dataset(sample_dir) == load_manifest(sample_dir)["hash"]


def test_format_1_datasets_still_load(tmp_path):
    """A dataset written before masks, bars per year and dict-valued universe/benchmark."""
    from finpod.data import verify_dataset
    from finpod.data.dataset import benchmark_name, universe_disclosure

    d = tmp_path / "bars"
    d.mkdir()
    make_daily(n=60).to_csv(d / "long.csv", index=False)
    (tmp_path / "IDX.csv").write_text(
        "date,close\n"
        + "\n".join(
            f"{s.date()},{100 + k}" for k, s in enumerate(sessions("2019-01-02", "2019-06-28"))
        )
    )
    out = build_dataset("files", tmp_path / "ds", path=d, benchmark=tmp_path / "IDX.csv")
    man = load_manifest(out)
    old = {
        k: v for k, v in man.items() if k not in ("bars_per_year", "bars_per_year_rule", "masks")
    }
    old.update(format=1, universe="3 tickers from bars", benchmark="IDX")
    (out / "manifest.json").write_text(json.dumps(old))
    m = load_split(out, "all")
    assert m.buyable is None and m.delisted is None
    assert m.bars_per_year == 252.0  # counted on the calendar at load time (2019)
    assert m.benchmark is not None and m.benchmark.name == "IDX"
    assert benchmark_name(old) == "IDX" and universe_disclosure(old)["point_in_time"] is False
    assert verify_dataset(out) == man["hash"]
