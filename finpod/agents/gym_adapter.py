"""Run finpod agents on any gymnasium environment with a Box action space.

:class:`GymVecEnv` wraps ``num_envs`` copies of a gymnasium env (synchronous vector env,
same-step auto-reset) in finpod's VecEnv protocol: torch tensors in and out, actions in
``[-1, 1]`` scaled linearly to the env's bounds, ``info["final_obs"]`` holding the last
observation of every env whose episode just ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import StepResult


class GymVecEnv:
    """``num_envs`` copies of gymnasium env ``env_id`` behind the VecEnv protocol.

    Attributes:
        num_envs, obs_dim, action_dim: sizes.
        device: where returned tensors live.
        config: None: a gymnasium env has no finpod env settings for checkpoints to record.
        reward_scale: rewards are multiplied by this before being returned (training aid;
            ``info["raw_reward"]`` keeps the env's own reward).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        *,
        device: torch.device | str = "cpu",
        reward_scale: float = 1.0,
        **env_kwargs: Any,
    ) -> None:
        self.env = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
            **env_kwargs,
        )
        space = self.env.single_action_space
        if not isinstance(space, gym.spaces.Box):
            raise FinpodError(
                f"{env_id} has a {type(space).__name__} action space", "use an env with Box actions"
            )
        self.num_envs = int(num_envs)
        self.obs_dim = int(np.prod(self.env.single_observation_space.shape))
        self.action_dim = int(np.prod(space.shape))
        self.device = torch.device(device)
        self.config = None
        self.action_mode = None
        self.layout = None
        self.reward_scale = float(reward_scale)
        self._low = space.low.reshape(-1).astype(np.float64)
        self._high = space.high.reshape(-1).astype(np.float64)
        self._shape = space.shape

    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(
            np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1), device=self.device
        )

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """First observations ``(num_envs, obs_dim)``; env ``i`` is seeded with ``seed + i``."""
        obs, _ = self.env.reset(seed=seed)
        return self._obs(obs)

    def step(self, action: torch.Tensor) -> StepResult:
        """Step all envs with ``action (num_envs, action_dim)`` in ``[-1, 1]``."""
        a = action.detach().to("cpu", torch.float64).numpy().clip(-1.0, 1.0)
        scaled = self._low + (a + 1.0) * 0.5 * (self._high - self._low)
        obs, reward, terminated, truncated, info = self.env.step(
            scaled.reshape(self.num_envs, *self._shape).astype(np.float32)
        )
        next_obs = self._obs(obs)
        final_obs = next_obs  # the same object tells agents that no episode ended
        if "_final_obs" in info and bool(np.any(info["_final_obs"])):
            final_obs = next_obs.clone()
            for i in np.flatnonzero(info["_final_obs"]):
                final_obs[i] = torch.as_tensor(
                    np.asarray(info["final_obs"][i], dtype=np.float32).reshape(-1)
                )
        raw = torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device)
        return (
            next_obs,
            raw * self.reward_scale,
            torch.as_tensor(np.asarray(terminated, dtype=bool), device=self.device),
            torch.as_tensor(np.asarray(truncated, dtype=bool), device=self.device),
            {"final_obs": final_obs, "raw_reward": raw},
        )

    def close(self) -> None:
        self.env.close()


def evaluate_gym(
    agent: Any, env_id: str, episodes: int = 10, seed: int = 10_000, **env_kwargs: Any
) -> float:
    """Mean undiscounted return of ``agent``'s deterministic policy over ``episodes`` episodes."""
    env = GymVecEnv(env_id, num_envs=episodes, **env_kwargs)
    obs = env.reset(seed=seed)
    total = torch.zeros(episodes)
    finished = torch.zeros(episodes, dtype=torch.bool)
    while not bool(finished.all()):
        obs, _, term, trunc, info = env.step(agent.act(obs, deterministic=True).cpu())
        total += info["raw_reward"] * (~finished)
        finished |= term | trunc
    env.close()
    return float(total.mean())
