"""The observation's layout can be read from a dataset's description, before any market
is loaded, and it is the observation the env gives."""

from __future__ import annotations

import numpy as np
import pytest

from finpod.env import EnvConfig, ObsLayout, VecTradingEnv

from .markets import make_market
from .test_impact import with_volume

CONFIGS = {
    "plain": ("1d", EnvConfig()),
    "cross features": ("1d", EnvConfig(cross_features=["zscore", "residual_momentum"])),
    "square-root costs": ("1d", EnvConfig(cost_model="sqrt", impact_coefficient=1.0)),
    "intraday schedule": ("30min", EnvConfig(decision_interval=2)),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_layout_read_from_a_universe_is_the_observation_the_env_gives(name):
    bar, config = CONFIGS[name]
    market = make_market(40, 4, num_features=3, seed=1, bar=bar)
    market = with_volume(market, np.full((40, 4), 1e6))
    layout = ObsLayout.for_universe(market.num_stocks, market.feature_names, market.bar, config)
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    assert layout == env.layout
    assert env.reset().shape == (2, layout.obs_dim)
