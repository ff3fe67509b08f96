"""What a pod declares to Ray is sized from what the env will give it."""

from __future__ import annotations

from finpod.agents.buffer import replay_buffer_nbytes
from finpod.data.synthetic_market import make_synthetic
from finpod.env import EnvConfig, ObsLayout, VecTradingEnv
from finpod.tournament.placement import largest_buffer_bytes
from finpod.tournament.search import parse_search


def test_the_largest_replay_buffer_is_sized_for_the_observation_the_env_gives():
    # Extra per-ticker features widen the observation beyond the dataset's own features.
    config = EnvConfig(cross_features=["zscore", "residual_momentum"])
    market = make_synthetic(5, 60, seed=0)
    env = VecTradingEnv(market, config, num_envs=1)
    layout = ObsLayout.for_universe(market.num_stocks, market.feature_names, market.bar, config)
    space = parse_search({"algorithms": ["sac"], "sac": {"buffer_size": 1000}}, "sac")
    expected = replay_buffer_nbytes(1000, env.obs_dim, env.action_dim)
    assert largest_buffer_bytes(space, layout) == expected
