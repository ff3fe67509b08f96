"""Advantage actor-critic (synchronous A2C, Mnih et al. 2016).

Same rollout and GAE as :mod:`finpod.agents.ppo` (the collection code is shared, over a
member axis); the update is one gradient step per rollout on the whole batch:

    L = −E[log π(a|s) · Â] + c_v · ½ E[(V(s) − R)²] − c_e · H[π]

With ``gae_lambda = 1`` Â is the n-step return minus V(s), the original A2C estimator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from finpod.agents.base import Agent
from finpod.agents.batched import clip_grad_norm_
from finpod.agents.hparams import OnPolicyParams
from finpod.agents.nets import gaussian_entropy, gaussian_log_prob
from finpod.agents.ppo import PPOPopulation


@dataclass
class A2CParams(OnPolicyParams):
    """A2C hyperparameters (defaults follow Stable-Baselines3's A2C, Adam instead of RMSprop)."""

    learning_rate: float = 7e-4
    """Adam step size for actor and critic."""
    horizon: int = 5
    """Rollout length per env between updates (steps)."""
    gae_lambda: float = 1.0
    """λ of generalised advantage estimation (1.0 = n-step returns)."""
    norm_adv: bool = False
    """Normalise advantages over the rollout."""


class A2CPopulation(PPOPopulation):
    """K A2C agents: the PPO population's rollout and GAE, one full-batch step per rollout."""

    algorithm = "a2c"
    params_cls = A2CParams
    member_fields = ("learning_rate", "gamma", "gae_lambda", "ent_coef", "vf_coef", "max_grad_norm")

    def _update(self, b_obs, b_act, b_logp, b_adv, b_ret, b_val) -> dict[str, torch.Tensor]:
        hp = self.hparams[0]
        opt = self.optims["model"]
        mean, log_std = self._policy(b_obs)
        logp = gaussian_log_prob(b_act, mean, log_std)
        entropy = gaussian_entropy(log_std).mean(1)
        adv = b_adv
        if hp.norm_adv:
            adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
        pg_loss = -(logp * adv).mean(1)
        v_loss = 0.5 * ((self._value(b_obs) - b_ret) ** 2).mean(1)
        loss = pg_loss - self._hp32("ent_coef") * entropy + self._hp32("vf_coef") * v_loss
        opt.zero_grad()
        loss.sum().backward()
        clip_grad_norm_([p.grad for p in opt.params], self._hp32("max_grad_norm"))
        opt.step()
        self._updates += 1
        return {
            "policy_loss": pg_loss.detach(),
            "value_loss": v_loss.detach(),
            "entropy": entropy.detach(),
        }


class A2C(Agent):
    """A single A2C agent: an :class:`A2CPopulation` of one."""

    population_cls = A2CPopulation
