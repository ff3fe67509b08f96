"""Accounting invariants of the vectorized env over random markets and random actions."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from finpod.env import EnvConfig, VecTradingEnv

from .markets import make_market


def reference_marks(close: np.ndarray, tradable: np.ndarray) -> np.ndarray:
    """Last tradable close at or before each bar, 0 before the first one (slow, obvious)."""
    marks = np.zeros_like(close, dtype=np.float64)
    last = np.zeros(close.shape[1])
    for t in range(close.shape[0]):
        valid = (close[t] > 0) & tradable[t]
        last = np.where(valid, close[t], last)
        marks[t] = last
    return marks


@st.composite
def scenarios(draw):
    num_bars = draw(st.integers(3, 10))
    num_stocks = draw(st.integers(1, 4))
    num_envs = draw(st.integers(1, 3))
    listing = draw(st.lists(st.integers(0, num_bars), min_size=num_stocks, max_size=num_stocks))
    market = make_market(
        num_bars,
        num_stocks,
        num_features=1,
        seed=draw(st.integers(0, 10_000)),
        listing=listing,
        untradable=draw(st.sampled_from([0.0, 0.3])),
    )
    config = EnvConfig(
        initial_cash=draw(st.sampled_from([1_000.0, 20_000.0, 1_000_000.0])),
        action_mode=draw(st.sampled_from(["shares", "weights"])),
        max_shares=draw(st.sampled_from([1, 10, 100])),
        fill_price=draw(st.sampled_from(["open", "close"])),
        cost_rate=draw(st.sampled_from([0.0, 0.002, 0.05])),
        slippage=draw(st.sampled_from([0.0, 0.001])),
        integer_shares=draw(st.booleans()),
        dtype="float64",
    )
    actions = draw(
        arrays(
            np.float32,
            (num_bars - 1, num_envs, num_stocks),
            elements=st.floats(-1.0, 1.0, width=32),
        )
    )
    return market, config, actions


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_accounts_stay_consistent_under_random_actions(scenario):
    market, config, actions = scenario
    num_envs = actions.shape[1]
    env = VecTradingEnv(market, config, num_envs=num_envs, seed=0, random_start=False)
    env.reset()
    marks = reference_marks(market.close.double().numpy(), market.tradable.numpy())
    base = (market.open if config.fill_price == "open" else market.close).double().numpy()
    tradable = market.tradable.numpy()
    cash = np.full(num_envs, config.initial_cash)
    holdings = np.zeros((num_envs, market.num_stocks))
    for t, action in enumerate(actions):
        _, reward, _, _, info = env.step(torch.from_numpy(action))
        new_cash = info["cash"].numpy()
        new_holdings = info["holdings"].numpy()
        trade = info["trade"].numpy()
        value = info["account_value"].numpy()
        # No shorting, no borrowing.
        assert (new_cash >= 0).all()
        assert (new_holdings >= 0).all()
        # The trade is exactly the change of holdings, and it happened at bar t + 1.
        np.testing.assert_allclose(new_holdings - holdings, trade, atol=1e-9)
        assert (info["bar"].numpy() == t + 1).all()
        # Masked (bar, ticker) never trade.
        assert (trade[:, ~tradable[t + 1]] == 0).all()
        # Value identity at the mark price of the fill bar.
        np.testing.assert_allclose(value, new_cash + new_holdings @ marks[t + 1], rtol=1e-12)
        # Cost = rate × traded notional at the executed (slipped) price of bar t + 1.
        exec_price = base[t + 1] * (1.0 + np.sign(trade) * config.slippage)
        notional = (np.abs(trade) * exec_price).sum(1)
        np.testing.assert_allclose(info["cost"].numpy(), config.cost_rate * notional, atol=1e-6)
        # Cash moves by exactly the trade's cash flow and its cost.
        flow = -(trade * exec_price).sum(1) - config.cost_rate * notional
        np.testing.assert_allclose(new_cash, cash + flow, atol=1e-6 * config.initial_cash)
        if config.action_mode == "shares":
            check_shares_orders(action, trade, holdings, cash, exec_price, tradable[t + 1], config)
        cash, holdings = new_cash, new_holdings


def check_shares_orders(action, trade, holdings, cash, exec_price, tradable, config):
    """Sells execute in full (up to holdings); buys in full when the cash allows it."""
    order = action.astype(np.float64) * config.max_shares
    if config.integer_shares:
        order = np.trunc(order)
    order = np.where(tradable, order, 0.0)
    want_sell = np.minimum(np.clip(-order, 0, None), holdings)
    np.testing.assert_allclose(np.clip(-trade, 0, None), want_sell, atol=1e-9)
    want_buy = np.clip(order, 0, None)
    bought = np.clip(trade, 0, None)
    # A buy increases holdings, a sell decreases them, never the other way round.
    assert (trade[order <= 0] <= 0).all()
    assert (trade[order >= 0] >= 0).all()
    assert (bought <= want_buy + 1e-9).all()
    proceeds = (want_sell * exec_price).sum(1) * (1 - config.cost_rate)
    need = (want_buy * exec_price).sum(1) * (1 + config.cost_rate)
    affordable = need <= cash + proceeds - 1e-6
    np.testing.assert_allclose(bought[affordable], want_buy[affordable], atol=1e-9)


def test_env_that_ignored_actions_would_fail_the_order_check(market):
    """The order check above catches an env that trades something other than asked."""
    config = EnvConfig(dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    action = torch.tensor([[0.5, -0.2, 0.0]])
    _, _, _, _, info = env.step(action)
    assert info["trade"].tolist() == [[50.0, 0.0, 0.0]]
    ignored = np.ones((1, 3)) * 100.0  # an env that always buys max_shares
    tradable = market.tradable.numpy()[1]
    exec_price = market.open.double().numpy()[1]
    try:
        check_shares_orders(
            action.numpy(), ignored, np.zeros((1, 3)), np.array([1e6]), exec_price, tradable, config
        )
    except AssertionError:
        return
    raise AssertionError("an env ignoring its actions passed the order check")


def test_buys_are_scaled_down_to_available_cash():
    market = make_market(5, 3, seed=3)
    config = EnvConfig(initial_cash=1_000.0, max_shares=100, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    _, _, _, _, info = env.step(torch.ones(1, 3))
    spent = float((info["trade"] * info["fill_price"]).sum() + info["cost"].sum())
    assert 0 < spent <= 1_000.0
    assert float(info["cash"][0]) >= 0
    # Scaled, not dropped: the leftover cash cannot buy one more share of the cheapest ticker.
    assert float(info["cash"][0]) < float(info["fill_price"].min()) * (1 + config.cost_rate) * 3


def test_sells_fund_buys_in_the_same_step():
    market = make_market(6, 2, seed=5)
    config = EnvConfig(initial_cash=10_000.0, max_shares=1_000, cost_rate=0.0, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    env.step(torch.tensor([[1.0, 0.0]]))  # spend (almost) all cash on ticker 0
    _, _, _, _, info = env.step(torch.tensor([[-1.0, 1.0]]))  # sell it all, buy ticker 1
    trade = info["trade"][0]
    assert trade[0] < 0 and trade[1] > 0
    price1 = float(info["fill_price"][0, 1])
    assert float(info["cash"][0]) < price1  # proceeds of the sell were used for the buy


def test_short_selling_and_borrowing_when_enabled():
    market = make_market(6, 2, seed=7)
    config = EnvConfig(
        initial_cash=1_000.0, allow_short=True, allow_negative_cash=True, dtype="float64"
    )
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    _, _, _, _, info = env.step(torch.tensor([[-1.0, 1.0]]))
    assert float(info["holdings"][0, 0]) == -100.0
    assert float(info["holdings"][0, 1]) == 100.0
    marks = reference_marks(market.close.double().numpy(), market.tradable.numpy())
    value = float(info["cash"][0]) + float((info["holdings"][0].numpy() * marks[1]).sum())
    assert abs(float(info["account_value"][0]) - value) < 1e-6


def test_weights_mode_reaches_the_target_portfolio():
    market = make_market(6, 3, seed=11)
    config = EnvConfig(action_mode="weights", cost_rate=0.0, fill_price="close", dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    target = torch.tensor([[0.5, 0.25, 0.0]])
    _, _, _, _, info = env.step(target)
    position = info["holdings"][0] * market.close[1].double()
    weights = position / info["account_value"][0]
    # Sized at bar 0's close, filled at bar 1's close: close to the target, not exact.
    np.testing.assert_allclose(weights.numpy(), [0.5, 0.25, 0.0], atol=0.05)
    assert float(info["holdings"][0, 2]) == 0.0
