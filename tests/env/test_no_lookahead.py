"""Orders decided at bar t fill at bar t + 1, and nothing after t + 1 leaks into step t."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from finpod.env import EnvConfig, VecTradingEnv

from .markets import make_market

NUM_BARS = 12


def trace(market, config, actions):
    """obs, reward and info of every step of one env over the whole split."""
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    steps = [{"obs": env.reset()}]
    for action in actions:
        obs, reward, _, _, info = env.step(action)
        steps.append({"obs": info["final_obs"], "reward": reward, **info})
    return steps


def perturb(market, bars, seed=99):
    """Same market with every field of ``bars`` changed (prices, features, tradability)."""
    gen = torch.Generator().manual_seed(seed)
    open_, close = market.open.clone(), market.close.clone()
    features, tradable = market.features.clone(), market.tradable.clone()
    for t in bars:
        factor = 1.0 + 0.3 * torch.rand(market.num_stocks, generator=gen)
        open_[t] *= factor
        close[t] *= factor.flip(0)
        features[t] += torch.randn(features[t].shape, generator=gen)
        tradable[t, 0] = ~tradable[t, 0]
    return replace(market, open=open_, close=close, features=features, tradable=tradable)


@pytest.fixture
def actions():
    gen = torch.Generator().manual_seed(1)
    return [torch.rand(2, 4, generator=gen) * 2 - 1 for _ in range(NUM_BARS - 1)]


@pytest.mark.parametrize("fill_price", ["open", "close"])
@pytest.mark.parametrize("reward", ["value_change", "differential_sharpe", "drawdown_penalty"])
@pytest.mark.parametrize("t", [0, 4, 9])
def test_bars_after_the_fill_bar_change_nothing_up_to_step_t(fill_price, reward, t, actions):
    market = make_market(NUM_BARS, 4, num_features=3, seed=2)
    config = EnvConfig(fill_price=fill_price, reward=reward, initial_cash=20_000.0)
    base = trace(market, config, actions)
    changed = trace(perturb(market, range(t + 2, NUM_BARS)), config, actions)
    # Step t (index t + 1 in the trace) and everything before it are identical.
    for before, after in zip(base[: t + 2], changed[: t + 2], strict=True):
        for key, value in before.items():
            assert torch.equal(value, after[key]), key
    # The change is real: something after step t differs.
    assert any(not torch.equal(b["obs"], c["obs"]) for b, c in zip(base, changed, strict=True))


@pytest.mark.parametrize("fill_price", ["open", "close"])
@pytest.mark.parametrize("t", [0, 5])
def test_the_next_bar_sets_the_fill_of_an_order_placed_at_t(fill_price, t, actions):
    market = make_market(NUM_BARS, 4, seed=4)
    config = EnvConfig(fill_price=fill_price)
    buy = [torch.full((2, 4), 0.5) for _ in range(NUM_BARS - 1)]
    base = trace(market, config, buy)
    field = "open" if fill_price == "open" else "close"
    bumped = getattr(market, field).clone()
    bumped[t + 1] *= 1.1
    changed = trace(replace(market, **{field: bumped}), config, buy)
    step = t + 1
    torch.testing.assert_close(changed[step]["fill_price"], base[step]["fill_price"] * 1.1)
    assert torch.all(changed[step]["cost"] > base[step]["cost"])
    # ...and bar t (what the agent saw when deciding) is not the fill price.
    decided_at = getattr(market, field)[t]
    assert not torch.allclose(base[step]["fill_price"][0], decided_at)


def test_the_decision_bar_price_does_not_set_the_fill(actions):
    market = make_market(NUM_BARS, 4, seed=6)
    config = EnvConfig(fill_price="close")
    buy = [torch.full((2, 4), 0.5) for _ in range(NUM_BARS - 1)]
    base = trace(market, config, buy)
    close = market.close.clone()
    close[3] *= 1.2  # the bar the step-3 order is decided at
    changed = trace(replace(market, close=close), config, buy)
    assert torch.equal(changed[4]["fill_price"], base[4]["fill_price"])
    assert torch.equal(changed[4]["trade"], base[4]["trade"])
