"""The gymnasium wrappers pass gymnasium's checker and SB3 can train on them."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from finpod.env import EnvConfig, TradingGymEnv, TradingGymVectorEnv

from .markets import make_market


def test_single_env_passes_gymnasium_checker():
    market = make_market(30, 3, listing=[0, 5, 0], untradable=0.1)
    env = TradingGymEnv(market, EnvConfig(episode_length=10), seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker reports problems as warnings
        check_env(env, skip_render_check=True)


def test_single_env_episode_ends_with_its_last_observation():
    market = make_market(12, 2)
    env = TradingGymEnv(market, EnvConfig(), random_start=False)
    obs, _ = env.reset(seed=0)
    steps = 0
    truncated = False
    while not truncated:
        obs, _, terminated, truncated, info = env.step(np.full(2, 0.3, dtype=np.float32))
        assert not terminated
        steps += 1
    assert steps == 11 and info["bar"] == 11
    # The last observation shows the portfolio built during the episode, not a reset one.
    assert obs[1] < 1.0  # cash weight below 1: shares are held


class RecordingWrapper(gym.Wrapper):
    """Checks the account identity after every step SB3 takes and records trades."""

    def __init__(self, env, close):
        super().__init__(env)
        self.close_prices = close
        self.trades = []
        self.actions = []

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        mark = self.close_prices[info["bar"]]
        value = info["cash"] + float(info["holdings"] @ mark)
        assert abs(value - info["account_value"]) <= 1e-6 * info["account_value"]
        assert info["cash"] >= 0 and (info["holdings"] >= 0).all()
        self.trades.append(info["trade"])
        self.actions.append(np.clip(np.asarray(action, dtype=np.float64), -1, 1))
        return obs, reward, terminated, truncated, info


def test_sb3_ppo_trains_and_its_actions_move_holdings():
    sb3 = pytest.importorskip("stable_baselines3")
    market = make_market(80, 3, num_features=2, seed=8)
    config = EnvConfig(episode_length=30, max_shares=10, dtype="float64")
    env = RecordingWrapper(TradingGymEnv(market, config, seed=1), market.close.double().numpy())
    model = sb3.PPO(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu", verbose=0
    )
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    trades = np.array(env.trades)
    actions = np.array(env.actions)
    assert len(trades) >= 256
    assert np.abs(trades).sum() > 0
    # Every buy was asked for by SB3's action (sells are capped by holdings, buys by cash).
    assert (trades[actions * config.max_shares < 1.0] <= 0).all()
    assert (trades[actions * config.max_shares > -1.0] >= 0).all()
    # Large buy orders from a fresh account execute in full.
    fresh = np.arange(len(trades)) % 30 == 0
    big = fresh[:, None] & (actions * config.max_shares >= 1.0)
    np.testing.assert_array_equal(trades[big], np.trunc(actions[big] * config.max_shares))


def test_vector_env_autoresets_in_the_same_step():
    market = make_market(10, 2)
    env = TradingGymVectorEnv(market, EnvConfig(episode_length=4), num_envs=3, seed=0)
    obs, _ = env.reset(seed=5)
    assert obs.shape == (3, env.single_observation_space.shape[0]) and obs.dtype == np.float32
    for _ in range(4):
        obs, reward, terminated, truncated, info = env.step(np.full((3, 2), 0.5, np.float32))
        assert reward.shape == (3,) and not terminated.any()
    assert truncated.all() and info["_final_obs"].all()
    # New episode: all cash again; the final observation still holds the old portfolio.
    np.testing.assert_allclose(obs[:, 1], 1.0)
    assert (info["final_obs"][:, 1] < 1.0).all()
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
