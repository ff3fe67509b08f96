"""A finished tournament is never altered: ``--resume`` of a run whose budget is spent says
so in one line and leaves every file byte for byte; a tournament records the hashes of
its splits' bars as one agent's run does, so its backtest refuses bars edited in place."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tiny_strategy import tiny_tournament

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(a finished tournament run, its strategy file, its dataset), trained once."""
    from tournament.conftest import kill_processes_under

    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("finished-tournament")
    data = build_dataset("synthetic", root / "ds", n_tickers=3, n_bars=300, seed=0)
    strategy = root / "t.toml"
    strategy.write_text(tiny_tournament(tournament={"pod_steps": 128, "epochs": 1}))
    ray_dir = Path(f"/tmp/rft_{secrets.token_hex(3)}")
    ray_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": str(ray_dir)}
    env |= {"RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    args = ["train", "-s", str(strategy), "-d", str(data), "--runs", str(root / "runs")]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "finpod", *args, "--budget", "2 pods", "--pods", "1"]
            + ["--run-id", "t1"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
    finally:
        kill_processes_under(ray_dir)
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip()), strategy, Path(data)


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resume_of_a_finished_tournament_says_so_and_changes_nothing(finished, finpod_cli):
    run, strategy, data = finished
    before = _files(run)
    resumed = finpod_cli("train", "--resume", str(run))
    retried = finpod_cli(  # a retried job: the same command, the same run id
        "train", "-s", str(strategy), "-d", str(data), "--runs", str(run.parent),
        "--budget", "2 pods", "--pods", "1", "--run-id", run.name,
    )  # fmt: skip
    for out in (resumed, retried):
        assert out.returncode == 0, out.stderr
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"run {run} is finished" in lines[0], out.stderr
        assert "nothing changed" in lines[0]
        assert out.stdout == f"{run}\n"  # the run directory alone, as after training
    assert _files(run) == before  # run.json, leaderboard.json, train.log: byte for byte


def test_a_tournament_records_its_split_hashes(finished):
    from finpod.backtest.split_hashes import split_hashes

    run, _, data = finished
    recorded = json.loads((run / "run.json").read_text())["dataset"]["splits"]
    assert recorded == split_hashes(data) and set(recorded) == {"train", "validation", "backtest"}


def _rewrite_one_backtest_close(dataset: Path) -> None:
    """Multiply one close of the backtest split by 1.01 in ``bars.parquet``, in the file's
    own layout (the manifest's checks still pass)."""
    from finpod.data import Manifest

    manifest = Manifest.load(dataset)
    path = dataset / "bars.parquet"
    meta = pq.read_metadata(path)
    table = pq.read_table(path)
    row = (manifest.splits["backtest"].start_index + 5) * len(manifest.tickers) + 1
    close = table.column("close").to_numpy().copy()
    close[row] *= np.asarray(1.01, dtype=close.dtype)
    index = table.schema.get_field_index("close")
    field = table.schema.field(index)
    table = table.set_column(index, field, pa.array(close, field.type))
    pq.write_table(
        table, path, row_group_size=meta.row_group(0).num_rows, compression="zstd",
        use_dictionary=["tic"], write_statistics=["timestamp"],
    )  # fmt: skip


def test_a_tournaments_backtest_refuses_backtest_bars_edited_in_place(finished, tmp_path):
    from finpod.backtest import run_backtest
    from finpod.errors import FinpodError

    run, _, data = finished
    edited = tmp_path / "ds"
    shutil.copytree(data, edited)
    _rewrite_one_backtest_close(edited)
    with pytest.raises(FinpodError, match="changed since run t1 was trained"):
        run_backtest(run, data=edited, device="cpu")


def test_a_run_that_recorded_no_split_hashes_is_flagged_in_its_report(finished, tmp_path):
    from finpod.backtest import run_backtest

    run, _, _ = finished
    old = tmp_path / "t1"
    shutil.copytree(run, old)
    info = json.loads((old / "run.json").read_text())
    del info["dataset"]["splits"]  # as a run written before runs recorded them
    (old / "run.json").write_text(json.dumps(info))
    result = run_backtest(old, device="cpu")
    assert "recorded no hash of its backtest bars" in result.disclosures["bars"]


def test_a_lock_held_on_another_host_refuses_a_resume_and_changes_nothing(finished, finpod_cli):
    from cli_runner import one_error_line

    from finpod.runs import LOCK_FILE

    run, _, _ = finished
    lock = run / LOCK_FILE
    lock.write_text(json.dumps({"pid": 4242, "host": "other-host", "started": "2026-01-01"}))
    try:
        before = _files(run)
        more = finpod_cli("train", "--resume", str(run), "--budget", "3 pods")  # would train
        one_error_line(more, "in use by process 4242 on other-host", f"delete {lock}")
        assert _files(run) == before
    finally:
        lock.unlink()


def test_a_tournament_killed_before_its_selection_makes_it_on_resume(
    finished, finpod_cli, tmp_path
):
    """Killed after its last pod and before its final selection: a resume trains nothing
    and makes the selection, so ``selected`` never falls back to the top score."""
    run, _, _ = finished
    cut = tmp_path / "runs" / "cut"
    shutil.copytree(run, cut)
    board = json.loads((cut / "leaderboard.json").read_text())
    for key in ("selection", "selected", "ensemble"):
        board.pop(key, None)
    (cut / "leaderboard.json").write_text(json.dumps(board))
    resumed = finpod_cli("train", "--resume", str(cut))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = json.loads((cut / "leaderboard.json").read_text())
    assert after["candidates_evaluated"] == board["candidates_evaluated"]  # nothing trained
    assert after["selection"]["selected"] == after["selected"]
    assert "selection" in json.loads((cut / "run.json").read_text())
