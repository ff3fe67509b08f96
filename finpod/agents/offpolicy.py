"""The collection loop shared by SAC, TD3 and DDPG.

Each vector step: act (uniform random actions until ``learning_starts`` env steps, the
policy's exploration afterwards) → step all envs → store the transitions, with the true
final observation for envs whose episode ended → ``gradient_steps`` updates on minibatches
from the replay buffer. The algorithm supplies ``_explore(obs)`` and ``_update()``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from finpod.agents.base import Agent
from finpod.agents.buffer import ReplayBuffer


class OffPolicyAgent(Agent):
    """Base of replay-buffer agents; ``hparams`` must have ``buffer_size``, ``batch_size``,
    ``learning_starts``, ``gradient_steps``.

    The replay buffer is working memory, not part of :meth:`state_dict`: an agent restored
    from a checkpoint refills it before updating again (``batch_size`` transitions).
    """

    buffer: ReplayBuffer | None = None

    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        """Exploration action ``(num_envs, action_dim)`` in ``[-1, 1]``."""
        raise NotImplementedError

    def _update(self) -> dict[str, torch.Tensor]:
        """One gradient step from a replay minibatch; returns device tensors (no sync).

        Statistics missing from a step (TD3's actor loss on a delayed step) keep the value
        of the latest step of the same ``learn`` call that had them.
        """
        raise NotImplementedError

    def learn(self, env: Any, num_steps: int) -> dict[str, float]:
        hp = self.hparams
        n_envs = env.num_envs
        if self.buffer is None:
            self.buffer = ReplayBuffer(
                max(hp.buffer_size, n_envs), self.obs_dim, self.action_dim, self.device
            )
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        stats: dict[str, torch.Tensor] = {}
        reward_sum = torch.zeros((), device=self.device)
        vector_steps = max(1, math.ceil(num_steps / n_envs))
        for _ in range(vector_steps):
            with torch.no_grad():
                if self.env_steps < hp.learning_starts:
                    action = torch.rand(
                        (n_envs, self.action_dim), device=self.device, generator=self.generator
                    )
                    action = action * 2.0 - 1.0
                else:
                    action = self._explore(obs)
                next_obs, reward, terminated, truncated, info = env.step(action)
                next_obs = next_obs.to(self.device, torch.float32)
                reward = reward.to(self.device, torch.float32)
                terminated = terminated.to(self.device)
                final = info.get("final_obs", next_obs).to(self.device, torch.float32)
                self.buffer.add(obs, action, reward, final, terminated)
                self._episodes_track(reward, (terminated | truncated.to(self.device)).float())
                reward_sum += reward.mean()
            obs = next_obs
            self.env_steps += n_envs
            if self.env_steps >= hp.learning_starts and self.buffer.size >= hp.batch_size:
                for _ in range(hp.gradient_steps):
                    stats.update(self._update())
                    self.updates += 1
        self._obs = obs
        out = {k: float(v) for k, v in stats.items()}
        out["reward_mean"] = float(reward_sum) / vector_steps
        return {**out, **self._episodes_stats()}

    def _after_load(self) -> None:
        self.buffer = None


@torch.no_grad()
def polyak(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """``target ← (1 − τ)·target + τ·source`` parameter-wise."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)
