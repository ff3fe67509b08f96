"""SIGKILL of the driver mid-run, then ``--resume``: nothing on the leaderboard is lost."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from finpod.agents import read_checkpoint
from finpod.tournament import Leaderboard

from .conftest import kill_processes_under, write_strategy


def _finpod(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "finpod", "train", *args]


def _env(ray_dir: Path) -> dict[str, str]:
    ray_dir.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "RAY_TMPDIR": str(ray_dir),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "OMP_NUM_THREADS": "1",
    }


def _snapshot(run_dir: Path) -> tuple[dict, dict[str, str]]:
    board = json.loads((run_dir / "leaderboard.json").read_text())
    sums = {
        e["pod_id"]: hashlib.sha256((run_dir / e["checkpoint"]).read_bytes()).hexdigest()
        for e in board["entries"]
    }
    return board, sums


def test_sigkill_of_the_driver_then_resume_keeps_every_entry_and_continues(
    tmp_path, tiny_dataset, ray_tmp
):
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=256, epochs=2, top_k=50)
    out = tmp_path / "runs"
    first_ray = ray_tmp / "k1"
    args = [
        "--strategy",
        str(strategy),
        "--data",
        str(tiny_dataset),
        "--pods",
        "1",
        "--runs",
        str(out),
    ]
    proc = subprocess.Popen(
        _finpod([*args, "--budget", "500 pods"]),
        env=_env(first_ray),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 150
        board_file = None
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(out.glob("*/leaderboard.json"))
            if runs:
                board_file = runs[0]
                try:
                    if json.loads(board_file.read_text())["candidates_evaluated"] >= 3:
                        break
                except (ValueError, KeyError):
                    pass  # never happens with atomic writes; tolerated so a failure is explicit below
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()
        assert board_file is not None, "the run never wrote its leaderboard"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_processes_under(first_ray)
    run_dir = board_file.parent

    before, sums_before = _snapshot(run_dir)
    assert before["candidates_evaluated"] >= 3
    for e in before["entries"]:  # every entry on disk after the kill is complete and valid
        read_checkpoint(run_dir / e["checkpoint"])

    target = before["candidates_evaluated"] + 3
    second_ray = ray_tmp / "k2"
    try:
        done = subprocess.run(
            _finpod(["--resume", str(run_dir), "--budget", f"{target} pods", "--pods", "1"]),
            env=_env(second_ray),
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        kill_processes_under(second_ray)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(run_dir)

    after, sums_after = _snapshot(run_dir)
    assert after["candidates_evaluated"] == target
    old = {e["pod_id"]: e for e in before["entries"]}
    new = {e["pod_id"]: e for e in after["entries"]}
    for pod_id, entry in old.items():
        assert new[pod_id] == entry
        assert sums_after[pod_id] == sums_before[pod_id]
    added = sorted(set(new) - set(old))
    assert len(added) == 3 and min(added) > max(old)
    assert after["progress"]["wall_s"] >= before["progress"]["wall_s"]
    board = Leaderboard.load(run_dir)
    files = {f"checkpoints/{p.name}" for p in (run_dir / "checkpoints").iterdir()}
    assert files == {e.checkpoint for e in board.entries}
    log = (run_dir / "train.log").read_text()
    assert "resumed with" in log


def test_a_bad_budget_is_one_red_line_and_exit_1_before_anything_starts(
    tmp_path, tiny_dataset, ray_tmp
):
    strategy = write_strategy(tmp_path / "s.toml")
    out = tmp_path / "runs"
    args = [
        "--strategy",
        str(strategy),
        "--data",
        str(tiny_dataset),
        "--budget",
        "soon",
        "--runs",
        str(out),
    ]
    done = subprocess.run(
        _finpod(args), env=_env(ray_tmp / "b"), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "budget 'soon'" in lines[0] and "Traceback" not in done.stderr
    assert not out.exists()  # no half-made run directory
