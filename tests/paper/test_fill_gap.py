"""Paper orders against the env's fill model on bars whose open is not the last close.

The env sizes an order from the decision bar's close (its mark) and fills it at the next
bar's open, where it scales the buys down to the cash; the trader sizes from the same
close and cannot know that open when it sends the order. From the same account at each
decision, on replayed daily bars with overnight gaps: every sell is the env's, and the
buys differ only by the share the overnight move takes of the cash, within a share per
order (the measure of what the live market cannot give)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BARS, DAYS, START_CASH, SYMBOLS, TRAIN_SESSIONS, after_close, long_frame
from replay import AlpacaPaper

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.inmemory import from_frame
from finpod.env.core import account_state, observe, transition
from finpod.env.tables import build_tables
from finpod.runs import LEADERBOARD_FILE, read_json, read_run_info

K = TRAIN_SESSIONS
DECISIONS = 6
#: Standard deviation of the overnight log move (close → next open) of the replayed bars.
GAP = 0.01


def gapped_bars(seed: int = 5) -> dict:
    """The session's bars with each open moved off the last close by an overnight gap."""
    rng = np.random.default_rng(seed)
    out = {}
    for sym, df in BARS.items():
        df = df.copy()
        gap = np.exp(GAP * rng.standard_normal(len(df)))
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
    trader = PaperTrader(run, data_dir=trained[1], lookback_sessions=400, log=lambda line: None)
    trader.start()
    entry = read_json(run / LEADERBOARD_FILE, LEADERBOARD_FILE)["entries"][0]
    config, _ = recorded_env_config(run, read_run_info(run), entry)
    config = replace(config, initial_cash=trader.state.start_value)
    policy = ensemble_policy(load_agents(run, [entry], torch.device("cpu")))
    market = from_frame(long_frame(K + DECISIONS + 1, GAPPED), "1d", min_coverage=0.0, min_bars=1)
    tables = build_tables(market, config, torch.device("cpu"))
    srv, dtype = gapped_server, config.torch_dtype
    worst, differed = 0.0, 0
    for k in range(K, K + DECISIONS):
        cash = torch.tensor([srv.cash], dtype=dtype)
        held = torch.tensor([[srv.positions.get(s, 0.0) for s in SYMBOLS]], dtype=dtype)
        state = account_state(torch.tensor([k]), cash, held, tables)
        _, env = transition(state, policy(observe(state, tables, config)), tables, config)
        before = len(srv.orders)
        srv.set_clock(after_close(k))
        assert trader.step() == "decided"
        sent = {sym: qty for _, sym, qty in srv.sent()[before:]}
        paper = torch.tensor([sent.get(s, 0.0) for s in SYMBOLS], dtype=dtype)
        want = env.trade[0]
        sells = want < 0
        assert torch.equal(paper[sells], want[sells])  # sized from the same close
        close = tables.step[k, 3:6]
        fill = tables.step[k + 1, 0:3]
        buys = want > 0
        if buys.any():
            # The env's buys took the cash at the open, the trader's at the close: their
            # ratio is the buys' overnight move, up to one whole share per order.
            move = float((want[buys] * fill[buys]).sum() / (want[buys] * close[buys]).sum())
            bound = (paper[buys] - want[buys] * move).abs()
            assert bool((bound <= 1.0 + 1e-9).all()), (k, paper, want, move)
            worst = max(worst, abs(move - 1.0))
            differed += int(not torch.equal(paper[buys], want[buys]))
        srv.fill_open_orders(f"{DAYS[k + 1]:%Y-%m-%d}")
    assert differed >= 1  # the gap is really there, and measured
    assert worst < 4 * GAP
