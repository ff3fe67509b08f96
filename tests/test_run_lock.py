"""One writer per run: a run (or walk-forward) folder in use holds a lock file; a second
writer is refused in one line naming the process that holds it, and the lock of a process
that is gone is taken over with a line."""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

from finpod.errors import FinpodError
from finpod.runs.lock import LOCK_FILE, FolderLock, read_lock

REPO = Path(__file__).resolve().parents[1]
#: Seconds a refused second writer may take (its start-up included).
REFUSED_WITHIN_S = 180


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _write_lock(folder: Path, **holder) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK_FILE).write_text(json.dumps(holder), encoding="utf-8")


def test_the_lock_file_names_its_process_and_is_removed_when_done(tmp_path):
    with FolderLock(tmp_path, "run"):
        holder = read_lock(tmp_path)
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        assert holder["started"]
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_second_writer_is_refused_naming_the_process_holding_the_lock(tmp_path):
    with FolderLock(tmp_path, "run"), pytest.raises(FinpodError) as err:
        FolderLock(tmp_path, "run").acquire()
    line = str(err.value)
    assert f"is in use by process {os.getpid()} on {socket.gethostname()}" in line
    assert "\n" not in line
    assert not (tmp_path / LOCK_FILE).exists()  # the refused writer left the lock alone


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_line(tmp_path):
    dead = _dead_pid()
    _write_lock(tmp_path, pid=dead, host=socket.gethostname(), started="2026-01-02T10:00:00")
    said: list[str] = []
    with FolderLock(tmp_path, "run", say=said.append):
        assert read_lock(tmp_path)["pid"] == os.getpid()
    assert len(said) == 1 and f"process {dead} on" in said[0]
    assert "no longer running" in said[0]


def test_a_lock_whose_pid_now_belongs_to_a_later_process_is_stale(tmp_path):
    # This process's pid, but a lock taken long before this process started.
    _write_lock(
        tmp_path, pid=os.getpid(), host=socket.gethostname(), started="2001-01-01T00:00:00+00:00"
    )
    said: list[str] = []
    with FolderLock(tmp_path, "run", say=said.append):
        pass
    assert len(said) == 1 and "no longer running" in said[0]


def test_a_lock_of_another_users_live_process_is_not_taken_over(tmp_path, monkeypatch):
    # Signal 0 to another user's process fails with EPERM: it exists, so its lock holds.
    # (Tests run as root, which may signal anyone: the refusal is simulated.)
    owner = os.getppid()  # alive, and started before the lock below
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if pid == owner and sig == 0:
            raise PermissionError(1, "Operation not permitted")
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    _write_lock(tmp_path, pid=owner, host=socket.gethostname(), started=started)
    said: list[str] = []
    with pytest.raises(FinpodError) as err:
        FolderLock(tmp_path, "run", say=said.append).acquire()
    assert f"is in use by process {owner} on {socket.gethostname()}" in str(err.value)
    assert not said and read_lock(tmp_path)["pid"] == owner  # the lock was left alone


def test_a_lock_held_on_another_host_is_refused_with_the_file_to_delete(tmp_path):
    _write_lock(tmp_path, pid=_dead_pid(), host="elsewhere.example", started="2026-01-02T10:00:00")
    with pytest.raises(FinpodError) as err:
        FolderLock(tmp_path, "walk-forward").acquire()
    assert "on elsewhere.example" in str(err.value)
    assert f"delete {tmp_path / LOCK_FILE}" in str(err.value)


def test_a_new_run_whose_folder_is_locked_is_refused_and_left_alone(tmp_path, finpod_cli):
    from finpod.data import build_dataset

    data = build_dataset("synthetic", tmp_path / "ds", n_tickers=3, n_bars=400, seed=0)
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    run = tmp_path / "runs" / "taken"
    run.mkdir(parents=True)
    with FolderLock(run, "run"):  # a writer that has not written run.json yet
        out = finpod_cli(
            "train", "--strategy", str(strategy), "--data", str(data),
            "--runs", str(tmp_path / "runs"), "--run-id", "taken",
        )  # fmt: skip
        one_error_line(out, f"run folder {run} is in use by process {os.getpid()}")
        assert [p.name for p in run.iterdir()] == [LOCK_FILE]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the first writer ended early (exit {proc.returncode})"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def _second(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``finpod ARGS`` as a second process; a writer that is not refused would run for
    minutes, so one that has not ended in :data:`REFUSED_WITHIN_S` fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "finpod", *args], capture_output=True, text=True, cwd=cwd,
            env=_env(), timeout=REFUSED_WITHIN_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"finpod {' '.join(args[:1])} was not refused: it ran on as a second writer")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(600)
def test_two_trainings_of_one_run_id_at_once_the_second_is_refused(tmp_path):
    from finpod.data import build_dataset

    data = build_dataset("synthetic", tmp_path / "ds", n_tickers=3, n_bars=400, seed=0)
    strategy = tmp_path / "s.toml"
    # Long enough to still be training when the second command starts.
    strategy.write_text(
        tiny_agent(train={"total_steps": 10_000_000, "eval_every": 128}), encoding="utf-8"
    )
    runs = tmp_path / "runs"
    args = ["train", "--strategy", str(strategy), "--data", str(data), "--runs", str(runs)]
    first = subprocess.Popen(
        [sys.executable, "-m", "finpod", *args, "--run-id", "dup1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path, env=_env(),
    )  # fmt: skip
    try:
        run = runs / "dup1"
        _wait_for(run / "checkpoints" / "last.safetensors", first)
        second = _second(*args, "--run-id", "dup1", cwd=tmp_path)
        resumed = _second("train", "--resume", str(run), cwd=tmp_path)
        assert first.poll() is None  # still training: the refusals met a live writer
    finally:
        _stop(first)
    for out in (second, resumed):
        one_error_line(out, f"run folder {run} is in use by process {first.pid}")
        assert "continuing run" not in out.stdout
    rows = (run / "metrics.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == len(set(rows)) and len(rows) > 1
    keys = [tuple(r.split(",")[i] for i in (0, 1, 3, 4)) for r in rows[1:]]
    assert len(keys) == len(set(keys))  # no (pod, env steps, split, metric) twice
    assert len(list((run / "tensorboard").rglob("events.out.tfevents.*"))) == 1
    assert not (run / LOCK_FILE).exists()  # the first writer released it when stopped


@pytest.mark.timeout(600)
def test_two_identical_walkforwards_into_one_folder_the_second_is_refused(tmp_path):
    from finpod.data import build_dataset

    data = build_dataset(
        "synthetic", tmp_path / "syn", n_tickers=3, n_bars=1100, seed=0, start="2000-01-03"
    )
    strategy = tmp_path / "tiny.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000}), encoding="utf-8")
    out = tmp_path / "wf-dup"
    args = [
        "walkforward", "--data", str(data), "--strategy", str(strategy), "--out", str(out),
        "--train", "400", "--validation", "200", "--backtest", "200", "--folds", "2",
        "--seeds", "1", "--no-ray",
    ]  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-m", "finpod", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path, env=_env(),
    )  # fmt: skip
    try:
        _wait_for(out / "walkforward.log", first)
        second = _second(*args, cwd=tmp_path)
        assert first.poll() is None
    finally:
        _stop(first)
    one_error_line(second, f"walk-forward folder {out} is in use by process {first.pid}")
    starts = [
        ln for ln in (out / "walkforward.log").read_text().splitlines() if "walk-forward:" in ln
    ]
    assert len(starts) == 1  # only the first one started
