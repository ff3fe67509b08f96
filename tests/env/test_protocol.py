"""The trading env and the gymnasium adapter both are what the agents train on (VecEnv)."""

from __future__ import annotations

import pytest
import torch

from finpod.agents.gym_adapter import GymVecEnv
from finpod.env import EnvConfig, VecEnv, VecTradingEnv


def _trading(market):
    return VecTradingEnv(market, EnvConfig(episode_length=5), num_envs=3, seed=0)


def _pendulum(_market):
    return GymVecEnv("Pendulum-v1", 3)


@pytest.mark.parametrize("make", [_trading, _pendulum], ids=["VecTradingEnv", "GymVecEnv"])
def test_env_satisfies_the_vecenv_protocol_with_its_types(make, market):
    env = make(market)
    assert isinstance(env, VecEnv)
    assert type(env.num_envs) is int and env.num_envs == 3
    assert type(env.obs_dim) is int and env.obs_dim > 0
    assert type(env.action_dim) is int and env.action_dim > 0
    assert isinstance(env.device, torch.device)
    assert env.config is None or isinstance(env.config, EnvConfig)
    assert env.action_mode == (None if env.config is None else env.config.action_mode)
    assert env.layout is None or env.layout.obs_dim == env.obs_dim

    obs = env.reset(seed=0)
    assert obs.shape == (3, env.obs_dim) and obs.dtype == torch.float32
    assert obs.device == env.device
    obs, reward, terminated, truncated, info = env.step(torch.zeros(3, env.action_dim))
    assert obs.shape == (3, env.obs_dim) and obs.dtype == torch.float32
    assert reward.shape == (3,) and reward.is_floating_point()
    assert terminated.shape == truncated.shape == (3,)
    assert terminated.dtype == truncated.dtype == torch.bool
    assert info["final_obs"].shape == (3, env.obs_dim)
    env.close()


def test_an_object_without_step_is_not_a_vecenv():
    class NoStep:
        num_envs, obs_dim, action_dim, device = 1, 1, 1, torch.device("cpu")

        def reset(self, seed=None):
            return torch.zeros(1, 1)

        def close(self):
            pass

    assert not isinstance(NoStep(), VecEnv)
