"""Paper trading on Alpaca's free data plan, whose SIP bars are 15 minutes late (a request
of more recent ones is answered HTTP 403): an agent trained on SIP bars decides on them,
the plan found without a flag, the delay said in each decision line and recorded in the
journal; its orders are those the same agent sends on a paid plan's real-time bars. A
strategy that decides more often than the delay is refused in one line. Under a lost
answer, a 500 burst and a kill in flight the journal stays the account."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from intraday_setup import BARS, CASH, DECISION_MIN, FIRST, STARTS, bar_done
from journal_checks import assert_journal_is_the_account, journal
from loopback import FREE, PAID
from replay import AlpacaPaper

from finpod.env.config import EnvConfig
from finpod.errors import FinpodError

REPO = Path(__file__).resolve().parents[2]
#: A decision bar half an hour into the first live session.
BAR = FIRST + 6
#: Minutes the free plan's SIP bars are late: the run decides exactly that often.
LATE = 15
assert DECISION_MIN == LATE


@pytest.fixture
def market(intraday_run, tmp_path, monkeypatch):
    """``open(plan)`` → (server on that data plan, a copy of the 5-minute run)."""
    made: list[AlpacaPaper] = []

    def open_(plan=FREE, name: str = "r5") -> tuple[AlpacaPaper, Path]:
        srv = AlpacaPaper(BARS, cash=CASH, timeframe="5Min", plan=plan)
        made.append(srv)
        for key, value in {
            "APCA_API_KEY_ID": "k",
            "APCA_API_SECRET_KEY": "s",
            "FINPOD_ALPACA_BACKOFF_S": "0.01",
            "FINPOD_ALPACA_DATA_URL": srv.url,
            "FINPOD_ALPACA_TRADING_URL": srv.url,
        }.items():
            monkeypatch.setenv(key, value)
        run = Path(shutil.copytree(intraday_run[0], tmp_path / name / "runs" / "r5"))
        return srv, run

    yield open_
    for srv in made:
        srv.close()


def _trader(run: Path, data: Path, start: bool = True, **kw):
    from finpod.paper.trader import PaperTrader

    lines: list[str] = []
    t = PaperTrader(run, data=data, lookback_sessions=40, log=lines.append, **kw)
    t.lines = lines
    if start:
        t.start()
    return t


def test_on_the_free_plan_the_agent_decides_on_sip_bars_15_minutes_late(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    t = _trader(run, intraday_run[1])
    assert t.plan == "free" and t.delay == pd.Timedelta(minutes=LATE)
    assert (
        "sip bars 15 min late (real-time SIP refused with HTTP 403: the free plan)" in (t.lines[0])
    )
    assert t.step() == "decided"
    (line,) = [x for x in t.lines if x.startswith("decision at")]
    assert line.startswith(f"decision at {STARTS[BAR]} on sip bars 15 min late")
    assert "(the bar ended 15.3 min before the clock)" in line
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert decision["decision"] == str(STARTS[BAR])
    assert (decision["feed"], decision["plan"], decision["delay_min"]) == ("sip", "free", 15)
    assert decision["bar_end"] == str(STARTS[BAR] + pd.Timedelta(minutes=5))
    assert decision["bar_age_min"] == pytest.approx(15 + 1 / 3, abs=1e-3)
    assert len(server.orders) >= 1
    assert set(server.feeds) == {"sip"}
    # the plan's probe is the one request refused: the bars are asked for up to 15 min ago
    assert len(server.refused) == 1
    assert_journal_is_the_account(run, server)
    from finpod.paper.record import paper_record

    assert paper_record(run)["bars"].tolist() == ["sip, 15 min late"]


def test_the_free_plans_orders_are_the_paid_plans_on_the_same_bars(market, intraday_run):
    sent = {}
    for plan in (PAID, FREE):
        server, run = market(plan, name=plan.name)
        server.set_clock(bar_done(FIRST - 1), is_open=True)
        t = _trader(run, intraday_run[1])
        assert t.plan == plan.name
        orders = []
        for bar in range(FIRST, FIRST + 12):
            late = LATE if plan is FREE else 0
            server.set_clock(bar_done(bar, late), is_open=True)
            before = len(server.orders)
            what = t.step()
            assert what == ("decided" if (bar - FIRST) % 3 == 0 else "waiting"), t.lines
            orders += [(bar, s, q) for _, s, q in server.sent()[before:]]
            server.fill_open_orders(str(STARTS[bar + 1].tz_localize(None)))
        sent[plan.name] = orders
        delays = {r["delay_min"] for r in journal(run) if r["kind"] == "decision"}
        assert delays == {0 if plan is PAID else LATE}
        assert_journal_is_the_account(run, server)
    assert len(sent["free"]) >= 2
    assert sent["free"] == sent["paid"]


def test_a_strategy_deciding_more_often_than_the_delay_is_refused_in_one_line(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    t = _trader(run, intraday_run[1], start=False)
    t.agent.config = replace(t.agent.config, decision_interval=1)  # every 5-minute bar
    with pytest.raises(FinpodError) as err:
        t.start()
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(
        "no paper trading on the free plan's sip bars (real-time SIP refused with HTTP 403: "
        "the free plan): the strategy decides every 5 min, more often than its sip bars 15 "
        "min late allow"
    )
    assert "--feed iex" in text and "--plan paid" in text
    assert server.posts == [] and journal(run) == []
    paid = _trader(run, intraday_run[1], start=False, plan="paid")
    paid.agent.config = replace(paid.agent.config, decision_interval=1)
    paid.start()  # real-time bars: any interval
    assert "sip bars in real time (--plan paid)" in paid.lines[0]


def test_the_delay_refusal_reads_the_strategys_schedule():
    from finpod.paper.live import decision_period, delay_refusal

    late = pd.Timedelta(minutes=15)
    every = EnvConfig(decision_interval=3)
    assert decision_period(every, "5min") == pd.Timedelta(minutes=15)
    assert delay_refusal(every, "5min", "sip", late) is None  # as often as the delay: fits
    assert "every 10 min" in delay_refusal(EnvConfig(decision_interval=2), "5min", "sip", late)
    assert "every 1 min" in delay_refusal(EnvConfig(), "1min", "sip", late)
    assert delay_refusal(EnvConfig(), "1min", "iex", pd.Timedelta(0)) is None
    assert delay_refusal(EnvConfig(), "1d", "sip", late) is None
    times = EnvConfig(decision_times=["10:00", "12:00", "15:50"])
    assert decision_period(times, "5min") == pd.Timedelta(hours=2)
    assert "the decision(s) at 15:50 come after the close" in delay_refusal(
        times, "5min", "sip", late
    )
    flat = EnvConfig(decision_interval=6, flat_at_close=True)
    assert "goes flat at the close" in delay_refusal(flat, "5min", "sip", late)


def test_plan_free_given_asks_the_data_api_nothing_about_the_plan(market, intraday_run):
    server, run = market(PAID)  # a paid plan's keys, but the user says free
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    t = _trader(run, intraday_run[1], plan="free")
    assert "sip bars 15 min late (--plan free)" in t.lines[0]
    assert server.requests.count(("GET", "/v2/stocks/bars")) == 0
    assert t.step() == "decided"
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert decision["decision"] == str(STARTS[BAR]) and decision["delay_min"] == LATE


def test_iex_bars_are_real_time_on_the_free_plan(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR), is_open=True)
    t = _trader(run, intraday_run[1], feed="iex")
    assert "iex bars in real time (on every plan)" in t.lines[0]
    assert any("the dataset's are sip" in x for x in t.lines)
    assert t.step() == "decided"
    assert set(server.feeds) == {"iex"} and server.refused == []
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert (decision["feed"], decision["delay_min"]) == ("iex", 0)


def test_a_lost_answer_on_the_free_plan_is_looked_up_not_sent_again(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    server.inject("POST", "/v2/orders", drop=True)  # taken, the answer lost
    t = _trader(run, intraday_run[1])
    assert t.step() == "decided"
    assert len(server.posts) == len(server.orders) >= 1
    assert any("is in the account (accepted): recorded, not sent again" in x for x in t.lines)
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert decision["delay_min"] == LATE
    assert_journal_is_the_account(run, server)


def test_a_500_burst_on_the_free_plan_is_ridden_out(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    t = _trader(run, intraday_run[1], start=False)
    server.inject("GET", "/v2/stocks/bars", status=500)  # the plan's probe
    server.inject("GET", "/v2/clock", status=500, times=2, after=1)
    server.inject("GET", "/v2/account", status=503, times=7, after=1)  # past the 6 tries
    server.inject("POST", "/v2/orders", status=500)  # the first order: not taken
    assert t.run(0.01, max_decisions=1) == 0
    failed = [x for x in t.lines if "poll failed" in x]
    assert len(failed) == 5, t.lines
    assert "HTTP 500" in failed[0]
    assert t.plan == "free"
    assert server.requests.count(("POST", "/v2/orders")) == len(server.orders) + 1
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert decision["delay_min"] == LATE
    assert_journal_is_the_account(run, server)


def test_a_kill_in_flight_on_the_free_plan_then_a_restart_sends_nothing_twice(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR, LATE), is_open=True)
    server.stall_posts_after = 0  # the first order waits for the test
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = ["paper", str(run), "--data", str(intraday_run[1]), "--lookback", "40"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "finpod", *args, "--max-decisions", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stalled.wait(120), proc.communicate()
    proc.kill()  # the order reaches the account; the process never hears of it
    proc.communicate(timeout=60)
    server.stall_posts_after = None
    server.release.set()
    deadline = time.monotonic() + 30
    while not server.orders and time.monotonic() < deadline:
        time.sleep(0.05)
    (first,) = server.orders.values()
    restarted = _trader(run, intraday_run[1])
    assert restarted.plan == "free"
    assert restarted.step() == "decided"
    assert f"order {first['client_order_id']} is in the account (accepted)" in "\n".join(
        restarted.lines
    )
    symbols = [p["symbol"] for p in server.posts]
    assert len(symbols) == len(set(symbols)), symbols  # each order sent once
    (decision,) = [r for r in journal(run) if r["kind"] == "decision"]
    assert decision["delay_min"] == LATE and decision["feed"] == "sip"
    assert_journal_is_the_account(run, server)


def test_on_iex_bars_a_minute_without_a_trade_carries_the_last_trades_price(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(FIRST - 1), is_open=True)
    t = _trader(run, intraday_run[1], feed="iex")
    gap = BAR  # a decision bar without an IEX trade in BBB
    last_price = float(server.bars["BBB"]["c"].iloc[gap - 1])
    server.bars["BBB"] = server.bars["BBB"].drop(index=gap)
    for bar in range(FIRST, gap + 1):
        server.set_clock(bar_done(bar), is_open=True)
        t.step()
        server.fill_open_orders(str(STARTS[bar + 1].tz_localize(None)))
    assert server.positions.get("BBB", 0) > 0  # BBB was bought at the first decision
    (line,) = [x for x in t.lines if "no iex trade" in x]
    assert line == (
        f"BBB: no iex trade in the bar at {STARTS[gap]}: its last trade's price "
        f"{last_price:g} carried over (an agent of sip bars sees a bar there)"
    )
    assert not any(x.startswith("BBB: no bar at") for x in t.lines)
    decisions = [r for r in journal(run) if r["kind"] == "decision"]
    at_gap = decisions[-1]
    assert at_gap["decision"] == str(STARTS[gap])
    assert at_gap["carried"] == {"BBB": last_price}
    assert (at_gap["feed"], at_gap["delay_min"]) == ("iex", 0)
    assert at_gap["held_weights"]["BBB"] > 0.3 and at_gap["intended_weights"]["BBB"] > 0.3
    assert all(r["carried"] == {} for r in decisions[:-1])
    assert_journal_is_the_account(run, server)


def test_an_unknown_plan_is_one_line(market, intraday_run, capsys):
    from finpod.cli import main

    _, run = market(FREE)
    with pytest.raises(SystemExit) as exit_:
        main(["paper", str(run), "--data", str(intraday_run[1]), "--plan", "gold", "--once"])
    assert exit_.value.code == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "unknown data plan 'gold'" in err[0], err


def test_plan_paid_on_free_keys_is_one_line_saying_what_to_pass(market, intraday_run):
    server, run = market(FREE)
    server.set_clock(bar_done(BAR), is_open=True)
    t = _trader(run, intraday_run[1], plan="paid")
    with pytest.raises(FinpodError) as err:
        t.step()
    text = str(err.value)
    assert "HTTP 403" in text and "pass --plan free" in text and "\n" not in text
    assert server.posts == [] and journal(run) == []
