"""On a market with a planted, causal signal, acting on it through the env earns it."""

from __future__ import annotations

import pytest
import torch

from finpod.env import EnvConfig, ObsLayout, rollout, score

synthetic = pytest.importorskip("finpod.data.synthetic_market")


def signal_policy(market):
    """Target weights ∝ max(alpha_signal, 0), read from the observation only."""
    layout = ObsLayout(market.num_stocks, market.num_features)
    k = market.feature_names.index("alpha_signal")

    def policy(obs: torch.Tensor) -> torch.Tensor:
        feats = obs[:, layout.features].reshape(obs.shape[0], market.num_stocks, -1)
        s = feats[:, :, k].clamp(min=0.0)
        return s / s.sum(1, keepdim=True).clamp(min=1e-9)

    return policy


@pytest.mark.parametrize("fill_price", ["open", "close"])
def test_planted_signal_is_earned_only_where_it_exists(fill_price):
    config = EnvConfig(action_mode="weights", cost_rate=0.0005, fill_price=fill_price)
    scores = {}
    for regime in ("alpha", "null"):
        market = synthetic.make_synthetic(8, 1000, regime=regime, seed=3)
        # The policy reads the observation, so the env's obs must carry bar t's signal.
        result = rollout(signal_policy(market), market, config)
        scores[regime] = score(result, "sharpe")
        expected = synthetic.oracle_weights(market)[:-1]
        held = (
            result.positions.iloc[1:, :-1].to_numpy()
            / result.account_value.iloc[1:].to_numpy()[:, None]
        )
        # Positions follow the oracle's weights (within share rounding and drift).
        assert abs(held - expected.numpy()).mean() < 0.05
    assert scores["alpha"] > 1.0
    assert scores["alpha"] > scores["null"] + 1.0


def test_cost_aware_reference_survives_costs_that_sink_the_oracle():
    """Minute bars, 0.2 % costs: the oracle that follows every signal move loses; the
    reference (signal hysteresis + no-trade band) keeps a positive after-cost Sharpe."""
    market = synthetic.make_synthetic(
        10, 1950, bar="1min", regime="alpha", seed=7, signal_persistence=0.99
    )
    config = EnvConfig(cost_rate=0.002)
    oracle_cfg = EnvConfig(cost_rate=0.002, action_mode="weights")
    oracle = score(rollout(synthetic.oracle_policy(market), market, oracle_cfg))
    policy, ref_cfg = synthetic.cost_aware_reference(market, config)
    assert ref_cfg.no_trade_band == synthetic.REFERENCE_BAND and ref_cfg.cost_rate == 0.002
    ref = rollout(policy, market, ref_cfg)
    assert oracle < 0.0 < score(ref)
    # It holds still: far fewer trades than bars.
    assert len(ref.transactions) < 0.1 * market.num_bars


def test_cost_aware_weights_use_the_signal_up_to_t_only():
    from dataclasses import replace

    market = synthetic.make_synthetic(6, 400, bar="1min", regime="alpha", seed=1)
    base = synthetic.cost_aware_weights(market)
    features = market.features.clone()
    features[200:] = torch.randn(features[200:].shape)
    changed = synthetic.cost_aware_weights(replace(market, features=features))
    assert torch.equal(base[:200], changed[:200])
    assert not torch.equal(base[200:], changed[200:])


def test_the_cost_aware_reference_is_the_same_line_beside_any_agents_controls():
    """It keeps the agent's account, fills and cost model, and none of its bounds or
    execution controls: the backtest's unconstrained line does not move with the agent."""
    market = synthetic.make_synthetic(6, 300, bar="1d", regime="alpha", seed=3)
    plain = EnvConfig(cost_rate=0.003, fill_price="close", initial_cash=5e5)
    agent = EnvConfig(
        cost_rate=0.003,
        fill_price="close",
        initial_cash=5e5,
        action_mode="active",
        start="reference",
        max_active_weight=0.1,
        active_budget=0.75,
        decision_interval=5,
        partial_adjustment=0.5,
        turnover_penalty=0.002,
        episode_length=50,
    )
    _, from_plain = synthetic.cost_aware_reference(market, plain)
    _, from_agent = synthetic.cost_aware_reference(market, agent)
    assert from_agent == from_plain
    assert (from_agent.cost_rate, from_agent.fill_price, from_agent.initial_cash) == (
        0.003,
        "close",
        5e5,
    )
    fresh = synthetic.cost_aware_reference(market, agent)[0]
    again = synthetic.cost_aware_reference(market, plain)[0]
    assert rollout(fresh, market, from_agent).returns.equals(
        rollout(again, market, from_plain).returns
    )
