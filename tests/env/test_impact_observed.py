"""Under square-root costs the agent sees what trading each name costs, from past bars."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from finpod.env import EnvConfig
from finpod.env.diagnostics import observation_stats
from finpod.env.tables import ObsLayout, build_tables

from .markets import make_market
from .test_impact import with_volume

SQRT = EnvConfig(cost_model="sqrt", impact_coefficient=1.0)
CPU = torch.device("cpu")


def impact_column(market, config: EnvConfig) -> np.ndarray:
    """(T, N) the last per-ticker column of the observation's features slice."""
    layout = ObsLayout.for_env(market, config)
    n, f = layout.num_stocks, layout.num_features
    static = build_tables(market, config, CPU).static_obs  # [prices (N), features (N·F), …]
    return static[:, n : n + n * f].reshape(-1, n, f)[..., -1].numpy()


def spread_market(bars: int = 40):
    # Shares traded per bar spread 10,000× across three names.
    market = make_market(num_bars=bars, num_stocks=3)
    return with_volume(market, np.tile([1e7, 1e5, 1e3], (bars, 1)))


def test_under_square_root_costs_each_ticker_observes_what_trading_it_costs():
    market = spread_market()
    linear = ObsLayout.for_env(market, EnvConfig())
    sqrt = ObsLayout.for_env(market, SQRT)
    assert sqrt.num_features == linear.num_features + 1
    assert sqrt.obs_dim == linear.obs_dim + market.num_stocks
    col = impact_column(market, SQRT)[5:]
    # The thinner the name, the higher it reads.
    assert np.all(col[:, 2] > col[:, 1]) and np.all(col[:, 1] > col[:, 0])
    assert "feature:impact" in observation_stats(market, SQRT).index


def test_a_larger_account_reads_a_higher_cost_in_the_same_name():
    market = spread_market()
    small = impact_column(market, SQRT)[5:]
    big = impact_column(market, replace(SQRT, initial_cash=100_000_000.0))[5:]
    assert np.allclose(big - small, 1 / 1.5, atol=1e-4)  # √100 = 10× the fraction


def test_the_impact_observation_at_t_uses_no_bar_after_t():
    market = spread_market()
    t = 25
    volume = market.volume.clone()
    volume[t + 1 :] *= 1e-3
    close = market.close.clone()
    close[t + 1 :] *= 1.5
    later = replace(market, volume=volume, close=close)
    a, b = impact_column(market, SQRT), impact_column(later, SQRT)
    assert np.array_equal(a[: t + 1], b[: t + 1])
    assert not np.allclose(a[t + 2 :], b[t + 2 :])
