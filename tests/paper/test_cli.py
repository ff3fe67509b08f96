"""``finpod paper`` as a user runs it: ``--dry-run`` sends nothing; Ctrl-C while an order is
in flight records it and stops; a process killed mid-decision is restarted without sending
any order twice; missing keys are one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from paper_setup import TRAIN_SESSIONS, after_close

K = TRAIN_SESSIONS
REPO = Path(__file__).resolve().parents[2]


def _args(run_dir: Path, dataset: Path, *more: str) -> list[str]:
    return ["paper", str(run_dir), "--data", str(dataset), "--lookback", "400", *more]


def _spawn(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "finpod", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_dry_run_logs_the_orders_and_sends_nothing(server, run_dir, trained, capsys):
    from finpod.cli import main

    server.set_clock(after_close(K))
    try:
        main(_args(run_dir, trained[1], "--dry-run", "--once"))
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    out = capsys.readouterr().out
    assert out.count("dry run: would buy") == 3, out
    assert not [r for r in server.requests if r[0] in ("POST", "DELETE")]
    assert server.posts == []
    assert not (run_dir / "paper").exists()  # no state, no log, no bar cache


def test_ctrl_c_with_an_order_in_flight_records_it_and_stops(server, run_dir, trained):
    server.set_clock(after_close(K))
    server.stall_posts_after = 1  # the second order waits for the test
    proc = _spawn(_args(run_dir, trained[1], "--max-decisions", "1", "--poll", "0.2"))
    assert server.stalled.wait(120), proc.communicate()
    proc.send_signal(signal.SIGINT)
    server.release.set()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped on Ctrl-C" in out and "Traceback" not in err
    state = json.loads((run_dir / "paper" / "state.json").read_text())
    recorded = {o["symbol"]: o["status"] for o in state["orders"].values()}
    assert recorded == {"AAA": "accepted", "BBB": "accepted"}
    assert state["last_decision"] is None  # the decision is not done: CCC was never sent
    assert len(server.posts) == 2
    # the decision is journaled before its first order, each order the account took once
    path = run_dir / "paper" / "journal.jsonl"
    records = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["decision", "order", "order"]
    assert {r["symbol"] for r in records[1:]} == {"AAA", "BBB"}


def test_a_process_killed_mid_decision_restarts_without_sending_twice(
    server, run_dir, trained, trader
):
    server.set_clock(after_close(K))
    server.stall_posts_after = 1
    proc = _spawn(_args(run_dir, trained[1], "--max-decisions", "1"))
    assert server.stalled.wait(120), proc.communicate()
    proc.kill()  # the second order reaches the account; the process never hears of it
    proc.communicate(timeout=60)
    server.stall_posts_after = None
    server.release.set()
    deadline = time.monotonic() + 30
    while len(server.orders) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    restarted = trader()
    assert restarted.step() == "decided"
    symbols = sorted(s for _, s, _ in server.sent())
    assert symbols == ["AAA", "BBB", "CCC"], restarted.lines
    assert len(server.posts) == 3  # no POST was refused as a duplicate: none was repeated
    # the order in flight was pending in the state: the start looked it up before deciding
    assert any(
        "is in the account (accepted): recorded, not sent again" in x for x in restarted.lines
    )


def test_missing_keys_are_one_line(run_dir, trained, monkeypatch):
    monkeypatch.delenv("APCA_API_KEY_ID", raising=False)
    monkeypatch.delenv("APCA_API_SECRET_KEY", raising=False)
    proc = _spawn(_args(run_dir, trained[1], "--once"))
    out, err = proc.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip()]
    assert proc.returncode == 1 and len(lines) == 1, err
    assert "APCA_API_KEY_ID" in lines[0]
