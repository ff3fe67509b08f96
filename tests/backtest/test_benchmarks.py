"""Benchmarks trade through the same env as the agent, by their rules, causally."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest.benchmarks import (
    BENCHMARKS,
    CrossSectionalMomentum,
    EqualWeightRebalanced,
    benchmark_config,
    benchmark_policies,
)
from finpod.env import EnvConfig, rollout

from .fakes import make_market


def _run(name, market, config=None):
    cfg = benchmark_config(config or EnvConfig())
    return rollout(benchmark_policies(market)[name], market, cfg)


def test_buy_and_hold_trades_once_then_never(market):
    out = _run("equal_weight_buy_hold", market)
    fills = pd.DatetimeIndex(out.transactions.index).unique()
    assert list(fills) == [market.timestamps[1]]
    # the ticker listed mid-split was not tradable at bar 0: never bought
    assert out.holdings[market.tickers[-1]].abs().sum() == 0
    held = out.holdings.iloc[-1]
    assert (held.iloc[:-1] > 0).all()
    # equal dollars, sized at bar 0's close (what the rule knew when it decided)
    first = out.transactions.set_index("ticker")["shares"]
    close0 = pd.Series(market.close[0].numpy().astype(float), index=market.tickers)
    dollars = first * close0[first.index]
    assert (dollars.max() - dollars.min()) / dollars.mean() < 0.01


def test_equal_weight_daily_holds_every_tradable_ticker_equally(market):
    out = _run("equal_weight_daily", market, EnvConfig(fill_price="close"))
    weights = out.positions.drop(columns="cash").div(out.account_value, axis=0)
    late = market.num_bars // 3
    # before listing the late ticker is never held, after listing it is
    assert (weights.iloc[: late + 1, -1] == 0).all()
    assert (weights.iloc[late + 2 :, -1] > 0).all()
    w = weights.iloc[late + 2 :]
    spread = (w.max(axis=1) - w.min(axis=1)) / w.mean(axis=1)
    assert spread.max() < 0.1
    # it trades (almost) every bar: rebalancing back to equal weights
    assert pd.DatetimeIndex(out.transactions.index).nunique() > 0.9 * (market.num_bars - 1)


def test_momentum_holds_the_top_trailing_returns_after_each_rebalance():
    market = make_market(num_bars=200, num_stocks=10, late_listing=False, seed=4)
    policy = CrossSectionalMomentum(market, lookback=20, every=10, top_fraction=0.3)
    out = rollout(policy, market, benchmark_config(EnvConfig(cost_rate=0.0)))
    close = market.close.numpy().astype(float)
    for t in range(10, 190, 10):
        trailing = close[t] / close[max(0, t - 20)] - 1
        expected = set(np.array(market.tickers)[np.argsort(-trailing)[:3]])
        held = out.holdings.iloc[t + 1]
        assert set(held[held > 0].index) == expected, t


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmarks_read_no_future_bar(name):
    """Cutting the market after bar k leaves every account value up to bar k unchanged."""
    full = make_market(num_bars=160, seed=2)
    k = 90
    cut = full.slice(0, k + 1)
    a = _run(name, full).account_value.iloc[: k + 1]
    b = _run(name, cut).account_value
    pd.testing.assert_series_equal(a, b)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmarks_pay_the_configured_costs(name, market):
    free = _run(name, market, EnvConfig(cost_rate=0.0))
    paid = _run(name, market, EnvConfig(cost_rate=0.005))
    assert free.costs.sum() == 0.0
    notional = (paid.transactions["shares"].abs() * paid.transactions["price"]).sum()
    assert paid.costs.sum() == pytest.approx(0.005 * notional, rel=1e-9)
    assert paid.account_value.iloc[-1] < free.account_value.iloc[-1]


def test_benchmark_config_keeps_capital_costs_and_fills():
    cfg = EnvConfig(initial_cash=5e5, cost_rate=0.003, fill_price="close", slippage=0.001)
    out = benchmark_config(cfg)
    assert out.action_mode == "weights"
    assert (out.initial_cash, out.cost_rate, out.fill_price, out.slippage) == (
        5e5,
        0.003,
        "close",
        0.001,
    )


def test_policies_return_valid_weights(market):
    obs_dim = 2 + market.num_stocks * (2 + market.num_features)
    for policy in benchmark_policies(market).values():
        for _ in range(30):
            w = policy(torch.rand(1, obs_dim) * 0.1)
            assert w.shape == (1, market.num_stocks)
            assert (w >= 0).all() and float(w.sum()) <= 1.0 + 1e-4


def test_intraday_rules_rebalance_at_session_and_month_starts():
    market = make_market(num_bars=2 * 78 * 23, num_stocks=4, bar="5min", late_listing=False)
    # 78 five-minute bars per session, 09:30 to 16:00 New York time
    days = pd.bdate_range("2023-01-25", periods=46, tz="America/New_York")
    ts = pd.DatetimeIndex(
        [d + pd.Timedelta(hours=9, minutes=30 + 5 * i) for d in days for i in range(78)]
    )
    market = dataclasses.replace(market, timestamps=ts, benchmark=market.benchmark.set_axis(ts))
    daily = EqualWeightRebalanced(market, every="session")
    monthly = CrossSectionalMomentum(market, every="month")
    due_daily = [t for t in range(len(ts)) if daily.due(t, "session")]
    due_monthly = [t for t in range(len(ts)) if monthly.due(t, "month")]
    assert due_daily == list(range(0, len(ts), 78))
    first_feb = int(np.flatnonzero(ts.month == 2)[0])
    first_mar = int(np.flatnonzero(ts.month == 3)[0])
    assert due_monthly == [0, first_feb, first_mar]
    out = rollout(daily, market, benchmark_config(EnvConfig()))
    fills = pd.DatetimeIndex(out.transactions.index).unique()
    # orders at a session's first bar fill on the next bar (the second bar of the session)
    assert set(fills) <= set(ts[1::78])
