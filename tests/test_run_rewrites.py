"""A run never rewrites itself: a finished run is left as it is (unless asked for more
steps than it trained), another strategy for a run is refused, a backtest refuses a dataset whose bars changed since the run and a run's own
copy of an input that changed; settings that cannot fit and a full disk are one line and
leave no run behind; a run stopped before its first checkpoint starts again."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

from finpod.errors import FinpodError


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("rewrites")
    return build_dataset("synthetic", root / "ds", n_tickers=3, n_bars=400, seed=0)


@pytest.fixture(scope="module")
def finished(dataset, tmp_path_factory) -> tuple[Path, Path]:
    """(a finished run, the strategy file it was started from)."""
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("finished")
    strategy = root / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    return Path(train_agent(strategy, dataset, root / "runs", run_id="done")), strategy


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resume_of_a_finished_run_says_so_in_one_line_and_changes_nothing(finished, finpod_cli):
    run, _ = finished
    before = _files(run)
    out = finpod_cli("train", "--resume", str(run))
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is finished at 256 env steps" in lines[0], out.stderr
    assert "nothing changed" in lines[0]
    assert out.stdout == f"{run}\n"  # the run directory alone, as after training
    assert _files(run) == before  # run.json, leaderboard.json, train.log: byte for byte


def test_a_finished_run_asked_for_no_more_steps_than_it_trained_changes_nothing(
    finished, dataset, finpod_cli
):
    run, strategy = finished
    before = _files(run)
    fewer = finpod_cli("train", "--resume", str(run), "--steps", "128")
    retried = finpod_cli(  # a retried job: the same command, the same run id
        "train", "--strategy", str(strategy), "--data", str(dataset),
        "--runs", str(run.parent), "--run-id", "done",
    )  # fmt: skip
    for out in (fewer, retried):
        assert out.returncode == 0, out.stderr
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "is finished at 256 env steps" in lines[0], out.stderr
    assert _files(run) == before


def test_a_finished_run_asked_for_exactly_the_steps_it_trained_changes_nothing(
    finished, finpod_cli
):
    run, _ = finished
    before = _files(run)
    same = finpod_cli("train", "--resume", str(run), "--steps", "256")
    assert same.returncode == 0, same.stderr
    assert _files(run) == before  # run.json, leaderboard.json, train.log: byte for byte
    said = same.stdout + same.stderr
    assert "is finished at 256 env steps" in said and "nothing changed" in said, said


def test_another_strategy_for_an_existing_run_is_refused_in_one_line(
    finished, dataset, tmp_path, finpod_cli
):
    run, _ = finished
    other = tmp_path / "other.toml"
    other.write_text(tiny_agent(hparams={"actor_hidden": [32]}), encoding="utf-8")
    before = _files(run)
    resumed = finpod_cli("train", "--resume", str(run), "--strategy", str(other))
    one_error_line(resumed, "run done was trained with another strategy", str(other))
    named = finpod_cli(
        "train", "--strategy", str(other), "--data", str(dataset),
        "--runs", str(run.parent), "--run-id", "done",
    )  # fmt: skip
    one_error_line(named, "run done was trained with another strategy", str(other))
    assert _files(run) == before


def _rewrite_one_close(dataset: Path, split: str, factor: float) -> None:
    """Multiply one close of ``split`` by ``factor`` in ``bars.parquet``, keeping the
    file's layout (schema, row groups, the timestamps' statistics)."""
    from finpod.data import Manifest

    manifest = Manifest.load(dataset)
    path = dataset / "bars.parquet"
    meta = pq.read_metadata(path)
    table = pq.read_table(path)
    n = len(manifest.tickers)
    row = (manifest.splits[split].start_index + 5) * n + 1
    close = table.column("close").to_numpy().copy()
    close[row] *= factor
    index = table.schema.get_field_index("close")
    table = table.set_column(
        index, table.schema.field(index), pa.array(close, table.schema.field(index).type)
    )
    pq.write_table(
        table, path, row_group_size=meta.row_group(0).num_rows, compression="zstd",
        use_dictionary=["tic"], write_statistics=["timestamp"],
    )  # fmt: skip


def test_a_backtest_refuses_a_dataset_whose_backtest_bars_changed(dataset, tmp_path):
    from finpod.backtest import run_backtest
    from finpod.data import Manifest
    from finpod.pipeline import train_agent

    data = tmp_path / "ds"
    shutil.copytree(dataset, data)
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    run = train_agent(strategy, data, tmp_path / "runs", run_id="r")
    splits = json.loads((run / "run.json").read_text(encoding="utf-8"))["dataset"]["splits"]
    assert set(splits) == {"train", "validation", "backtest"}
    run_backtest(run)  # the dataset as trained on: backtests

    _rewrite_one_close(data, "backtest", 1.5)
    Manifest.load(data)  # same layout: the manifest still agrees with the file
    with pytest.raises(FinpodError) as err:
        run_backtest(run)
    assert str(data / "bars.parquet") in str(err.value) and "\n" not in str(err.value)
    assert "changed since run r was trained" in str(err.value)


def test_a_run_written_before_split_hashes_still_backtests(finished, tmp_path):
    from finpod.backtest import run_backtest

    run, _ = finished
    old = tmp_path / "old"
    shutil.copytree(run, old)
    info = json.loads((old / "run.json").read_text(encoding="utf-8"))
    del info["dataset"]["splits"]
    (old / "run.json").write_text(json.dumps(info), encoding="utf-8")
    assert run_backtest(old).metrics.equals(run_backtest(run).metrics)


def test_a_tampered_copy_of_a_runs_input_is_refused_naming_it(tmp_path):
    from finpod.backtest.run_record import RunInputs
    from finpod.runs import RunDir

    data = tmp_path / "ds"
    data.mkdir()
    bench = data / "benchmark.parquet"
    pq.write_table(pa.table({"close": [100.0, 101.0, 102.0, 103.0]}), bench)
    run = tmp_path / "run"
    RunDir.create(
        run, strategy={}, dataset_path=data, dataset_hash="h", seed=0, kind="agent",
        inputs={"benchmark": bench},
    )  # fmt: skip
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    manifest = {
        "hash": "h",
        "files": {"benchmark": "benchmark.parquet"},
        "splits": {"backtest": {"start_index": 2, "stop_index": 4}},
    }
    copy = run / "inputs" / "benchmark.parquet"
    pq.write_table(pa.table({"close": [100.0, 101.0, 150.0, 103.0]}), bench)  # the file moved
    assert RunInputs.check(run, meta, data, manifest, use_recorded=True).benchmark == copy
    pq.write_table(pa.table({"close": [100.0, 101.0, 999.0, 103.0]}), copy)  # and the copy
    with pytest.raises(FinpodError) as err:
        RunInputs.check(run, meta, data, manifest, use_recorded=True)
    assert f"copy of its benchmark file {copy}" in str(err.value)
    assert "changed since the run" in str(err.value)


def test_settings_that_cannot_fit_in_memory_are_refused_before_anything_is_created(
    dataset, tmp_path, finpod_cli
):
    strategy = tmp_path / "huge.toml"
    strategy.write_text(tiny_agent(train={"num_envs": 100_000_000}), encoding="utf-8")
    out = finpod_cli(
        "train", "--strategy", str(strategy), "--data", str(dataset),
        "--runs", str(tmp_path / "runs"), "--run-id", "huge",
    )  # fmt: skip
    one_error_line(out, "train.num_envs = 100,000,000 needs at least", "GiB", "lower")
    assert not (tmp_path / "runs" / "huge").exists()


def _full_disk(monkeypatch, under: Path, suffix: str) -> None:
    """Every atomic write of a file ending in ``suffix`` under ``under`` fails as on a full
    disk (at the rename that would publish it)."""
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).startswith(str(under)) and str(dst).endswith(suffix):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("fails", ["run.json", ".safetensors"])
def test_a_full_disk_at_the_first_write_is_one_line_and_leaves_no_run(
    fails, dataset, tmp_path, monkeypatch, finpod_cli
):
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    runs = tmp_path / "runs"
    _full_disk(monkeypatch, runs, fails)
    out = finpod_cli(
        "train", "--strategy", str(strategy), "--data", str(dataset),
        "--runs", str(runs), "--run-id", "full",
    )  # fmt: skip
    # after the training's own lines (on stderr: stdout holds only a run directory)
    one_error_line(
        out, f"the run directory {runs / 'full'} cannot be written", "No space left", alone=False
    )
    assert not (runs / "full").exists()


def test_a_full_disk_in_the_checkpoint_writer_is_one_line_and_leaves_no_run(
    dataset, tmp_path, monkeypatch, finpod_cli
):
    from safetensors import SafetensorError

    import finpod.agents.checkpoint as checkpoint

    def save_file(*args, **kwargs):
        raise SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
            'space left on device" })'
        )

    monkeypatch.setattr(checkpoint, "save_file", save_file)
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    out = finpod_cli(
        "train", "--strategy", str(strategy), "--data", str(dataset),
        "--runs", str(tmp_path / "runs"), "--run-id", "full",
    )  # fmt: skip
    one_error_line(out, "cannot be written", "StorageFull", "free disk space", alone=False)
    assert not (tmp_path / "runs" / "full").exists()


def _validation(run: Path) -> list[tuple[str, str]]:
    rows = (run / "metrics.csv").read_text(encoding="utf-8").splitlines()
    return [tuple(r.split(",")[i] for i in (1, 5)) for r in rows if ",validation,sharpe," in r]


def test_a_named_run_stopped_before_its_first_checkpoint_starts_again(
    finished, dataset, tmp_path, monkeypatch, finpod_cli
):
    import finpod.agent_run as agent_run

    whole, _ = finished
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    runs = tmp_path / "runs"
    args = ["train", "--strategy", str(strategy), "--data", str(dataset), "--runs", str(runs)]

    def stopped(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # Ctrl-C after the run was created, before training
        m.setattr(agent_run, "_train_and_record", stopped)
        first = finpod_cli(*args, "--run-id", "ctrlc")
    assert first.returncode != 0
    assert (runs / "ctrlc" / "run.json").is_file()
    assert not (runs / "ctrlc" / "checkpoints" / "last.safetensors").exists()

    again = finpod_cli(*args, "--run-id", "ctrlc")
    assert again.returncode == 0, again.stderr
    assert "no checkpoint yet: starting it again from the beginning" in again.stderr
    assert (runs / "ctrlc" / "leaderboard.json").is_file()
    # Started from the beginning: the curve of a run trained in one go.
    assert _validation(runs / "ctrlc") == _validation(whole)
    assert not (runs / "ctrlc" / ".finpod.lock").exists()


def test_memory_estimate_grows_with_the_envs():
    from types import SimpleNamespace

    from finpod.agents.memory import memory_needed
    from finpod.data.synthetic_market import make_synthetic
    from finpod.env.config import EnvConfig

    market = make_synthetic(n_tickers=3, n_bars=50, seed=0)
    make = lambda envs: SimpleNamespace(  # noqa: E731
        algorithm="ppo", hparams={"horizon": 8}, train=SimpleNamespace(num_envs=envs)
    )
    small = memory_needed(make(8), market, EnvConfig())
    assert memory_needed(make(8_000), market, EnvConfig()) == 1000 * small
    assert np.isfinite(small) and small > 0
