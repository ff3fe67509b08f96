"""A run keeps a copy and a SHA-256 of every file it read outside its directory; a
backtest refuses a file that changed since, in one line, or reads the run's copy when
asked (``--use-recorded-inputs``). A run written before these records still backtests,
with a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tiny_strategy import tiny_agent

from finpod.errors import FinpodError


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, str]:
    """(run directory, reference file, its text) of a tiny agent trained against a
    reference weights file."""
    from finpod.data import Manifest, build_dataset
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("immutable")
    data = build_dataset("synthetic", root / "ds", n_tickers=4, n_bars=240, seed=0)
    tickers = ",".join(Manifest.load(data).tickers)
    text = f"date,{tickers}\n2000-01-03,0.7,0.1,0.1,0.1\n"
    reference = root / "weights.csv"
    reference.write_text(text, encoding="utf-8")
    strategy = root / "s.toml"
    strategy.write_text(
        tiny_agent(env={"action_mode": "active", "reference": str(reference)}), encoding="utf-8"
    )
    run = train_agent(strategy, data, root / "runs", run_id="r")
    return Path(run), reference, text


def test_a_run_keeps_a_copy_and_a_hash_of_its_reference_and_strategy_files(trained):
    from finpod.runs.inputs import file_sha256

    run, reference, _ = trained
    inputs = json.loads((run / "run.json").read_text(encoding="utf-8"))["inputs"]
    assert set(inputs) == {"reference", "strategy"}  # the synthetic dataset has no index
    copy = run / inputs["reference"]["copy"]
    assert copy.read_bytes() == reference.read_bytes()
    assert inputs["reference"]["sha256"] == file_sha256(reference)
    assert inputs["reference"]["path"] == str(reference.resolve())


def test_a_changed_reference_file_is_refused_in_one_line(trained, tmp_path, finpod_cli):
    run, reference, text = trained
    before = finpod_cli("backtest", str(run), "--reports", str(tmp_path / "a"), "--device", "cpu")
    assert before.returncode == 0, before.stderr
    reference.write_text(text.replace("0.7,0.1,0.1,0.1", "0.1,0.1,0.1,0.7"), encoding="utf-8")
    try:
        out = finpod_cli("backtest", str(run), "--reports", str(tmp_path / "b"), "--device", "cpu")
        used = finpod_cli(
            "backtest", str(run), "--reports", str(tmp_path / "c"), "--device", "cpu",
            "--use-recorded-inputs",
        )  # fmt: skip
    finally:
        reference.write_text(text, encoding="utf-8")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert str(reference) in lines[0] and "changed since the run" in lines[0]
    assert "--use-recorded-inputs" in lines[0]
    assert not (tmp_path / "b").exists()
    # The run's copy gives the run's backtest: the same numbers as before the edit.
    assert used.returncode == 0, used.stderr
    first = (tmp_path / "a" / "r" / "metrics.csv").read_text(encoding="utf-8")
    assert (tmp_path / "c" / "r" / "metrics.csv").read_text(encoding="utf-8") == first


def test_a_run_without_input_records_backtests_with_a_note(trained, tmp_path):
    from finpod.backtest import run_backtest

    run, _, _ = trained
    old = tmp_path / "old"
    shutil.copytree(run, old)
    info = json.loads((old / "run.json").read_text(encoding="utf-8"))
    del info["inputs"]
    (old / "run.json").write_text(json.dumps(info), encoding="utf-8")
    result = run_backtest(old)
    assert "recorded no copy" in result.disclosures["inputs"]


def test_a_changed_benchmark_file_is_refused_and_its_copy_read_on_request(tmp_path):
    from finpod.backtest.run_record import RunInputs
    from finpod.runs import RunDir

    data = tmp_path / "ds"
    data.mkdir()
    bench = data / "benchmark.parquet"
    pq.write_table(pa.table({"close": [100.0, 101.0, 102.0, 103.0]}), bench)
    run = tmp_path / "run"
    RunDir.create(
        run, strategy={}, dataset_path=data, dataset_hash="h", seed=0, kind="agent",
        inputs={"benchmark": bench, "reference": None},
    )  # fmt: skip
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    manifest = {
        "hash": "h",
        "files": {"benchmark": "benchmark.parquet"},
        "splits": {"backtest": {"start_index": 2, "stop_index": 4}},
    }
    assert RunInputs.check(run, meta, data, manifest).benchmark is None  # unchanged: as is
    pq.write_table(pa.table({"close": [100.0, 101.0, 150.0, 103.0]}), bench)
    with pytest.raises(FinpodError, match="benchmark file .* changed since the run"):
        RunInputs.check(run, meta, data, manifest)
    kept = RunInputs.check(run, meta, data, manifest, use_recorded=True)
    assert kept.benchmark == run / "inputs" / "benchmark.parquet"
    # Another dataset (another content hash) has its own levels: not checked.
    other = {**manifest, "hash": "other"}
    assert RunInputs.check(run, meta, data, other).benchmark is None


def test_a_run_whose_input_file_is_missing_leaves_no_directory(tmp_path):
    from finpod.runs import RunDir

    run = tmp_path / "run"
    with pytest.raises(FinpodError, match="reference file"):
        RunDir.create(
            run, strategy={}, dataset_path=tmp_path, dataset_hash="h", seed=0, kind="agent",
            inputs={"reference": tmp_path / "gone.csv"},
        )  # fmt: skip
    assert not run.exists()
