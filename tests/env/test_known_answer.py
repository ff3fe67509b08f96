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


def test_cost_aware_weights_use_the_signal_up_to_t_only():
    from dataclasses import replace

    market = synthetic.make_synthetic(6, 400, bar="1min", regime="alpha", seed=1)
    base = synthetic.cost_aware_weights(market)
    features = market.features.clone()
    features[200:] = torch.randn(features[200:].shape)
    changed = synthetic.cost_aware_weights(replace(market, features=features))
    assert torch.equal(base[:200], changed[:200])
    assert not torch.equal(base[200:], changed[200:])
