"""The ceiling beside an agent: the scripted signal rule under the agent's own bounds."""

from __future__ import annotations

import pytest

from finpod.backtest.ceiling import ceiling_shares, signal_tilt_policy
from finpod.backtest.runner import backtest_market
from finpod.data.synthetic_market import make_synthetic
from finpod.env import EnvConfig, rollout, score
from finpod.errors import FinpodError

ACTIVE = EnvConfig(
    action_mode="active",
    start="reference",
    max_active_weight=0.02,
    active_budget=0.5,
    reward="active_log_return",
    cost_rate=0.002,
    fill_price="open",
)


def test_the_signal_rule_finds_the_planted_signal_and_nothing_on_a_null_market():
    alpha = make_synthetic(20, 500, bar="1d", regime="alpha", seed=4)
    null = make_synthetic(20, 500, bar="1d", regime="null", seed=4)
    found = rollout(signal_tilt_policy(alpha, ACTIVE), alpha, ACTIVE)
    noise = rollout(signal_tilt_policy(null, ACTIVE), null, ACTIVE)
    assert score(found, "information_ratio") > 3.0
    # On noise the rule only pays its costs: no active return to find.
    assert score(noise, "information_ratio") < 0.5


def test_the_rule_trades_within_the_agents_bounds():
    m = make_synthetic(20, 300, bar="1d", regime="alpha", seed=1)
    tight = EnvConfig.from_dict({**ACTIVE.to_dict(), "max_active_weight": 0.005})
    wide = rollout(signal_tilt_policy(m, ACTIVE), m, ACTIVE)
    narrow = rollout(signal_tilt_policy(m, tight), m, tight)
    te = lambda r: float((r.returns - r.reference_returns).std())  # noqa: E731
    assert te(narrow) < 0.5 * te(wide)


def test_a_market_without_the_signal_is_one_line():
    m = make_synthetic(5, 100, bar="1d", regime="alpha", seed=1)
    with pytest.raises(FinpodError, match="no 'momentum_42' feature"):
        signal_tilt_policy(m, ACTIVE, feature="momentum_42")


def test_the_backtest_puts_the_ceiling_beside_the_agent():
    m = make_synthetic(10, 260, bar="1d", regime="alpha", seed=2)
    # An "agent" that is the rule itself reaches all of it; one against the signal, less
    # than nothing.
    rule = signal_tilt_policy(m, ACTIVE)
    result = backtest_market(m, rule, ACTIVE)
    assert {"signal_rule", "cost_aware_reference"} <= set(result.benchmark_returns.columns)
    ceiling = result.info["ceiling"]
    assert ceiling["rule_information_ratio"] > 1.0
    assert ceiling["ir_share_of_rule"] == pytest.approx(1.0, abs=1e-6)
    against = backtest_market(m, lambda obs: -rule(obs), ACTIVE).info["ceiling"]
    assert against["ir_share_of_rule"] < 0.0


def test_a_share_of_a_non_positive_line_is_undefined():
    out = ceiling_shares(
        {"sharpe": 1.0, "information_ratio": 2.0},
        {"sharpe": -0.5, "information_ratio": 4.0},
        None,
    )
    assert out["ir_share_of_rule"] == pytest.approx(0.5)
    assert out["sharpe_share_of_rule"] != out["sharpe_share_of_rule"]  # NaN
