"""Soft actor-critic with automatic entropy tuning (Haarnoja et al. 2018, v2), CleanRL-style.

Per gradient step on a replay minibatch (s, a, r, s', d):

    y      = r + γ (1 − d) (min_i Q̄_i(s', ã') − α log π(ã'|s')),   ã' ~ π(·|s')
    L_Q    = Σ_i (Q_i(s, a) − y)²
    L_π    = α log π(ã|s) − min_i Q_i(s, ã),                       ã ~ π(·|s) (reparameterised)
    L_α    = −log α · (log π(ã|s) + H̄),                            H̄ = −action_dim
    Q̄_i   ← (1 − τ) Q̄_i + τ Q_i
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from finpod.agents.base import OffPolicyAgent
from finpod.agents.batched import linear, mlp, polyak_
from finpod.agents.cross_section import (
    CrossSectionalActor,
    TickerLayout,
    ticker_head,
)
from finpod.agents.hparams import OffPolicyParams, check_positive
from finpod.agents.nets import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    SquashedGaussianActor,
    gaussian_log_prob,
)
from finpod.agents.offpolicy import OffPolicyPopulation, add_targets, frozen, q_network


@dataclass
class SACParams(OffPolicyParams):
    """SAC hyperparameters (defaults follow CleanRL's continuous-action SAC)."""

    critic_lr: float = 1e-3
    """Adam step size of the two Q networks."""
    learning_starts: int = 5_000
    """Env steps of uniform random actions before learning starts."""
    alpha_lr: float = 1e-3
    """Adam step size of log α (automatic entropy tuning)."""
    init_alpha: float = 1.0
    """Initial entropy temperature α."""
    autotune: bool = True
    """Tune α towards the target entropy −action_dim; False keeps α = init_alpha."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "alpha_lr", "init_alpha")


class LogAlpha(nn.Module):
    """SAC's entropy temperature, held as log α."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(value)).log())


class SACPopulation(OffPolicyPopulation):
    """K SAC agents (squashed-Gaussian actor, twin Q with targets, tuned α) batched."""

    algorithm = "sac"
    params_cls = SACParams
    member_fields = ("actor_lr", "critic_lr", "alpha_lr", "gamma", "tau")
    lr_fields = {"actor": "actor_lr", "critic": "critic_lr", "alpha": "alpha_lr"}
    frozen_fields = ("actor_hidden", "critic_hidden", "buffer_size", "init_alpha")

    @classmethod
    def build_nets(cls, hp: SACParams, obs_dim: int, action_dim: int) -> dict[str, nn.Module]:
        if hp.net == "cross_sectional":
            layout = TickerLayout.infer(obs_dim, action_dim, hp.ticker_features)
            actor: nn.Module = CrossSectionalActor(layout, hp.actor_hidden, outputs=2)
        else:
            actor = SquashedGaussianActor(obs_dim, action_dim, hp.actor_hidden)
        critic = q_network(hp, obs_dim, action_dim)
        nets: dict[str, nn.Module] = {"actor": actor, "q1": critic(), "q2": critic()}
        add_targets(nets, ("q1", "q2"), critic)
        nets["log_alpha"] = LogAlpha(hp.init_alpha)
        return nets

    @classmethod
    def optim_groups(cls, hp: SACParams) -> dict[str, tuple[tuple[str, ...], float]]:
        return {
            "actor": (("actor",), 1e-8),
            "critic": (("q1", "q2"), 1e-8),
            "alpha": (("log_alpha",), 1e-8),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._body_depth = len(hp.actor_hidden)
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
        if self._layout is not None:
            out = ticker_head(p, "actor", obs, self._layout, self._body_depth)
            mean, raw = out[..., 0], out[..., 1]
        else:
            h = torch.relu(mlp(obs, p, "actor.body", self._body_depth, torch.relu))
            mean = linear(h, p["actor.mean.weight"], p["actor.mean.bias"])
            raw = linear(h, p["actor.log_std.weight"], p["actor.log_std.bias"])
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1.0)
        return mean, log_std

    def _sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action ``(K, B, A)`` and log-probability ``(K, B)`` given
        standard normal ``noise (K, B, A)`` (``SquashedGaussianActor.sample``)."""
        mean, log_std = self._actor(obs)
        pre = mean + noise * log_std.exp()
        action = torch.tanh(pre)
        correction = 2.0 * (math.log(2.0) - pre - nn.functional.softplus(-2.0 * pre))
        return action, gaussian_log_prob(pre, mean, log_std) - correction.sum(-1)

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
        with frozen(self.params, ("q1.", "q2.")):  # through the critics, not into them
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


class SAC(OffPolicyAgent):
    """A single SAC agent: a :class:`SACPopulation` of one."""

    population_cls = SACPopulation
