"""Clean stops: SIGTERM stops every long command as Ctrl-C does, with one line naming the
signal and the command that continues the work; no traceback, and no native stack of
Ray's signal handler, after Ray has started in the driver."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_strategy import tiny_agent, tiny_tournament
from tournament.conftest import kill_processes_under

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


def _start(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "finpod", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})},
        # as at a terminal: SIGINT at its default even where the suite runs in the background
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for(stream, pattern: str, timeout: float) -> list[str]:
    """Lines read from ``stream`` up to the first matching ``pattern`` (a regex)."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if re.search(pattern, line):
            return seen
    raise AssertionError(f"no line matching {pattern!r} in {seen}")


def _stop(proc: subprocess.Popen, signum: int) -> tuple[str, int]:
    """(stderr, exit code) after ``signum``; what stdout says after it is in ``proc.tail``."""
    try:
        proc.send_signal(signum)
        proc.tail, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return err, proc.returncode


@pytest.mark.parametrize(
    ("signum", "head"), [(signal.SIGTERM, "stopped by SIGTERM"), (signal.SIGINT, "interrupted")]
)
def test_sigterm_and_ctrl_c_stop_training_alike_with_the_resume_line(
    tmp_path, dataset, signum, head
):
    strategy = tmp_path / "long.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000, "eval_every": 128}))
    proc = _start(["train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path)])
    first = _wait_for(proc.stderr, r"^run directory: ", 120)[-1]
    _wait_for(proc.stderr, r": \d+ steps ", 120)  # a segment done: its checkpoint is written
    run = first.split(": ", 1)[1].strip()
    err, code = _stop(proc, signum)
    # the log lines written before and as the run stopped, then the one stop line
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 128 + signum and "Traceback" not in err, err
    assert lines[-1] == f"{head}; continue with: finpod train --resume {run}", err
    assert sum("continue with" in line for line in lines) == 1, err
    assert proc.tail == ""  # no run written: stdout never names it


def test_the_stop_line_names_the_checkpoint_a_resume_continues_from(tmp_path, dataset):
    strategy = tmp_path / "long.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000, "eval_every": 128}))
    proc = _start(["train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path)])
    run = _wait_for(proc.stderr, r"^run directory: ", 120)[-1].split(": ", 1)[1].strip()
    _wait_for(proc.stderr, r": \d+ steps ", 120)  # a segment done: its checkpoint is written
    err, code = _stop(proc, signal.SIGINT)
    assert code == 130 and "Traceback" not in err, err
    text = " ".join(err.split())
    said = re.search(
        r"stopped at ([\d,]+) env steps of 10,000,000; the last checkpoint is at ([\d,]+): "
        rf"`finpod train --resume {re.escape(run)}` continues from there",
        text,
    )
    assert said, err
    stopped, last = (int(n.replace(",", "")) for n in said.groups())
    assert stopped >= last >= 128
    # What it says is what the resume does: it continues from that checkpoint.
    resumed = subprocess.run(
        [sys.executable, "-m", "finpod", "train", "--resume", run, "--steps", str(last + 8)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.startswith(f"resuming {run} from {last:,} env steps"), resumed.stderr


def test_sigterm_during_a_ray_tournament_is_one_line_without_ray_s_native_stack(tmp_path, dataset):
    ray_dir = Path(f"/tmp/rfs_{secrets.token_hex(3)}")
    ray_dir.mkdir()
    strategy = tmp_path / "t.toml"
    strategy.write_text(tiny_tournament(tournament={"pod_steps": 100_000, "epochs": 50}))
    env = {"RAY_TMPDIR": str(ray_dir), "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    args = ["train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path / "runs")]
    proc = _start([*args, "--budget", "1e9 steps", "--pods", "1"], env)
    try:
        # A pod has started: Ray runs in the driver, and has installed its own handlers.
        _wait_for(proc.stderr, r"^start p\d+", 240)
        time.sleep(2)
        err, code = _stop(proc, signal.SIGTERM)
    finally:
        kill_processes_under(ray_dir)  # what Ray left behind, if anything
        shutil.rmtree(ray_dir, ignore_errors=True)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "SIGTERM received" not in err and "@ 0x" not in err, err
    # The live view's lines that were on their way, then the one stop line.
    assert lines[-1].startswith("stopped by SIGTERM"), err
    assert all(re.match(r"(start|finish|progress:) ", line) for line in lines[:-1]), err
    assert "finpod train --resume" in lines[-1] or "nothing can be resumed yet" in lines[-1]


def test_sigterm_during_a_walkforward_names_the_same_command_to_resume(tmp_path, dataset):
    strategy = tmp_path / "wf.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000, "eval_every": 10**7}))
    args = [
        "walkforward", "-d", str(dataset), "-s", str(strategy), "-o", str(tmp_path / "wf"),
        "--train", "150", "--validation", "60", "--backtest", "60", "--folds", "1",
        "--seeds", "1", "--no-ray",
    ]  # fmt: skip
    proc = _start(args)
    _wait_for(proc.stdout, r"starting walk-forward", 120)
    time.sleep(3)  # the fold's job under way
    err, code = _stop(proc, signal.SIGTERM)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 128 + signal.SIGTERM
    assert lines == [f"stopped by SIGTERM; continue with: finpod {' '.join(args)}"], err
    assert "interrupted" not in proc.tail and "resume" not in proc.tail, proc.tail  # said once
