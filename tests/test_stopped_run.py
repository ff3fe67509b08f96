"""A stopped run is a usable run: SIGTERM during ``finpod train`` (one agent) leaves the
board with the best checkpoint so far, and ``finpod backtest`` tests it and says the run
was stopped early."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_strategy import tiny_agent

from finpod.runs import Leaderboard


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


def _train_until(tmp_path: Path, dataset: Path, segments: int) -> tuple[Path, str, int]:
    """``finpod train`` of a long run, SIGTERM once ``segments`` segments are logged:
    (run directory, stderr, returncode)."""
    strategy = tmp_path / "long.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000, "eval_every": 128}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "finpod", "train", "--strategy", str(strategy)]
        + ["--data", str(dataset), "--runs", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = proc.stderr.readline()  # stdout holds only the run directory, at the end
        run = re.fullmatch(r"run directory: (\S+)\n", first)
        assert run, first
        proc.stderr.readline()  # "training ppo to …"
        for _ in range(segments):
            proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return Path(run.group(1)), err, proc.returncode


def test_a_run_stopped_by_sigterm_can_be_backtested(tmp_path, dataset, finpod_cli):
    run_dir, err, code = _train_until(tmp_path, dataset, segments=3)
    assert code != 0 and "Traceback" not in err, err
    board = Leaderboard.load(run_dir)
    (entry,) = board.entries
    assert (run_dir / entry.checkpoint).is_file()
    assert entry.env_steps >= 128 and entry.history
    assert entry.score == max(h["score"] for h in entry.history)
    stopped = json.loads((run_dir / "run.json").read_text())["stopped"]
    assert stopped["target_steps"] == 10_000_000 and stopped["env_steps"] >= entry.env_steps
    res = finpod_cli("backtest", str(run_dir), "--reports", str(tmp_path / "reports"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stderr.split())
    assert "stopped early" in text and "best checkpoint on validation so far" in text


def test_a_tournament_stopped_by_sigterm_can_be_backtested(tmp_path, dataset, finpod_cli):
    import secrets
    import shutil
    import time

    from tiny_strategy import tiny_tournament
    from tournament.conftest import kill_processes_under

    ray_dir = Path(f"/tmp/rst_{secrets.token_hex(3)}")
    ray_dir.mkdir()
    strategy = tmp_path / "t.toml"
    strategy.write_text(tiny_tournament(tournament={"pod_steps": 2048, "epochs": 1}))
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_TMPDIR": str(ray_dir)}
    env |= {"RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    args = ["train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path / "runs")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "finpod", *args, "--budget", "1e9 steps", "--pods", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = proc.stderr.readline()  # a tournament's lines go to stderr when piped
        run = re.fullmatch(r"run directory: (\S+)\n", first)
        assert run, first
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # a pod scored: the board has an entry
            line = proc.stderr.readline()
            if not line or re.match(r"finish p\d+", line):
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        kill_processes_under(ray_dir)
        shutil.rmtree(ray_dir, ignore_errors=True)
    run_dir = Path(run.group(1))
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert f"continue with: finpod train --resume {run_dir}" in " ".join(err.split())
    board = Leaderboard.load(run_dir)
    assert len(board) >= 1 and (run_dir / board.best().checkpoint).is_file()
    stopped = json.loads((run_dir / "run.json").read_text())["stopped"]
    assert stopped["target_steps"] == 1_000_000_000
    assert stopped["env_steps"] == board.progress.env_steps >= 2048
    res = finpod_cli("backtest", str(run_dir), "--reports", str(tmp_path / "reports"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stderr.split())
    assert "stopped early" in text and "best checkpoint on validation so far" in text


def test_a_stopped_run_without_a_last_checkpoint_continues_from_its_boards(
    tmp_path, dataset, finpod_cli
):
    # A stop between the best checkpoint's write and the last one's: the board names a
    # checkpoint, last.safetensors is not there. The run continues from the board's.
    from finpod.pipeline import train_agent
    from finpod.runs import RunDir

    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    run_dir = Path(train_agent(strategy, dataset, tmp_path / "runs", run_id="cut"))
    (entry,) = Leaderboard.load(run_dir).entries
    RunDir(run_dir).checkpoint("last").unlink()
    RunDir(run_dir).record_stopped(256, 256)
    kept = (run_dir / entry.checkpoint).read_bytes()
    res = finpod_cli("train", "--resume", str(run_dir), "--steps", "384")
    assert res.returncode == 0, res.stderr
    assert f"resuming {run_dir} from {entry.env_steps} env steps" in res.stderr, res.stderr
    assert "starting it again" not in res.stderr and res.stdout == f"{run_dir}\n"
    assert (run_dir / "checkpoints" / "last.safetensors").is_file()
    (after,) = Leaderboard.load(run_dir).entries
    assert after.score >= entry.score and (run_dir / after.checkpoint).is_file()
    if after.env_steps == entry.env_steps:
        assert (run_dir / after.checkpoint).read_bytes() == kept  # not beaten: kept
    assert "stopped" not in json.loads((run_dir / "run.json").read_text())


def test_the_stop_lines_say_where_it_stopped_and_where_a_resume_continues(tmp_path, dataset):
    from finpod.agent_run import stop_lines
    from finpod.pipeline import train_agent

    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    run_dir = Path(train_agent(strategy, dataset, tmp_path / "runs", run_id="cut"))
    (entry,) = Leaderboard.load(run_dir).entries
    stopped, resume = stop_lines(run_dir, 1300, 40_000, entry, "sharpe")
    assert stopped == (
        "stopped at 1,300 env steps of 40,000; the last checkpoint is at 256: "
        f"`finpod train --resume {run_dir}` continues from there (its 1,044 env steps after "
        "it are trained again)"
    )
    assert resume.startswith(f"the board holds the best checkpoint so far ({entry.env_steps:,}")
    assert resume.endswith(f"`finpod backtest {run_dir}` tests it")
