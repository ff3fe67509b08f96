"""Block bootstrap of the train split: blocks keep their bars in order, prices chain, and
validation and backtest always run the real split."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.bootstrap import bootstrap_path, resample_market
from finpod.errors import FinpodError

from .markets import make_market

BLOCK = 7


def test_path_is_blocks_of_consecutive_bars():
    gen = torch.Generator().manual_seed(0)
    path = bootstrap_path(50, BLOCK, gen)
    assert path.shape == (50,) and path.min() >= 0 and path.max() < 50
    blocks = list(path.split(BLOCK))
    for block in blocks:
        assert torch.equal(block - block[0], torch.arange(len(block)))
    assert len({int(b[0]) for b in blocks}) > 1  # resampled, not the split itself


def test_returns_inside_and_into_each_block_are_the_source_returns():
    market = make_market(60, 3, seed=1)
    gen = torch.Generator().manual_seed(2)
    path = bootstrap_path(60, BLOCK, gen)
    path[BLOCK : 2 * BLOCK] = torch.arange(BLOCK)  # a block from the first bar (no predecessor)
    boot = resample_market(market, path, BLOCK)
    src = market.close.double()
    ret = boot.close.double()[1:] / boot.close.double()[:-1]
    prev = (path[1:] - 1).clamp(min=0)
    expect = src[path[1:]] / src[prev]
    torch.testing.assert_close(ret, expect, rtol=1e-5, atol=0)
    assert torch.equal(boot.features, market.features[path])
    assert torch.equal(boot.tradable, market.tradable[path])


def test_a_resampled_split_keeps_its_own_bar_times_and_the_source_masks():
    market = make_market(60, 3, seed=1)
    path = bootstrap_path(60, BLOCK, torch.Generator().manual_seed(2))
    boot = resample_market(market, path, BLOCK)
    assert boot.timestamps.equals(market.timestamps)  # the schedule follows the split
    assert torch.equal(boot.tradable, market.tradable[path])
    assert torch.equal(boot.features, market.features[path])


def episode_tables(market, config, random_start=True, resets=2):
    env = VecTradingEnv(market, config, num_envs=3, seed=0, random_start=random_start)
    out = []
    for _ in range(resets):
        env.reset()
        out.append(env.tables.step.clone())
    return out


def test_a_training_env_draws_a_new_path_each_episode():
    market = replace(make_market(60, 3, seed=3), split="train")
    config = EnvConfig(train_bootstrap_block=BLOCK, episode_length=10)
    plain = episode_tables(market, EnvConfig(episode_length=10))[0]
    first, second = episode_tables(market, config)
    assert not torch.equal(first, plain) and not torch.equal(first, second)
    env = VecTradingEnv(market, config, num_envs=2, seed=0)
    env.reset()
    before = env.tables.step.clone()
    for _ in range(10):
        env.step(torch.zeros(2, 3))
    assert not torch.equal(env.tables.step, before)  # the episode ended: a new path


@pytest.mark.parametrize("split", ["validation", "backtest"])
def test_validation_and_backtest_are_never_resampled(split):
    market = replace(make_market(60, 3, seed=4), split=split)
    config = EnvConfig(train_bootstrap_block=BLOCK, episode_length=10)
    plain = episode_tables(market, EnvConfig(episode_length=10))[0]
    for tables in episode_tables(market, config):
        assert torch.equal(tables, plain)


def test_an_evaluation_rollout_of_the_train_split_is_not_resampled():
    market = replace(make_market(60, 3, seed=5), split="train")
    config = EnvConfig(train_bootstrap_block=BLOCK)
    plain = episode_tables(market, EnvConfig(), random_start=False)[0]
    assert torch.equal(episode_tables(market, config, random_start=False)[0], plain)


def test_a_block_longer_than_the_split_is_one_readable_error():
    market = replace(make_market(20, 3, seed=6), split="train")
    with pytest.raises(FinpodError, match="train_bootstrap_block"):
        VecTradingEnv(market, EnvConfig(train_bootstrap_block=20, episode_length=5))
