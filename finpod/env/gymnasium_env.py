"""Gymnasium wrappers of :class:`VecTradingEnv` (numpy in, numpy out), for SB3 and friends.

Same MDP, same scaling, same fills as the torch env: the wrappers only convert arrays.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.vec_env import VecTradingEnv

#: Observation bounds: every entry is finite (features are NaN-free, the value is floored),
#: but features have no fixed range, so the box is the whole finite float32 line.
OBS_BOUND = float(np.finfo(np.float32).max)


def _spaces(env: VecTradingEnv) -> tuple[spaces.Box, spaces.Box]:
    obs = spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(env.obs_dim,), dtype=np.float32)
    act = spaces.Box(-1.0, 1.0, shape=(env.action_dim,), dtype=np.float32)
    return obs, act


def _scalar_info(info: dict[str, torch.Tensor], row: int) -> dict[str, Any]:
    return {
        "account_value": float(info["account_value"][row]),
        "cash": float(info["cash"][row]),
        "cost": float(info["cost"][row]),
        "turnover": float(info["turnover"][row]),
        "holdings": info["holdings"][row].cpu().numpy().copy(),
        "trade": info["trade"][row].cpu().numpy().copy(),
        "bar": int(info["bar"][row]),
    }


class TradingGymEnv(gym.Env):
    """One trading account as a ``gymnasium.Env``.

    Observations are float32 vectors of :class:`finpod.env.ObsLayout`; actions are
    float32 in [-1, 1]^N. ``info`` holds floats ``account_value``, ``cash``, ``cost``,
    ``turnover``, ``bar`` (index of the fill bar) and arrays ``holdings``, ``trade`` (shares). At an episode's end the
    last observation is returned and the caller resets, as gymnasium expects.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        market: MarketData,
        config: EnvConfig | None = None,
        seed: int = 0,
        random_start: bool = True,
    ) -> None:
        super().__init__()
        self.vec = VecTradingEnv(market, config, num_envs=1, seed=seed, random_start=random_start)
        self.observation_space, self.action_space = _spaces(self.vec)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs = self.vec.reset(seed=seed)
        return obs[0].cpu().numpy(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        act = torch.as_tensor(np.asarray(action, dtype=np.float32).reshape(1, -1))
        _, reward, terminated, truncated, info = self.vec.step(act)
        obs = info["final_obs"][0].cpu().numpy()
        return (
            obs,
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            _scalar_info(info, 0),
        )


class TradingGymVectorEnv(VectorEnv):
    """``num_envs`` accounts as a ``gymnasium.vector.VectorEnv`` (same-step autoreset).

    When an env ends, ``obs`` already holds the first observation of its next episode;
    ``info["final_obs"]`` (num_envs, obs_dim) holds the last one and ``info["_final_obs"]``
    marks which rows ended. Other ``info`` keys are arrays over envs.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        market: MarketData,
        config: EnvConfig | None = None,
        num_envs: int = 1,
        seed: int = 0,
        random_start: bool = True,
    ) -> None:
        self.vec = VecTradingEnv(
            market, config, num_envs=num_envs, seed=seed, random_start=random_start
        )
        self.num_envs = num_envs
        self.single_observation_space, self.single_action_space = _spaces(self.vec)
        self.observation_space = spaces.Box(
            -OBS_BOUND, OBS_BOUND, shape=(num_envs, self.vec.obs_dim), dtype=np.float32
        )
        self.action_space = spaces.Box(
            -1.0, 1.0, shape=(num_envs, self.vec.action_dim), dtype=np.float32
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self._np_random, self._np_random_seed = gym.utils.seeding.np_random(seed)
        return self.vec.reset(seed=seed).cpu().numpy(), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        act = torch.as_tensor(np.asarray(actions, dtype=np.float32))
        obs, reward, terminated, truncated, info = self.vec.step(act)
        done = (terminated | truncated).cpu().numpy()
        infos = {
            key: info[key].cpu().numpy()
            for key in ("account_value", "cash", "cost", "turnover", "holdings", "trade")
        }
        infos["final_obs"] = info["final_obs"].cpu().numpy()
        infos["_final_obs"] = done
        return (
            obs.cpu().numpy(),
            reward.cpu().numpy(),
            terminated.cpu().numpy(),
            truncated.cpu().numpy(),
            infos,
        )
