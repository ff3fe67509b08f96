"""Soft actor-critic with automatic entropy tuning (Haarnoja et al. 2018, v2), CleanRL-style.

Per gradient step on a replay minibatch (s, a, r, s', d):

    y      = r + γ (1 − d) (min_i Q̄_i(s', ã') − α log π(ã'|s')),   ã' ~ π(·|s')
    L_Q    = Σ_i (Q_i(s, a) − y)²
    L_π    = α log π(ã|s) − min_i Q_i(s, ã),                       ã ~ π(·|s) (reparameterised)
    L_α    = −log α · (log π(ã|s) + H̄),                            H̄ = −action_dim
    Q̄_i   ← (1 − τ) Q̄_i + τ Q_i
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from finpod.agents.base import check_positive, check_unit, make_adam
from finpod.agents.nets import QCritic, SquashedGaussianActor
from finpod.agents.offpolicy import OffPolicyAgent, frozen, soft_update


@dataclass
class SACParams:
    """SAC hyperparameters (defaults follow CleanRL's continuous-action SAC)."""

    actor_lr: float = 3e-4
    """Adam step size of the policy."""
    critic_lr: float = 1e-3
    """Adam step size of the two Q networks."""
    alpha_lr: float = 1e-3
    """Adam step size of log α (automatic entropy tuning)."""
    gamma: float = 0.99
    """Discount factor per step."""
    tau: float = 0.005
    """Polyak rate of the target Q networks."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 200_000
    """Replay capacity in transitions (float32 obs and next obs: ~1.8 GB at the 95-ticker
    sample's ~1,150 observation floats; the buffer refuses sizes that do not fit)."""
    learning_starts: int = 5_000
    """Env steps of uniform random actions before learning starts."""
    gradient_steps: int = 1
    """Gradient steps per vector env step."""
    init_alpha: float = 1.0
    """Initial entropy temperature α."""
    autotune: bool = True
    """Tune α towards the target entropy −action_dim; False keeps α = init_alpha."""
    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the policy MLP."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of each Q MLP."""

    def __post_init__(self) -> None:
        check_positive(self, "actor_lr", "critic_lr", "alpha_lr", "batch_size", "buffer_size")
        check_positive(self, "gradient_steps", "init_alpha")
        check_unit(self, "gamma", "tau")
        if self.learning_starts < 0:
            raise ValueError("learning_starts must be ≥ 0")


class _LogAlpha(nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(float(value)).log())


class SAC(OffPolicyAgent):
    """Soft actor-critic: squashed-Gaussian policy, twin Q networks with targets, tuned α."""

    algorithm = "sac"
    lr_fields = {"actor": "actor_lr", "critic": "critic_lr", "alpha": "alpha_lr"}
    frozen_fields = ("actor_hidden", "critic_hidden", "buffer_size", "init_alpha")

    def __init__(
        self, hparams: SACParams, obs_dim: int, action_dim: int, device: torch.device, seed: int
    ) -> None:
        super().__init__(hparams, obs_dim, action_dim, device, seed)
        hp = hparams
        self.actor = SquashedGaussianActor(obs_dim, action_dim, hp.actor_hidden)
        self.q1 = QCritic(obs_dim, action_dim, hp.critic_hidden)
        self.q2 = QCritic(obs_dim, action_dim, hp.critic_hidden)
        self.q1_target = QCritic(obs_dim, action_dim, hp.critic_hidden)
        self.q2_target = QCritic(obs_dim, action_dim, hp.critic_hidden)
        self.q1_target.load_state_dict(self.q1.state_dict())
        self.q2_target.load_state_dict(self.q2.state_dict())
        self.log_alpha = _LogAlpha(hp.init_alpha)
        self.nets = {
            "actor": self.actor,
            "q1": self.q1,
            "q2": self.q2,
            "q1_target": self.q1_target,
            "q2_target": self.q2_target,
            "log_alpha": self.log_alpha,
        }
        for net in self.nets.values():
            net.to(self.device)
        for net in (self.q1_target, self.q2_target):
            net.requires_grad_(False)
        self.optims = {
            "actor": make_adam(list(self.actor.parameters()), hp.actor_lr),
            "critic": make_adam([*self.q1.parameters(), *self.q2.parameters()], hp.critic_lr),
            "alpha": make_adam(list(self.log_alpha.parameters()), hp.alpha_lr),
        }
        self.target_entropy = -float(action_dim)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        obs = obs.to(self.device, torch.float32)
        if deterministic:
            return torch.tanh(self.actor(obs)[0])
        return self.actor.sample(obs, self.generator)[0]

    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor.sample(obs, self.generator)[0]

    def _update(self) -> dict[str, torch.Tensor]:
        hp = self.hparams
        obs, action, reward, next_obs, term = self.buffer.sample(hp.batch_size, self.generator)
        alpha = self.log_alpha.value.exp().detach()

        # ---- critic: soft Bellman target with clipped double Q --------------------------
        with torch.no_grad():
            next_action, next_logp = self.actor.sample(next_obs, self.generator)
            q_next = torch.min(
                self.q1_target(next_obs, next_action), self.q2_target(next_obs, next_action)
            )
            target = reward + hp.gamma * (1.0 - term) * (q_next - alpha * next_logp)
        q1, q2 = self.q1(obs, action), self.q2(obs, action)
        q_loss = ((q1 - target) ** 2).mean() + ((q2 - target) ** 2).mean()
        self.optims["critic"].zero_grad(set_to_none=True)
        q_loss.backward()
        self.optims["critic"].step()

        # ---- actor: maximise min Q − α log π ---------------------------------------------
        new_action, logp = self.actor.sample(obs, self.generator)
        with frozen(self.q1, self.q2):  # backward through the critics, not into them
            q_pi = torch.min(self.q1(obs, new_action), self.q2(obs, new_action))
        actor_loss = (alpha * logp - q_pi).mean()
        self.optims["actor"].zero_grad(set_to_none=True)
        actor_loss.backward()
        self.optims["actor"].step()

        # ---- temperature -----------------------------------------------------------------
        if hp.autotune:
            alpha_loss = -(self.log_alpha.value * (logp.detach() + self.target_entropy)).mean()
            self.optims["alpha"].zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.optims["alpha"].step()

        soft_update((self.q1_target, self.q2_target), (self.q1, self.q2), hp.tau)
        return {
            "q_loss": q_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha": alpha,
            "entropy": -logp.detach().mean(),
        }
