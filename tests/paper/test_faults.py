"""Paper trading against the loopback broker with faults injected: an answer lost after the
order was taken, a kill between send and answer, HTTP 5xx bursts, a persistent 429, a
stale live bar, an unreachable trading server. In each, the journal's orders are the
account's orders exactly, no order is sent twice (no POST refused as a duplicate), and
the trader goes on or stops in a state that resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from journal_checks import assert_journal_is_the_account, journal
from paper_setup import DAYS, TRAIN_SESSIONS, after_close

from finpod.errors import FinpodError

K = TRAIN_SESSIONS
REPO = Path(__file__).resolve().parents[2]


def test_an_answer_lost_after_the_order_was_taken_is_looked_up_not_sent_again(
    trader, server, run_dir
):
    server.inject("POST", "/v2/orders", drop=True)  # the first order: taken, answer lost
    server.inject("POST", "/v2/orders", status=504, taken=True, after=1)  # the second: 504
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "decided"
    assert len(server.orders) == 3 and len(server.posts) == 3
    found = [x for x in t.lines if "is in the account (accepted): recorded, not sent again" in x]
    assert len(found) == 2, t.lines  # one line each
    state = json.loads((run_dir / "paper" / "state.json").read_text())
    assert sorted(o["status"] for o in state["orders"].values()) == ["accepted"] * 3
    assert_journal_is_the_account(run_dir, server)


def test_an_order_refused_as_a_duplicate_is_recorded_as_the_account_has_it(trader, server, run_dir):
    state = run_dir / "paper" / "state.json"
    first = trader()
    saved = state.read_text()
    server.set_clock(after_close(K))
    assert first.step() == "decided"
    state.write_text(saved)  # the state of the sent orders is lost ...
    (run_dir / "paper" / "journal.jsonl").unlink()
    server.inject("GET", "/v2/orders:by_client_order_id", status=404)  # ... and one lookup lags
    again = trader()
    assert again.step() == "decided"
    assert len(server.duplicates) == 1 and len(server.orders) == 3
    line = next(x for x in again.lines if "has this client order id already" in x)
    assert "is in the account (accepted): recorded, not sent again" in line
    recorded = json.loads(state.read_text())["orders"]
    assert sorted(o["status"] for o in recorded.values()) == ["accepted"] * 3
    assert_journal_is_the_account(run_dir, server, resent=1)


def _spawn(run_dir: Path, dataset: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = ["paper", str(run_dir), "--data", str(dataset), "--lookback", "400"]
    return subprocess.Popen(
        [sys.executable, "-m", "finpod", *args, "--max-decisions", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_kill_between_send_and_answer_then_a_restart_that_no_longer_wants_the_symbol(
    server, run_dir, trained, trader
):
    server.set_clock(after_close(K))
    server.stall_posts_after = 0  # the first order waits for the test
    proc = _spawn(run_dir, trained[1])
    assert server.stalled.wait(120), proc.communicate()
    proc.kill()  # the order reaches the account; the process never hears of it
    proc.communicate(timeout=60)
    server.stall_posts_after = None
    server.release.set()
    deadline = time.monotonic() + 30
    while not server.orders and time.monotonic() < deadline:
        time.sleep(0.05)
    (first,) = server.orders.values()
    server.fill_open_orders(f"{DAYS[K + 1]:%Y-%m-%d}")  # and it fills
    restarted = trader()  # same bar: the agent now holds that symbol
    assert restarted.step() == "decided"
    assert any(x.startswith("decision at") and "2 order(s)" in x for x in restarted.lines)
    assert f"order {first['client_order_id']} is in the account (filled)" in "\n".join(
        restarted.lines
    )
    symbols = [p["symbol"] for p in server.posts]
    assert symbols.count(first["symbol"]) == 1, symbols  # not wanted again, not sent again
    (decision,) = [r for r in journal(run_dir) if r["kind"] == "decision"]
    assert first["client_order_id"] in {o["client_order_id"] for o in decision["orders"]}
    assert_journal_is_the_account(run_dir, server)


def test_http_500_and_503_bursts_are_ridden_out_with_one_line_each(trader, server, run_dir):
    server.set_clock(after_close(K))
    t = trader()
    server.inject("GET", "/v2/clock", status=500, times=2)
    server.inject("GET", "/v2/stocks/bars", status=500)
    server.inject("GET", "/v2/account", status=503, times=7)  # past the request's 6 tries
    server.inject("POST", "/v2/orders", status=503, after=1)  # the second order: not taken
    assert t.run(0.01, max_decisions=1) == 0
    failed = [x for x in t.lines if "poll failed" in x]
    assert [x.split("poll failed (")[1][:4] for x in failed] == [f"{k}/10" for k in range(1, 6)]
    # and nothing else: two starts, the bar decided twice (again after the failed order),
    # three orders sent
    assert len(t.lines) == len(failed) + 7, t.lines
    assert len(server.orders) == 3
    assert journal(run_dir)[-1]["kind"] == "order"
    assert_journal_is_the_account(run_dir, server)


def test_a_persistent_429_stops_past_the_limit_and_the_restart_resumes(trader, server, run_dir):
    server.set_clock(after_close(K))
    limit = server.inject("POST", "/v2/orders", status=429, after=1, times=None)
    t = trader()
    with pytest.raises(FinpodError, match="3 polls in a row failed") as err:
        t.run(0.01, max_failed_polls=3)
    assert "start finpod paper again to resume" in str(err.value)
    assert len(server.orders) == 1  # the first order went through, the rest never did
    assert_journal_is_the_account(run_dir, server)
    server.faults.remove(limit)
    again = trader()
    assert again.run(0.01, max_decisions=1) == 0
    assert len(server.orders) == 3
    assert_journal_is_the_account(run_dir, server)


def test_a_failed_connection_at_start_is_retried(server, run_dir, trained):
    from finpod.paper.trader import PaperTrader

    server.set_clock(after_close(K))
    lines: list[str] = []
    t = PaperTrader(run_dir, data=trained[1], lookback_sessions=400, log=lines.append)
    server.inject("GET", "/v2/account", drop=True, times=3)  # the first start's three tries
    assert t.run(0.01, max_decisions=1) == 0
    (failed,) = [x for x in lines if "poll failed" in x]
    assert "lost the connection" in failed or "cannot reach Alpaca" in failed
    assert len(server.orders) == 3
    assert_journal_is_the_account(run_dir, server)


def test_an_unreachable_trading_server_is_named_with_its_variable(trader, server, monkeypatch):
    monkeypatch.setenv("FINPOD_ALPACA_TRADING_URL", "http://127.0.0.1:9")
    with pytest.raises(FinpodError) as err:
        trader()
    assert "cannot reach Alpaca at http://127.0.0.1:9" in str(err.value)
    assert "FINPOD_ALPACA_TRADING_URL" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_stale_live_bar_is_one_line_and_no_decision(trader, server, run_dir):
    full = dict(server.bars)
    server.bars = {s: df.iloc[:K] for s, df in full.items()}  # the feed stops at K - 1
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "stale"
    assert t.step() == "stale"
    (line,) = [x for x in t.lines if "no decision" in x]
    assert f"{DAYS[K - 1]:%Y-%m-%d}" in line and "waiting for fresh bars" in line
    assert server.posts == [] and journal(run_dir) == []
    server.bars = full  # the feed catches up
    assert t.step() == "decided"
    assert_journal_is_the_account(run_dir, server)


def test_live_bars_come_from_the_datasets_feed(trader, server):
    t = trader()
    server.set_clock(after_close(K))
    t.step()
    assert set(server.feeds) == {"sip"}  # the dataset's bars are consolidated (files)
    assert "sip bars" in t.lines[0]
    other = trader(feed="iex")
    assert any("the dataset's are sip" in x for x in other.lines)


def test_the_dataset_feed_is_the_one_its_manifest_records():
    from finpod.paper.decide import dataset_feed

    assert dataset_feed({"source": "alpaca", "source_options": {"feed": "sip"}}) == "sip"
    assert dataset_feed({"source": "alpaca", "source_options": {"feed": "iex"}}) == "iex"
    assert dataset_feed({"source": "files", "source_options": {}}) == "sip"


def test_rewriting_a_journal_record_replaces_it(tmp_path):
    from finpod.paper.state import read_journal, write_journal

    write_journal(tmp_path, {"kind": "decision", "decision": "d1", "v": 1})
    write_journal(tmp_path, {"kind": "fills", "decision": "d1", "v": 1})
    write_journal(tmp_path, {"kind": "decision", "decision": "d1", "v": 2})
    write_journal(tmp_path, {"kind": "order", "client_order_id": "c1", "decision": "d1"})
    assert [(r["kind"], r.get("v")) for r in read_journal(tmp_path)] == [
        ("decision", 2),
        ("fills", 1),
        ("order", None),
    ]


def test_the_docs_state_the_limits_the_code_has():
    from finpod.data.sources.alpaca_client import TRIES
    from finpod.paper.broker import TRADING_URL_ENV
    from finpod.paper.trader import MAX_FAILED_POLLS, MAX_RETRY_WAIT_S

    section = " ".join((REPO / "docs" / "paper.md").read_text().split())
    assert f"after a request's {TRIES} tries (the first and {TRIES - 1} retries" in section
    assert f"After {MAX_FAILED_POLLS} failed polls in a row" in section
    assert f"(at most {MAX_RETRY_WAIT_S / 60:g} minutes)" in section
    assert TRADING_URL_ENV in section
