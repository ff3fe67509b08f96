"""Cross-sectional features: causal, listed tickers only, in every ticker's token."""

from __future__ import annotations

import pytest
import torch

from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.cross_features import CROSS_CLIP, RESIDUAL_WINDOWS
from finpod.env.diagnostics import observation_stats
from finpod.env.tables import ObsLayout, build_tables
from finpod.errors import FinpodError

from .markets import make_market
from .test_no_lookahead import perturb

BOTH = ["zscore", "residual_momentum"]


def ticker_features(market, config) -> torch.Tensor:
    """(T, N, F + X) per-ticker features slice of the static observation."""
    layout = ObsLayout.for_env(market, config)
    static = build_tables(market, config, torch.device("cpu")).static_obs
    n = market.num_stocks
    return static[:, n : n + n * layout.num_features].reshape(-1, n, layout.num_features)


def test_cross_features_widen_each_token_and_keep_own_features_first():
    market = make_market(30, 4, num_features=3, seed=1)
    config = EnvConfig(cross_features=BOTH)
    layout = ObsLayout.for_env(market, config)
    assert layout.num_features == 3 + 3 + len(RESIDUAL_WINDOWS)
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    assert env.reset().shape == (2, layout.obs_dim)
    feats = ticker_features(market, config)
    torch.testing.assert_close(feats[:, :, :3], market.features)


def test_zscore_is_the_feature_against_the_listed_tickers():
    market = make_market(25, 5, num_features=2, seed=3, listing=[0, 0, 0, 0, 10])
    feats = ticker_features(market, EnvConfig(cross_features=["zscore"]))
    t = 5  # ticker 4 is not listed yet: it is left out and reads 0
    own = market.features[t, :4].double()
    expect = (own - own.mean(0)) / own.std(0)
    torch.testing.assert_close(feats[t, :4, 2:].double(), expect.clamp(-CROSS_CLIP, CROSS_CLIP))
    assert torch.all(feats[t, 4, 2:] == 0)
    assert torch.all(feats[t + 10, 4, 2:] != 0)


def test_residual_momentum_is_the_return_over_the_window_against_the_others():
    market = make_market(40, 4, num_features=1, seed=4)
    feats = ticker_features(market, EnvConfig(cross_features=["residual_momentum"]))
    w = RESIDUAL_WINDOWS[0]
    t = 30
    logc = market.close.double().log()
    mom = logc[t] - logc[t - w]
    resid = mom - mom.mean()
    torch.testing.assert_close(feats[t, :, 1].double(), resid / resid.std(), atol=1e-5, rtol=0)
    assert torch.all(feats[: RESIDUAL_WINDOWS[-1], :, 2] == 0)  # window before the split


@pytest.mark.parametrize("t", [3, 12, 25])
def test_bars_after_t_do_not_change_the_cross_features_at_t(t):
    market = make_market(40, 4, num_features=2, seed=5)
    config = EnvConfig(cross_features=BOTH)
    base = ticker_features(market, config)
    changed = ticker_features(perturb(market, range(t + 1, 40)), config)
    assert torch.equal(base[: t + 1], changed[: t + 1])
    assert not torch.equal(base[t + 1 :], changed[t + 1 :])


@pytest.mark.parametrize("bad", ["zscore", ["rank"], ["zscore", "zscore"]])
def test_bad_cross_features_are_one_readable_error(bad):
    with pytest.raises(FinpodError, match="cross_features"):
        EnvConfig(cross_features=bad)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cross_features_are_the_same_on_cuda():
    market = make_market(40, 4, num_features=2, seed=6)
    config = EnvConfig(cross_features=BOTH)
    cpu = build_tables(market, config, torch.device("cpu")).static_obs
    gpu = build_tables(market, config, torch.device("cuda")).static_obs.cpu()
    torch.testing.assert_close(cpu, gpu, atol=1e-5, rtol=1e-5)


def test_observation_stats_name_the_cross_features():
    market = make_market(30, 4, num_features=2, seed=7)
    stats = observation_stats(market, EnvConfig(cross_features=BOTH))
    assert f"feature:residual_momentum:{RESIDUAL_WINDOWS[0]}" in stats.index
    assert stats.loc["feature:f0", "std"] == pytest.approx(float(market.features[:, :, 0].std()))
