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
        + ["--data", str(dataset), "--out", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = proc.stdout.readline()
        run = re.fullmatch(r"run directory: (\S+)\n", first)
        assert run, first
        proc.stdout.readline()  # "training ppo to …"
        for _ in range(segments):
            proc.stdout.readline()
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
    res = finpod_cli("backtest", str(run_dir), "--out", str(tmp_path / "reports"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "stopped early" in text and "best checkpoint on validation so far" in text
