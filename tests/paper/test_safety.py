"""Live safety: a restart sends nothing twice; a rejected order, a partial fill, a halted
symbol, a rate limit, a lost connection and an open market each give one line and leave
a state from which the next poll goes on safely."""

from __future__ import annotations

import json
import shutil

import pytest
from paper_setup import DAYS, TRAIN_SESSIONS, after_close, play

from finpod.errors import FinpodError

K = TRAIN_SESSIONS


def _one(lines: list[str], words: str) -> str:
    hits = [x for x in lines if words in x]
    assert len(hits) == 1, (words, lines)
    return hits[0]


def test_a_restart_after_a_complete_decision_sends_nothing(trader, server):
    play(trader(), server, K)
    count = len(server.posts)
    assert count == 3
    again = trader()  # a new process on the same run, same clock
    server.set_clock(after_close(K))
    assert again.step() == "waiting"
    assert len(server.posts) == count


def test_a_restart_that_lost_the_state_of_sent_orders_sends_nothing_twice(trader, server, run_dir):
    state = run_dir / "paper" / "state.json"
    first = trader()
    shutil.copy(state, run_dir / "before.json")
    server.set_clock(after_close(K))
    assert first.step() == "decided"
    assert len(server.posts) == 3
    # The process died after the orders reached the account and before its state said so.
    shutil.copy(run_dir / "before.json", state)
    again = trader()
    assert again.step() == "decided"
    assert len(server.posts) == 3 and len(server.orders) == 3
    assert sum("already in the account: not sent again" in x for x in again.lines) == 3


def test_start_reconciles_positions_one_line_per_difference(trader, server):
    play(trader(), server, K)  # three orders, all filled at the next open
    assert not [x for x in trader().lines if "reconcile" in x]  # the fills are in the record
    server.positions["BBB"] -= 7  # someone else traded the account
    server.positions["ZZZ"] = 3.0
    lines = [x for x in trader().lines if x.startswith("reconcile")]
    assert len(lines) == 2, lines
    assert "BBB: the account holds" in lines[0] and "(the account's are used)" in lines[0]
    assert "ZZZ: not this run's, left alone" in lines[1]


def test_a_rejected_order_is_one_line_recorded_and_not_retried(trader, server, run_dir):
    server.reject["BBB"] = "insufficient buying power"
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "decided"
    line = _one(t.lines, "order rejected")
    assert "BBB" in line and "insufficient buying power" in line
    assert sorted(s for _, s, _ in server.sent()) == ["AAA", "CCC"]
    state = json.loads((run_dir / "paper" / "state.json").read_text())
    assert [o["status"] for o in state["orders"].values() if o["symbol"] == "BBB"] == ["rejected"]
    posts = len(server.posts)
    trader().step()  # restart, same bar: the rejection is known, nothing is sent again
    assert len(server.posts) == posts


def test_a_partial_fill_is_cancelled_before_the_next_decision(trader, server):
    t = trader()
    play(t, server, K, part={"AAA": 0.5})
    aaa = next(o for o in server.orders.values() if o["symbol"] == "AAA")
    assert aaa["status"] == "partially_filled"
    server.set_clock(after_close(K + 1))
    before = len(server.orders)
    assert t.step() == "decided"
    line = _one(t.lines, "partial fill")
    assert "AAA" in line and "the rest is cancelled" in line
    assert ("DELETE", f"/v2/orders/{aaa['id']}") in server.requests
    assert aaa["status"] == "canceled"
    # the next decision starts from what was filled: it buys the rest of AAA again
    again = {s: q for _, s, q in server.sent()[before:]}
    assert again.get("AAA", 0) > 0


def test_a_dry_run_cancels_nothing_of_a_partial_fill(trader, server):
    play(trader(), server, K, part={"AAA": 0.5})
    dry = trader(dry_run=True)
    server.set_clock(after_close(K + 1))
    assert dry.step() == "decided"
    assert "dry run: would cancel the rest of buy" in _one(dry.lines, "would cancel")
    assert not [r for r in server.requests if r[0] == "DELETE"]
    assert len(server.posts) == 3


def test_a_halted_symbol_is_one_line_and_not_traded(trader, server):
    bars = server.bars["CCC"]
    server.bars["CCC"] = bars.drop(index=K)  # no CCC bar on the decision day
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "decided"
    assert "CCC: no bar at" in _one(t.lines, "halted")
    assert "CCC" not in {s for _, s, _ in server.sent()}


def test_a_daily_agent_waits_while_the_market_is_open(trader, server):
    t = trader()
    server.set_clock(f"{DAYS[K]:%Y-%m-%d} 11:00", is_open=True)
    assert t.step() == "open"
    assert "decides after the close" in _one(t.lines, "market open")
    assert server.posts == []


def test_a_rate_limited_order_is_looked_up_then_sent_once(trader, server, run_dir):
    server.order_status["AAA"] = 429
    t = trader()
    server.set_clock(after_close(K))
    # the failed order was looked up at once: the account has no such order
    with pytest.raises(FinpodError, match=r"rate limit \(HTTP 429\).*never received it"):
        t.step()
    state = json.loads((run_dir / "paper" / "state.json").read_text())
    assert state["orders"] == {} and server.orders == {}
    del server.order_status["AAA"]
    again = trader()
    assert again.step() == "decided"
    assert sorted(s for _, s, _ in server.sent()) == ["AAA", "BBB", "CCC"], (t.lines, again.lines)


def test_a_lost_connection_is_one_line_and_the_next_poll_goes_on(trader, server):
    t = trader()
    server.set_clock(after_close(K))
    server.httpd.shutdown()
    server.httpd.server_close()
    with pytest.raises(FinpodError, match="lost the connection|cannot reach Alpaca") as err:
        t.step()
    assert "\n" not in str(err.value)
    assert server.posts == []
