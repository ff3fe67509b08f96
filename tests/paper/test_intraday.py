"""An intraday agent (5-minute bars, a decision every third bar of the session) on a plan
that serves real-time SIP bars: it decides after each complete decision bar while the
market is open, sends the env's orders for the same bars, and waits while the market is
closed. (The free plan's delayed bars: ``test_free_plan.py``.)"""

from __future__ import annotations

import shutil
from dataclasses import replace

import pandas as pd
import pytest
import torch
from intraday_setup import BARS, CASH, DAYS, FIRST, STARTS, TRAIN_DAYS, bar_done, long_bars
from loopback import PAID
from replay import AlpacaPaper

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.inmemory import from_frame
from finpod.env.core import initial_state, observe, transition
from finpod.env.tables import build_tables
from finpod.runs import Leaderboard, read_run_info


@pytest.fixture
def setup(intraday_run, tmp_path, monkeypatch):
    from finpod.paper.trader import PaperTrader

    srv = AlpacaPaper(BARS, cash=CASH, timeframe="5Min", plan=PAID)
    for key, value in {
        "APCA_API_KEY_ID": "k",
        "APCA_API_SECRET_KEY": "s",
        "FINPOD_ALPACA_BACKOFF_S": "0.01",
        "FINPOD_ALPACA_DATA_URL": srv.url,
        "FINPOD_ALPACA_TRADING_URL": srv.url,
    }.items():
        monkeypatch.setenv(key, value)
    run = shutil.copytree(intraday_run[0], tmp_path / "runs" / "r5")
    lines: list[str] = []
    # bars from files are consolidated (sip) bars; the paid plan serves them in real time
    srv.set_clock(bar_done(FIRST - 1), is_open=True)
    trader = PaperTrader(run, data=intraday_run[1], lookback_sessions=40, log=lines.append)
    trader.lines = lines
    trader.start()
    yield trader, srv, run
    srv.close()


def test_an_intraday_agent_sends_the_envs_orders_at_its_decision_bars(setup):
    trader, server, run = setup
    first = FIRST  # the first bar of the first live session
    sent = {}
    for t in range(first, first + 24):
        server.set_clock(bar_done(t), is_open=True)
        before = len(server.orders)
        what = trader.step()
        sent[t] = {s: q for _, s, q in server.sent()[before:]}
        assert what == ("decided" if (t - first) % 3 == 0 else "waiting"), (t, trader.lines)
        server.fill_open_orders(str(STARTS[t + 1].tz_localize(None)))
    entry = Leaderboard.load(run).entries[0]
    config, _ = recorded_env_config(run, read_run_info(run), entry)
    config = replace(config, initial_cash=CASH)
    policy = ensemble_policy(load_agents(run, [entry], torch.device("cpu")))
    market = from_frame(long_bars(first + 25), "5min", min_coverage=0.0, min_bars=1)
    tables = build_tables(market, config, torch.device("cpu"))
    state = initial_state(torch.tensor([first]), tables, config, market.num_stocks)
    expected = {}
    for t in range(first, first + 24):
        state, step = transition(state, policy(observe(state, tables, config)), tables, config)
        expected[t] = {
            s: float(q) for s, q in zip(market.tickers, step.trade[0], strict=True) if q != 0
        }
    assert sum(len(v) for v in expected.values()) >= 3, expected
    assert sent == expected


def test_an_intraday_agent_waits_while_the_market_is_closed(setup):
    trader, server, _ = setup
    server.set_clock(f"{DAYS[TRAIN_DAYS]:%Y-%m-%d} 08:00", is_open=False)
    assert trader.step() == "closed"
    server.set_clock(f"{DAYS[TRAIN_DAYS]:%Y-%m-%d} 08:01", is_open=False)
    assert trader.step() == "closed"  # the next poll: said once, not every poll
    closed = [x for x in trader.lines if "market closed" in x]
    assert len(closed) == 1
    assert closed[0].endswith(f"next open {server.get('/v2/clock', {})[1]['next_open']}")
    assert server.posts == []


def test_the_paid_plan_is_found_and_its_bars_decided_on_in_real_time(setup):
    trader, server, run = setup
    assert trader.plan == "paid" and trader.delay == pd.Timedelta(0)
    assert "sip bars in real time (real-time SIP served: a paid plan)" in trader.lines[0]
    server.set_clock(bar_done(FIRST + 6), is_open=True)  # a decision bar, 20 s after its end
    assert trader.step() == "decided"
    (line,) = [x for x in trader.lines if x.startswith("decision at")]
    assert "on sip bars in real time (the bar ended 0.3 min before the clock)" in line
    assert server.refused == []
