"""TD3 (Fujimoto et al. 2018) and DDPG (Lillicrap et al. 2016), CleanRL-style.

TD3, per gradient step on a replay minibatch (s, a, r, s', d):

    ã'   = clip(μ̄(s') + clip(ε, −c, c), −1, 1),     ε ~ N(0, σ̃²)      (target smoothing)
    y    = r + γ (1 − d) min_i Q̄_i(s', ã')                            (clipped double Q)
    L_Q  = Σ_i (Q_i(s, a) − y)²
    every ``policy_delay`` steps: L_μ = −Q_1(s, μ(s)); μ̄, Q̄_i ← Polyak(τ)

DDPG is the same loop with one critic, no target smoothing and no delay:
y = r + γ (1 − d) Q̄(s', μ̄(s')). Exploration adds N(0, σ²) noise to μ(s) in both.

Written over a member axis (a single agent is a population of one). The actor step (and
the Polyak step of every target network) runs every ``policy_delay`` critic steps of each
member, counted by the member's own update counter, so members whose counters differ
(after an import) take their delayed steps on different updates: those steps are masked
per member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from finpod.agents.base import OffPolicyAgent
from finpod.agents.batched import mlp, polyak_
from finpod.agents.cross_section import (
    CrossSectionalActor,
    TickerLayout,
    ticker_head,
)
from finpod.agents.hparams import OffPolicyParams, check_positive
from finpod.agents.nets import DeterministicActor
from finpod.agents.offpolicy import OffPolicyPopulation, add_targets, frozen, q_network


@dataclass
class DDPGParams(OffPolicyParams):
    """DDPG hyperparameters (defaults follow CleanRL's DDPG)."""

    exploration_noise: float = 0.1
    """Std σ of the Gaussian noise added to actions while collecting (action units)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.exploration_noise < 0:
            raise ValueError("exploration_noise must be ≥ 0")


@dataclass
class TD3Params(DDPGParams):
    """TD3 hyperparameters (defaults follow CleanRL's TD3)."""

    policy_noise: float = 0.2
    """Std σ̃ of the target-policy smoothing noise."""
    noise_clip: float = 0.5
    """Clip c of the target-policy smoothing noise."""
    policy_delay: int = 2
    """Critic steps per actor (and target) step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "policy_delay")
        if min(self.policy_noise, self.noise_clip) < 0:
            raise ValueError("the noise settings must be ≥ 0")


class TD3Population(OffPolicyPopulation):
    """K TD3 agents: deterministic tanh policy, twin critics, target smoothing, delay."""

    algorithm = "td3"
    params_cls = TD3Params
    lr_fields = {"actor": "actor_lr", "critic": "critic_lr"}
    frozen_fields = ("actor_hidden", "critic_hidden", "buffer_size")
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

    @classmethod
    def build_nets(cls, hp: DDPGParams, obs_dim: int, action_dim: int) -> dict[str, nn.Module]:
        if hp.net == "cross_sectional":
            layout = TickerLayout.infer(obs_dim, action_dim, hp.ticker_features)

            def make_actor() -> nn.Module:
                return CrossSectionalActor(layout, hp.actor_hidden)
        else:

            def make_actor() -> nn.Module:
                return DeterministicActor(obs_dim, action_dim, hp.actor_hidden)

        nets: dict[str, nn.Module] = {"actor": make_actor()}
        add_targets(nets, ("actor",), make_actor)
        critic = q_network(hp, obs_dim, action_dim)
        critics = ("q1", "q2") if cls.twin else ("q1",)
        for name in critics:
            nets[name] = critic()
        add_targets(nets, critics, critic)
        return nets

    @classmethod
    def optim_groups(cls, hp: DDPGParams) -> dict[str, tuple[tuple[str, ...], float]]:
        critics = ("q1", "q2") if cls.twin else ("q1",)
        return {"actor": (("actor",), 1e-8), "critic": (critics, 1e-8)}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._actor_depth = len(hp.actor_hidden) + 1
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
        if self._layout is not None:
            depth = self._actor_depth - 1
            return torch.tanh(ticker_head(self.params, name, obs, self._layout, depth).squeeze(-1))
        return torch.tanh(mlp(obs, self.params, f"{name}.net", self._actor_depth, torch.relu))

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
        with frozen(self.params, (f"{self.critics[0]}.",)):  # through the critic, not into it
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
    params_cls = DDPGParams
    member_fields = ("actor_lr", "critic_lr", "gamma", "tau", "exploration_noise")
    twin = False


class TD3(OffPolicyAgent):
    """A single TD3 agent: a :class:`TD3Population` of one."""

    population_cls = TD3Population


class DDPG(OffPolicyAgent):
    """A single DDPG agent: a :class:`DDPGPopulation` of one."""

    population_cls = DDPGPopulation
