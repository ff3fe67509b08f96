"""Advantage actor-critic (synchronous A2C, Mnih et al. 2016).

Same rollout and GAE as :mod:`finpod.agents.ppo` (the collection code is shared); the
update is one gradient step per rollout on the whole batch:

    L = −E[log π(a|s) · Â] + c_v · ½ E[(V(s) − R)²] − c_e · H[π]

With ``gae_lambda = 1`` Â is the n-step return minus V(s), the original A2C estimator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from finpod.agents.base import check_positive, check_unit
from finpod.agents.nets import gaussian_entropy, gaussian_log_prob
from finpod.agents.ppo import PPO, check_net


@dataclass
class A2CParams:
    """A2C hyperparameters (defaults follow Stable-Baselines3's A2C, Adam instead of RMSprop)."""

    learning_rate: float = 7e-4
    """Adam step size for actor and critic."""
    horizon: int = 5
    """Rollout length per env between updates (steps)."""
    gamma: float = 0.99
    """Discount factor per step."""
    gae_lambda: float = 1.0
    """λ of generalised advantage estimation (1.0 = n-step returns)."""
    norm_adv: bool = False
    """Normalise advantages over the rollout."""
    ent_coef: float = 0.0
    """Weight c_e of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight c_v of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the policy MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the value MLP."""
    net: str | None = None
    """Network family: ``"mlp"``, ``"cross_sectional"`` or None (see
    :class:`~finpod.agents.ppo.PPOParams`)."""
    ticker_features: int | None = None
    """Features per ticker in the observation (cross-sectional nets; None = inferred)."""

    def __post_init__(self) -> None:
        check_net(self)
        check_positive(self, "learning_rate", "horizon", "max_grad_norm")
        check_unit(self, "gamma", "gae_lambda")


class A2C(PPO):
    """A2C: PPO's rollout and GAE, one unclipped policy-gradient step per rollout."""

    algorithm = "a2c"

    def _update(self, b_obs, b_act, b_logp, b_adv, b_ret, b_val) -> dict[str, torch.Tensor]:
        hp = self.hparams
        opt = self.optims["model"]
        mean, log_std = self.actor(b_obs)
        logp = gaussian_log_prob(b_act, mean, log_std)
        entropy = gaussian_entropy(log_std).mean()
        adv = b_adv
        if hp.norm_adv:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg_loss = -(logp * adv).mean()
        v_loss = 0.5 * ((self.critic(b_obs) - b_ret) ** 2).mean()
        loss = pg_loss - hp.ent_coef * entropy + hp.vf_coef * v_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(
            [p for g in opt.param_groups for p in g["params"]], hp.max_grad_norm
        )
        opt.step()
        self.updates += 1
        return {
            "policy_loss": pg_loss.detach(),
            "value_loss": v_loss.detach(),
            "entropy": entropy.detach(),
        }
