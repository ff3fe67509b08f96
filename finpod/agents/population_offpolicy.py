"""The off-policy population loop (SAC, TD3, DDPG): :mod:`finpod.agents.offpolicy` over members.

Each vector step: every member acts on its ``W`` envs (uniform random actions until its
own ``learning_starts`` env steps, its policy's exploration afterwards) → one env step of
all ``K·W`` envs → each member's transitions go to its own slice of a stacked replay
buffer ``(K, capacity, …)`` (one shared write position: every member adds ``W`` rows a
step) → ``gradient_steps`` batched updates. A member that may not update yet (warm-up) is
masked: its weights, Adam state and target networks stay untouched and its generator
draws nothing, as its single agent would.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from finpod.agents.base import Agent
from finpod.agents.buffer import check_buffer_fits
from finpod.agents.population import Population

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv

#: Names of the stacked replay-buffer fields, ``(K, capacity, …)``.
BUFFER_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


class OffPolicyPopulation(Population):
    """Base of replay-buffer populations; subclasses give ``_policy_action`` and ``_update``.

    Replay buffer: member k's transitions are ``buffer[name][k, :buffer_size]``, written
    at the shared ring position ``buffer_pos``. :meth:`import_member` keeps member k's
    slice (its transitions remain valid off-policy data for the imported weights).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: dict[str, torch.Tensor] | None = None
        self.buffer_pos = 0
        self.buffer_size = 0

    # ----- per algorithm ----------------------------------------------------------------
    def _policy_action(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Exploration action ``(K, W, A)`` in ``[-1, 1]`` given standard normal ``noise``."""
        raise NotImplementedError

    def _update(
        self, active: list[bool], mask: torch.Tensor | None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """One gradient step of the members where ``active`` (``mask``: the same as a
        tensor, None when all are). Returns the statistics ``(K,)`` and, for statistics
        only some of those members produced (TD3's delayed actor loss), their masks."""
        raise NotImplementedError

    def _draw_exploration(self, shape: tuple[int, ...], warmup: list[bool]) -> torch.Tensor:
        """Member k's uniform draw if it is in its warm-up, else its standard normal one."""
        d = self.device
        return torch.stack(
            [
                torch.rand(shape, device=d, generator=g)
                if r
                else torch.randn(shape, device=d, generator=g)
                for g, r in zip(self.generators, warmup, strict=True)
            ]
        )

    def _sample_batch(self, active: list[bool]) -> tuple[torch.Tensor, ...]:
        """``batch_size`` transitions per member, drawn as its single agent's buffer does:
        ``(obs, action, reward, next_obs, terminated)``, each ``(K, batch, …)``."""
        assert self.buffer is not None
        idx = self._randint(self.buffer_size, (self.hparams[0].batch_size,), active)
        rows = torch.arange(self.size, device=self.device).unsqueeze(1)
        return tuple(self.buffer[name][rows, idx] for name in BUFFER_FIELDS)

    # ----- replay buffer ----------------------------------------------------------------
    def _ensure_buffer(self, w: int) -> None:
        capacity = max(int(self.hparams[0].buffer_size), w)
        if self.buffer is not None and self.buffer["reward"].shape[1] >= w:
            return
        check_buffer_fits(self.size * capacity, self.obs_dim, self.action_dim, self.device)
        K, d = self.size, self.device
        self.buffer = {
            "obs": torch.zeros((K, capacity, self.obs_dim), device=d),
            "action": torch.zeros((K, capacity, self.action_dim), device=d),
            "reward": torch.zeros((K, capacity), device=d),
            "next_obs": torch.zeros((K, capacity, self.obs_dim), device=d),
            "terminated": torch.zeros((K, capacity), device=d),
        }
        self.buffer_pos = self.buffer_size = 0

    def _add(self, rows: dict[str, torch.Tensor]) -> None:
        """Append ``W`` transitions per member (``rows[name]`` ``(K, W, …)``)."""
        assert self.buffer is not None
        capacity = self.buffer["reward"].shape[1]
        w = rows["reward"].shape[1]
        idx = (torch.arange(w, device=self.device) + self.buffer_pos) % capacity
        for name in BUFFER_FIELDS:
            self.buffer[name][:, idx] = rows[name]
        self.buffer_pos = (self.buffer_pos + w) % capacity
        self.buffer_size = min(self.buffer_size + w, capacity)

    def export_buffer(self, k: int) -> dict[str, np.ndarray]:
        """Member ``k``'s replay rows, oldest first, in the format of
        :meth:`~finpod.agents.offpolicy.OffPolicyAgent.export_buffer` (host arrays)."""
        k = self._member(k)
        if self.buffer is None:
            return self.export_member(k).export_buffer()
        capacity = self.buffer["reward"].shape[1]
        start = (self.buffer_pos - self.buffer_size) % capacity
        idx = (torch.arange(self.buffer_size, device=self.device) + start) % capacity
        out = {}
        for name in BUFFER_FIELDS:
            rows = self.buffer[name][k, idx]
            if name == "terminated":
                rows = rows > 0.5
            out[name] = np.ascontiguousarray(rows.cpu().numpy())
        return out

    def export_member(self, k: int, *, include_buffer: bool = False) -> Agent:
        """Member ``k`` as a single agent (see :meth:`Population.export_member`); with
        ``include_buffer`` the agent also gets member k's replay rows."""
        agent = super().export_member(k)
        if include_buffer and self.buffer is not None:
            agent.import_buffer(self.export_buffer(k))
        return agent

    def clear_buffer(self) -> None:
        """Drop the replay buffer of every member (the next ``learn`` starts empty ones)."""
        self.buffer = None
        self.buffer_pos = self.buffer_size = 0

    # ----- learning ---------------------------------------------------------------------
    def learn(self, env: VecEnv, num_steps: int) -> dict[str, torch.Tensor]:
        hp = self.hparams[0]  # shared fields only
        K = self.size
        w = self._envs_per_member(env)
        n_envs = env.num_envs
        self._ensure_buffer(w)
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        stats: dict[str, torch.Tensor] = {}
        reward_sum = torch.zeros(K, device=self.device)
        vector_steps = max(1, math.ceil(num_steps / w))
        shape = (w, self.action_dim)
        for _ in range(vector_steps):
            with torch.no_grad():
                warmup = (self._env_steps < hp.learning_starts).tolist()
                x = obs.reshape(K, w, self.obs_dim)
                if self.shared_rng is not None:
                    uniform = self._rand(shape)
                    noise = uniform if all(warmup) else self._randn(shape)
                else:  # each member draws what its single agent draws
                    noise = self._draw_exploration(shape, warmup)
                    uniform = noise
                if all(warmup):
                    action = uniform * 2.0 - 1.0
                else:
                    policy = self._policy_action(x, noise)
                    random = self._mask(warmup).reshape(K, 1, 1)
                    action = torch.where(random, uniform * 2.0 - 1.0, policy)
                action = action.reshape(n_envs, self.action_dim)
                next_obs, reward, terminated, truncated, info = env.step(action)
                next_obs = next_obs.to(self.device, torch.float32)
                reward = reward.to(self.device, torch.float32)
                terminated = terminated.to(self.device)
                final = info.get("final_obs", next_obs).to(self.device, torch.float32)
                self._add(
                    {
                        "obs": x,
                        "action": action.reshape(K, w, self.action_dim),
                        "reward": reward.reshape(K, w),
                        "next_obs": final.reshape(K, w, self.obs_dim),
                        "terminated": terminated.float().reshape(K, w),
                    }
                )
                self._episodes_track(reward, (terminated | truncated.to(self.device)).float())
                reward_sum += reward.reshape(K, w).mean(1)
            obs = next_obs
            self._env_steps += w
            self.collected_steps += n_envs
            can = self.buffer_size >= hp.batch_size
            active = [can and bool(s >= hp.learning_starts) for s in self._env_steps]
            if any(active):
                mask = self._mask(active)
                for _ in range(hp.gradient_steps):
                    step_stats, masks = self._update(active, None if all(active) else mask)
                    for name, value in step_stats.items():
                        old = stats.get(name, torch.full_like(value, float("nan")))
                        stats[name] = torch.where(masks.get(name, mask), value, old)
                    self._updates += active
        self._obs = obs
        out = dict(stats)
        out["reward_mean"] = reward_sum / vector_steps
        return {**out, **self._episodes_stats()}
