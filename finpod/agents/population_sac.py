"""Batched SAC population: :mod:`finpod.agents.sac` over a member axis.

The collection loop and the stacked replay buffer are
:class:`~finpod.agents.population_offpolicy.OffPolicyPopulation`'s; this module holds the
squashed-Gaussian actor, the twin Q networks and the SAC update, batched.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from finpod.agents.batched import linear, mlp, polyak_
from finpod.agents.nets import LOG_STD_MAX, LOG_STD_MIN, gaussian_log_prob
from finpod.agents.population_offpolicy import OffPolicyPopulation


class SACPopulation(OffPolicyPopulation):
    """K SAC agents (squashed-Gaussian actor, twin Q with targets, tuned α) batched."""

    algorithm = "sac"
    member_fields = ("actor_lr", "critic_lr", "alpha_lr", "gamma", "tau")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._body_depth = len(hp.actor_hidden)
        self._q_depth = len(hp.critic_hidden) + 1
        self.target_entropy = -float(self.action_dim)
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

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        x = self._batch(obs)
        if deterministic:
            action = torch.tanh(self._actor(x)[0])
        else:
            action = self._sample(x, self._randn((x.shape[1], self.action_dim)))[0]
        return action.reshape(-1, self.action_dim)

    def _policy_action(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self._sample(obs, noise)[0]

    def _update(
        self, active: list[bool], mask: torch.Tensor | None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        hp = self.hparams[0]
        batch = hp.batch_size
        obs, action, reward, next_obs, term = self._sample_batch(active)
        log_alpha = self.params["log_alpha.value"]
        alpha = log_alpha.exp().detach()
        gamma = self._hp32("gamma").unsqueeze(1)

        # ---- critic: soft Bellman target with clipped double Q --------------------------
        with torch.no_grad():
            next_action, next_logp = self._sample(
                next_obs, self._randn((batch, self.action_dim), active)
            )
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
        new_action, logp = self._sample(obs, self._randn((batch, self.action_dim), active))
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
        stats = {
            "q_loss": q_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha": alpha,
            "entropy": -logp.detach().mean(1),
        }
        return stats, {}
