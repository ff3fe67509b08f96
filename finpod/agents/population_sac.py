"""Batched SAC population: :mod:`finpod.agents.sac` and the off-policy loop over a member axis.

Each vector step: every member acts on its ``W`` envs (uniform random actions until its
own ``learning_starts`` env steps, its policy's sample afterwards) → one env step of all
``K·W`` envs → each member's transitions go to its own slice of a stacked replay buffer
``(K, capacity, …)`` (one shared write position: every member adds ``W`` rows a step) →
``gradient_steps`` batched SAC updates. A member that may not update yet (warm-up) is
masked: its weights, Adam state and target networks stay untouched and its generator
draws nothing, as its single agent would.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from finpod.agents.base import Agent
from finpod.agents.batched import gather_rows, linear, mlp, polyak_
from finpod.agents.buffer import check_buffer_fits
from finpod.agents.nets import LOG_STD_MAX, LOG_STD_MIN, gaussian_log_prob
from finpod.agents.population import Population

#: Names of the stacked replay-buffer fields, ``(K, capacity, …)``.
BUFFER_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


class SACPopulation(Population):
    """K SAC agents (squashed-Gaussian actor, twin Q with targets, tuned α) batched.

    Replay buffer: member k's transitions are ``buffer[name][k, :buffer_size]``, written
    at the shared ring position ``buffer_pos``. :meth:`import_member` keeps member k's
    slice (its transitions remain valid off-policy data for the imported weights).
    """

    algorithm = "sac"
    member_fields = ("actor_lr", "critic_lr", "alpha_lr", "gamma", "tau")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._body_depth = len(hp.actor_hidden)
        self._q_depth = len(hp.critic_hidden) + 1
        self.target_entropy = -float(self.action_dim)
        self.buffer: dict[str, torch.Tensor] | None = None
        self.buffer_pos = 0
        self.buffer_size = 0
        self._polyak_names = [
            (f"{q}_target.{key[len(q) + 1 :]}", key)
            for q in ("q1", "q2")
            for key in self.net_keys
            if key.startswith(f"{q}.")
        ]

    # ----- networks ---------------------------------------------------------------------
    def _actor(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (K, B, D)`` → pre-tanh mean and log_std ``(K, B, A)``."""
        p = self.params
        h = torch.relu(mlp(obs, p, "actor.body", self._body_depth, torch.relu))
        log_std = torch.tanh(linear(h, p["actor.log_std.weight"], p["actor.log_std.bias"]))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return linear(h, p["actor.mean.weight"], p["actor.mean.bias"]), log_std

    def _sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action ``(K, B, A)`` and log-probability ``(K, B)`` given
        standard normal ``noise (K, B, A)`` (``SquashedGaussianActor.sample``)."""
        mean, log_std = self._actor(obs)
        pre = mean + noise * log_std.exp()
        action = torch.tanh(pre)
        correction = 2.0 * (math.log(2.0) - pre - nn.functional.softplus(-2.0 * pre))
        return action, gaussian_log_prob(pre, mean, log_std) - correction.sum(-1)

    def _q(self, name: str, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q_name(obs (K, B, D), action (K, B, A))`` → ``(K, B)``."""
        x = torch.cat([obs, action], dim=-1)
        return mlp(x, self.params, f"{name}.net", self._q_depth, torch.relu).squeeze(-1)

    def _randn(self, rows: int, active: list[bool] | None = None) -> torch.Tensor:
        shape = (rows, self.action_dim)
        return self._draw(
            lambda g: torch.randn(shape, device=self.device, generator=g),
            active,
            lambda: torch.zeros(shape, device=self.device),
        )

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        x = self._batch(obs)
        if deterministic:
            action = torch.tanh(self._actor(x)[0])
        else:
            action = self._sample(x, self._randn(x.shape[1]))[0]
        return action.reshape(-1, self.action_dim)

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
        """Member ``k`` as a single SAC agent (see :meth:`Population.export_member`); with
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
    def learn(self, env: Any, num_steps: int) -> dict[str, torch.Tensor]:
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
                noise = torch.stack(
                    [
                        torch.rand(shape, device=self.device, generator=g)
                        if r
                        else torch.randn(shape, device=self.device, generator=g)
                        for g, r in zip(self.generators, warmup, strict=True)
                    ]
                )
                x = obs.reshape(K, w, self.obs_dim)
                if all(warmup):
                    action = noise * 2.0 - 1.0
                else:
                    policy = self._sample(x, noise)[0]
                    random = torch.tensor(warmup, device=self.device).reshape(K, 1, 1)
                    action = torch.where(random, noise * 2.0 - 1.0, policy)
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
                mask = torch.tensor(active, device=self.device)
                for _ in range(hp.gradient_steps):
                    step_stats = self._update(active, None if all(active) else mask)
                    stats = {
                        k: torch.where(mask, v, stats.get(k, torch.full_like(v, float("nan"))))
                        for k, v in step_stats.items()
                    }
                    self._updates += active
        self._obs = obs
        out = dict(stats)
        out["reward_mean"] = reward_sum / vector_steps
        return {**out, **self._episodes_stats()}

    def _update(self, active: list[bool], mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """One SAC gradient step of the members where ``active``; ``mask`` is the same as
        a tensor, or None when every member is active."""
        hp = self.hparams[0]
        assert self.buffer is not None
        size, batch = self.buffer_size, hp.batch_size
        idx = self._draw(
            lambda g: torch.randint(0, size, (batch,), device=self.device, generator=g),
            active,
            lambda: torch.zeros(batch, dtype=torch.int64, device=self.device),
        )
        obs, action, reward, next_obs, term = (
            gather_rows(self.buffer[name], idx) for name in BUFFER_FIELDS
        )
        log_alpha = self.params["log_alpha.value"]
        alpha = log_alpha.exp().detach()
        gamma = self._hp32("gamma").unsqueeze(1)

        # ---- critic: soft Bellman target with clipped double Q --------------------------
        with torch.no_grad():
            next_action, next_logp = self._sample(next_obs, self._randn(batch, active))
            q_next = torch.min(
                self._q("q1_target", next_obs, next_action),
                self._q("q2_target", next_obs, next_action),
            )
            target = reward + gamma * (1.0 - term) * (q_next - alpha.unsqueeze(1) * next_logp)
        q1, q2 = self._q("q1", obs, action), self._q("q2", obs, action)
        q_loss = ((q1 - target) ** 2).mean(1) + ((q2 - target) ** 2).mean(1)
        self.optims["critic"].zero_grad()
        q_loss.sum().backward()
        self.optims["critic"].step(mask)

        # ---- actor: maximise min Q − α log π ---------------------------------------------
        new_action, logp = self._sample(obs, self._randn(batch, active))
        q_pi = torch.min(self._q("q1", obs, new_action), self._q("q2", obs, new_action))
        actor_loss = (alpha.unsqueeze(1) * logp - q_pi).mean(1)
        self.optims["actor"].zero_grad()
        actor_loss.sum().backward()
        self.optims["actor"].step(mask)

        # ---- temperature -----------------------------------------------------------------
        if hp.autotune:
            alpha_loss = -(log_alpha.unsqueeze(1) * (logp.detach() + self.target_entropy)).mean(1)
            self.optims["alpha"].zero_grad()
            alpha_loss.sum().backward()
            self.optims["alpha"].step(mask)

        tau = self._hp32("tau")
        if mask is not None:
            tau = torch.where(mask, tau, torch.zeros_like(tau))
        polyak_(self.params, self.params, self._polyak_names, tau)
        return {
            "q_loss": q_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha": alpha,
            "entropy": -logp.detach().mean(1),
        }
