"""An intraday agent (5-minute bars, a decision every third bar of the session): it decides
after each complete decision bar while the market is open, sends the env's orders for the
same bars, and waits while the market is closed."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from replay import TZ, AlpacaPaper, alpaca_bars, long_table
from tiny_strategy import tiny_agent

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.calendar import sessions
from finpod.data.inmemory import from_frame
from finpod.env.core import initial_state, observe, transition
from finpod.env.tables import build_tables
from finpod.runs import LEADERBOARD_FILE, read_json, read_run_info

SYMBOLS = ("AAA", "BBB")
DAYS = sessions("2023-03-01", "2023-03-31")[:16]
TRAIN_DAYS = 14
BARS_PER_DAY = 78
CASH = 1_000_000.0
STRATEGY = tiny_agent(
    env={
        "action_mode": "active",
        "cost_rate": 0.0,
        "no_trade_band": 0.005,
        "decision_interval": 3,
        "dtype": "float64",
    },
    train={"seed": 5},
)


def _starts() -> pd.DatetimeIndex:
    out = []
    for d in DAYS:
        open_ = pd.Timestamp(d).tz_localize(TZ) + pd.Timedelta(hours=9, minutes=30)
        out += [open_ + pd.Timedelta(minutes=5 * i) for i in range(BARS_PER_DAY)]
    return pd.DatetimeIndex(out)


STARTS = _starts()


def _bars(seed: int = 3) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = {}
    for k, sym in enumerate(SYMBOLS):
        close = np.round(
            (50.0 + 20 * k) * np.exp(np.cumsum(0.002 * rng.standard_normal(len(STARTS)))), 2
        )
        out[sym] = alpaca_bars(STARTS, close, rng, 0.001, (1000, 9000), (10, 90))
    return out


BARS = _bars()


def _long(upto: int) -> pd.DataFrame:
    return long_table(BARS, upto)


@pytest.fixture(scope="module")
def intraday_run(tmp_path_factory):
    from finpod.data import build_dataset
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("paper-5min")
    frame = _long(TRAIN_DAYS * BARS_PER_DAY)
    frame["timestamp"] = frame["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    frame.to_csv(root / "bars.csv", index=False)
    data = build_dataset("files", root / "data", path=root / "bars.csv", bar="5min")
    (root / "s.toml").write_text(STRATEGY)
    run = train_agent(root / "s.toml", data, root / "runs", progress=False, run_id="r5")
    return run, data


@pytest.fixture
def setup(intraday_run, tmp_path, monkeypatch):
    from finpod.paper.trader import PaperTrader

    srv = AlpacaPaper(BARS, cash=CASH, timeframe="5Min")
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
    # bars from files are consolidated (sip) bars; the replay serves them without delay
    trader = PaperTrader(
        run, data_dir=intraday_run[1], lookback_sessions=40, log=lines.append, realtime=True
    )
    trader.lines = lines
    trader.start()
    yield trader, srv, run
    srv.close()


def test_an_intraday_agent_sends_the_envs_orders_at_its_decision_bars(setup):
    trader, server, run = setup
    first = TRAIN_DAYS * BARS_PER_DAY  # the first bar of the first live session
    sent = {}
    for t in range(first, first + 24):
        end = STARTS[t] + pd.Timedelta(minutes=5, seconds=20)
        server.set_clock(str(end.tz_localize(None)), is_open=True)
        before = len(server.orders)
        what = trader.step()
        sent[t] = {s: q for _, s, q in server.sent()[before:]}
        assert what == ("decided" if (t - first) % 3 == 0 else "waiting"), (t, trader.lines)
        server.fill_open_orders(str(STARTS[t + 1].tz_localize(None)))
    board = read_json(run / LEADERBOARD_FILE, LEADERBOARD_FILE)
    entry = board["entries"][0]
    config, _ = recorded_env_config(run, read_run_info(run), entry)
    config = replace(config, initial_cash=CASH)
    policy = ensemble_policy(load_agents(run, [entry], torch.device("cpu")))
    market = from_frame(_long(first + 25), "5min", min_coverage=0.0, min_bars=1)
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


def test_delayed_sip_bars_are_refused_in_one_line_and_real_time_ones_decided_on(setup):
    from finpod.paper.trader import PaperTrader

    realtime, server, run = setup
    first = TRAIN_DAYS * BARS_PER_DAY + 6  # a decision bar, half an hour into the session
    end = STARTS[first] + pd.Timedelta(minutes=5, seconds=20)
    server.set_clock(str(end.tz_localize(None)), is_open=True)
    lines: list[str] = []
    delayed = PaperTrader(run, lookback_sessions=40, log=lines.append)  # the free plan
    assert delayed.step() == "stale"
    (line,) = [x for x in lines if "no decision" in x]
    assert "15 minutes late" in line and "--realtime" in line
    assert server.posts == []
    assert realtime.step() == "decided"
