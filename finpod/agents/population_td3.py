"""Batched TD3 and DDPG populations: :mod:`finpod.agents.td3` over a member axis.

The collection loop and the stacked replay buffer are
:class:`~finpod.agents.population_offpolicy.OffPolicyPopulation`'s. The actor step (and
the Polyak step of every target network) runs every ``policy_delay`` critic steps of each
member, counted by the member's own update counter as in the single agent, so members
whose counters differ (after an import) take their delayed steps on different updates:
those steps are masked per member.
"""

from __future__ import annotations

from typing import Any

import torch

from finpod.agents.batched import mlp, polyak_
from finpod.agents.population_offpolicy import OffPolicyPopulation


class TD3Population(OffPolicyPopulation):
    """K TD3 agents: deterministic tanh policy, twin critics, target smoothing, delay."""

    algorithm = "td3"
    member_fields = (
        "actor_lr",
        "critic_lr",
        "gamma",
        "tau",
        "exploration_noise",
        "policy_noise",
        "noise_clip",
    )
    #: Two critics with clipped double-Q and target smoothing (False: DDPG).
    twin = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._actor_depth = len(hp.actor_hidden) + 1
        self._q_depth = len(hp.critic_hidden) + 1
        self.critics = ("q1", "q2") if self.twin else ("q1",)
        sources = ("actor", *self.critics)
        self._polyak_names = [
            (f"{net}_target.{key[len(net) + 1 :]}", key)
            for net in sources
            for key in self.net_keys
            if key.startswith(f"{net}.")
        ]

    def _actor(self, name: str, obs: torch.Tensor) -> torch.Tensor:
        """``tanh(mlp(obs))`` of network ``name`` on ``obs (K, B, D)`` → ``(K, B, A)``."""
        return torch.tanh(mlp(obs, self.params, f"{name}.net", self._actor_depth, torch.relu))

    def _q(self, name: str, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q_name(obs (K, B, D), action (K, B, A))`` → ``(K, B)``."""
        x = torch.cat([obs, action], dim=-1)
        return mlp(x, self.params, f"{name}.net", self._q_depth, torch.relu).squeeze(-1)

    def _policy_action(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        sigma = self._hp32("exploration_noise").reshape(-1, 1, 1)
        return (self._actor("actor", obs) + sigma * noise).clamp(-1.0, 1.0)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        x = self._batch(obs)
        if deterministic:
            action = self._actor("actor", x)
        else:
            action = self._policy_action(x, self._randn((x.shape[1], self.action_dim)))
        return action.reshape(-1, self.action_dim)

    def _update(
        self, active: list[bool], mask: torch.Tensor | None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        hp = self.hparams[0]
        obs, action, reward, next_obs, term = self._sample_batch(active)

        # ---- critics ---------------------------------------------------------------------
        with torch.no_grad():
            next_action = self._actor("actor_target", next_obs)
            if self.twin:
                eps = self._randn((hp.batch_size, self.action_dim), active)
                clip = self._hp32("noise_clip").reshape(-1, 1, 1)
                eps = torch.clamp(eps * self._hp32("policy_noise").reshape(-1, 1, 1), -clip, clip)
                next_action = (next_action + eps).clamp(-1.0, 1.0)
            q_next = (
                torch.stack([self._q(f"{q}_target", next_obs, next_action) for q in self.critics])
                .min(0)
                .values
            )
            target = reward + self._hp32("gamma").unsqueeze(1) * (1.0 - term) * q_next
        q_loss = sum(((self._q(q, obs, action) - target) ** 2).mean(1) for q in self.critics)
        self.optims["critic"].zero_grad()
        q_loss.sum().backward()
        self.optims["critic"].step(mask)

        # ---- actor and targets, every policy_delay critic steps of each member ----------
        delay = hp.policy_delay if self.twin else 1
        due = [a and int(u) % delay == 0 for a, u in zip(active, self._updates, strict=True)]
        stats = {"q_loss": q_loss.detach()}
        if not any(due):
            return stats, {}
        due_mask = self._mask(due)
        actor_loss = -self._q(self.critics[0], obs, self._actor("actor", obs)).mean(1)
        self.optims["actor"].zero_grad()
        actor_loss.sum().backward()
        self.optims["actor"].step(None if all(due) else due_mask)
        tau = torch.where(due_mask, self._hp32("tau"), 0.0)
        polyak_(self.params, self.params, self._polyak_names, tau)
        stats["actor_loss"] = actor_loss.detach()
        return stats, {"actor_loss": due_mask}


class DDPGPopulation(TD3Population):
    """K DDPG agents: one critic, no target smoothing, no delay."""

    algorithm = "ddpg"
    member_fields = ("actor_lr", "critic_lr", "gamma", "tau", "exploration_noise")
    twin = False
