"""Paper orders against the env's fill model on bars whose open is not the last close.

The env sizes an order from the decision bar's close (its mark) and fills it at the next
bar's open, where it scales the buys down to the cash; the trader sizes from the same
close and cannot know that open when it sends the order. From the same account at each
decision, on replayed daily bars with ±5 % overnight moves: the trader's orders are the
env's step with the fill price set to the decision close, its sells are the env's, and its
buys differ from the env's only by the cash the move takes or adds (measured: the
difference in dollars at the open, as a share of the account, is printed with ``-s``)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from paper_setup import BARS, DAYS, START_CASH, SYMBOLS, TRAIN_SESSIONS, after_close, long_frame
from replay import AlpacaPaper

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.inmemory import from_frame
from finpod.env.core import account_state, observe, transition
from finpod.env.tables import build_tables
from finpod.runs import Leaderboard, read_run_info

K = TRAIN_SESSIONS
DECISIONS = 12
#: Overnight log move (close → next open) of the replayed bars, large enough to exceed the
#: cash the no-trade band leaves: up into odd sessions, down
#: into even ones, so both kinds of decision come: buys the open makes dearer (cash-bound)
#: and cheaper (not bound).
GAP = 0.05


def gapped_bars() -> dict:
    """The session's bars with each open moved off the last close by ±:data:`GAP`."""
    out = {}
    sign = np.where(np.arange(len(DAYS)) % 2 == 1, 1.0, -1.0)
    for sym, df in BARS.items():
        df = df.copy()
        gap = np.exp(GAP * sign)
        df["o"] = np.round(np.r_[df["c"].iloc[0], df["c"].to_numpy()[:-1] * gap[1:]], 2)
        df["h"] = np.round(np.maximum(df["o"], df["c"]) * 1.004, 2)
        df["l"] = np.round(np.minimum(df["o"], df["c"]) * 0.996, 2)
        out[sym] = df
    return out


GAPPED = gapped_bars()


@pytest.fixture
def gapped_server(monkeypatch):
    srv = AlpacaPaper(GAPPED, cash=START_CASH)
    for key, value in (
        ("APCA_API_KEY_ID", "test-key"),
        ("APCA_API_SECRET_KEY", "test-secret"),
        ("FINPOD_ALPACA_BACKOFF_S", "0.01"),
        ("FINPOD_ALPACA_DATA_URL", srv.url),
        ("FINPOD_ALPACA_TRADING_URL", srv.url),
    ):
        monkeypatch.setenv(key, value)
    yield srv
    srv.close()


def test_on_gapped_bars_only_cash_bound_buys_differ_from_the_env_by_the_gap(
    trained, gapped_server, tmp_path
):
    from finpod.paper.trader import PaperTrader

    run = Path(shutil.copytree(trained[0], tmp_path / "runs" / trained[0].name))
    trader = PaperTrader(run, data=trained[1], lookback_sessions=400, log=lambda line: None)
    trader.start()
    entry = Leaderboard.load(run).entries[0]
    config, _ = recorded_env_config(run, read_run_info(run), entry)
    config = replace(config, initial_cash=trader.state.start_value)
    policy = ensemble_policy(load_agents(run, [entry], torch.device("cpu")))
    market = from_frame(long_frame(K + DECISIONS + 1, GAPPED), "1d", min_coverage=0.0, min_bars=1)
    tables = build_tables(market, config, torch.device("cpu"))
    srv, dtype = gapped_server, config.torch_dtype
    n, measured = len(SYMBOLS), []
    for k in range(K, K + DECISIONS):
        cash = torch.tensor([srv.cash], dtype=dtype)
        held = torch.tensor([[srv.positions.get(s, 0.0) for s in SYMBOLS]], dtype=dtype)
        state = account_state(torch.tensor([k]), cash, held, tables)
        action = policy(observe(state, tables, config))
        _, at_open = transition(state, action, tables, config)
        # The same step with the next bar's fill price set to the decision bar's close.
        step = tables.step.clone()
        fill, close = step[k + 1, :n].clone(), step[k, n : 2 * n]
        step[k + 1, :n] = torch.where(fill > 0, close, fill)
        _, at_close = transition(state, action, tables._replace(step=step), config)
        before = len(srv.orders)
        srv.set_clock(after_close(k))
        assert trader.step() == "decided"
        sent = {sym: qty for _, sym, qty in srv.sent()[before:]}
        paper = torch.tensor([sent.get(s, 0.0) for s in SYMBOLS], dtype=dtype)
        # The trader's orders are the env's, filled at the decision bar's close ...
        assert torch.equal(paper, at_close.trade[0]), (k, paper, at_close.trade[0])
        # ... so its sells are the env's (sized from the same close) and its buys differ
        # only by the cash the move to the next open adds or takes.
        env = at_open.trade[0]
        assert torch.equal(paper[env < 0], env[env < 0])
        move = float((fill / close - 1.0).abs().max())
        traded = float((env.abs() * close).sum())
        gap_dollars = float(((paper - env).abs() * fill).sum())
        assert gap_dollars <= 2.0 * move * traded + float(fill.sum()), (k, gap_dollars)
        measured.append(gap_dollars / float(state.value[0]))
        srv.fill_open_orders(f"{DAYS[k + 1]:%Y-%m-%d}")
    # The measure: the trader's orders minus the env's, in dollars at the open / account value.
    print("paper - env orders, share of the account:", [f"{x:.4%}" for x in measured])
    assert max(measured) > 0.0  # the gap is really there
