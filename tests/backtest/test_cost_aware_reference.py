"""The cost-aware reference beside an agent: a line that survives costs, traded under the
agent's account, fills and cost model and none of its bounds."""

from __future__ import annotations

from finpod.backtest.ceiling import REFERENCE_BAND, cost_aware_reference
from finpod.data import synthetic_market as synthetic
from finpod.env import EnvConfig, rollout, score


def test_cost_aware_reference_survives_costs_that_sink_the_oracle():
    """Minute bars, 0.2 % costs: the oracle that follows every signal move loses; the
    reference (signal hysteresis + no-trade band) keeps a positive after-cost Sharpe."""
    market = synthetic.make_synthetic(
        10, 1950, bar="1min", regime="alpha", seed=7, signal_persistence=0.99
    )
    config = EnvConfig(cost_rate=0.002)
    oracle_cfg = EnvConfig(cost_rate=0.002, action_mode="weights")
    oracle = score(rollout(synthetic.oracle_policy(market), market, oracle_cfg))
    policy, ref_cfg = cost_aware_reference(market, config)
    assert ref_cfg.no_trade_band == REFERENCE_BAND and ref_cfg.cost_rate == 0.002
    ref = rollout(policy, market, ref_cfg)
    assert oracle < 0.0 < score(ref)
    # It holds still: far fewer trades than bars.
    assert len(ref.transactions) < 0.1 * market.num_bars


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
    _, from_plain = cost_aware_reference(market, plain)
    _, from_agent = cost_aware_reference(market, agent)
    assert from_agent == from_plain
    assert (from_agent.cost_rate, from_agent.fill_price, from_agent.initial_cash) == (
        0.003,
        "close",
        5e5,
    )
    fresh = cost_aware_reference(market, agent)[0]
    again = cost_aware_reference(market, plain)[0]
    assert rollout(fresh, market, from_agent).returns.equals(
        rollout(again, market, from_plain).returns
    )
