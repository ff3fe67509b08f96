"""TD3 (Fujimoto et al. 2018) and DDPG (Lillicrap et al. 2016), CleanRL-style.

TD3, per gradient step on a replay minibatch (s, a, r, s', d):

    ã'   = clip(μ̄(s') + clip(ε, −c, c), −1, 1),     ε ~ N(0, σ̃²)      (target smoothing)
    y    = r + γ (1 − d) min_i Q̄_i(s', ã')                            (clipped double Q)
    L_Q  = Σ_i (Q_i(s, a) − y)²
    every ``policy_delay`` steps: L_μ = −Q_1(s, μ(s)); μ̄, Q̄_i ← Polyak(τ)

DDPG is the same loop with one critic, no target smoothing and no delay:
y = r + γ (1 − d) Q̄(s', μ̄(s')). Exploration adds N(0, σ²) noise to μ(s) in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from finpod.agents.base import check_positive, check_unit, make_adam
from finpod.agents.nets import DeterministicActor, QCritic
from finpod.agents.offpolicy import OffPolicyAgent, frozen, soft_update


@dataclass
class TD3Params:
    """TD3 hyperparameters (defaults follow CleanRL's TD3)."""

    actor_lr: float = 3e-4
    """Adam step size of the policy."""
    critic_lr: float = 3e-4
    """Adam step size of the Q networks."""
    gamma: float = 0.99
    """Discount factor per step."""
    tau: float = 0.005
    """Polyak rate of the target networks."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 200_000
    """Replay capacity in transitions (float32 obs and next obs: ~1.8 GB at the 95-ticker
    sample's ~1,150 observation floats; the buffer refuses sizes that do not fit)."""
    learning_starts: int = 25_000
    """Env steps of uniform random actions before learning starts."""
    gradient_steps: int = 1
    """Gradient steps per vector env step."""
    exploration_noise: float = 0.1
    """Std σ of the Gaussian noise added to actions while collecting (action units)."""
    policy_noise: float = 0.2
    """Std σ̃ of the target-policy smoothing noise."""
    noise_clip: float = 0.5
    """Clip c of the target-policy smoothing noise."""
    policy_delay: int = 2
    """Critic steps per actor (and target) step."""
    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the policy MLP."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of each Q MLP."""

    def __post_init__(self) -> None:
        check_positive(self, "actor_lr", "critic_lr", "batch_size", "buffer_size")
        check_positive(self, "gradient_steps", "policy_delay")
        check_unit(self, "gamma", "tau")
        if (
            min(self.learning_starts, self.exploration_noise, self.policy_noise, self.noise_clip)
            < 0
        ):
            raise ValueError("learning_starts and the noise settings must be ≥ 0")


@dataclass
class DDPGParams:
    """DDPG hyperparameters (defaults follow CleanRL's DDPG)."""

    actor_lr: float = 3e-4
    """Adam step size of the policy."""
    critic_lr: float = 3e-4
    """Adam step size of the Q network."""
    gamma: float = 0.99
    """Discount factor per step."""
    tau: float = 0.005
    """Polyak rate of the target networks."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 200_000
    """Replay capacity in transitions (float32 obs and next obs: ~1.8 GB at the 95-ticker
    sample's ~1,150 observation floats; the buffer refuses sizes that do not fit)."""
    learning_starts: int = 25_000
    """Env steps of uniform random actions before learning starts."""
    gradient_steps: int = 1
    """Gradient steps per vector env step."""
    exploration_noise: float = 0.1
    """Std σ of the Gaussian noise added to actions while collecting (action units)."""
    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the policy MLP."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the Q MLP."""

    def __post_init__(self) -> None:
        check_positive(self, "actor_lr", "critic_lr", "batch_size", "buffer_size", "gradient_steps")
        check_unit(self, "gamma", "tau")
        if min(self.learning_starts, self.exploration_noise) < 0:
            raise ValueError("learning_starts and exploration_noise must be ≥ 0")


class TD3(OffPolicyAgent):
    """Twin delayed DDPG: deterministic tanh policy, twin critics, target smoothing, delay."""

    algorithm = "td3"
    lr_fields = {"actor": "actor_lr", "critic": "critic_lr"}
    frozen_fields = ("actor_hidden", "critic_hidden", "buffer_size")
    #: Two critics with clipped double-Q and target smoothing (False: DDPG).
    twin = True

    def __init__(
        self, hparams, obs_dim: int, action_dim: int, device: torch.device, seed: int
    ) -> None:
        super().__init__(hparams, obs_dim, action_dim, device, seed)
        hp = hparams
        self.actor = DeterministicActor(obs_dim, action_dim, hp.actor_hidden)
        self.actor_target = DeterministicActor(obs_dim, action_dim, hp.actor_hidden)
        self.actor_target.load_state_dict(self.actor.state_dict())
        critics = ("q1", "q2") if self.twin else ("q1",)
        self.nets = {"actor": self.actor, "actor_target": self.actor_target}
        for name in critics:
            self.nets[name] = QCritic(obs_dim, action_dim, hp.critic_hidden)
        for name in critics:
            target = QCritic(obs_dim, action_dim, hp.critic_hidden)
            target.load_state_dict(self.nets[name].state_dict())
            self.nets[f"{name}_target"] = target
        for name, net in self.nets.items():
            net.to(self.device)
            if name.endswith("_target"):
                net.requires_grad_(False)
        self.critics = [self.nets[n] for n in critics]
        self.critic_targets = [self.nets[f"{n}_target"] for n in critics]
        critic_params = [p for q in self.critics for p in q.parameters()]
        self.optims = {
            "actor": make_adam(list(self.actor.parameters()), hp.actor_lr),
            "critic": make_adam(critic_params, hp.critic_lr),
        }

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        obs = obs.to(self.device, torch.float32)
        return self.actor(obs) if deterministic else self._explore(obs)

    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        mu = self.actor(obs)
        noise = torch.randn(mu.shape, device=self.device, generator=self.generator)
        return (mu + self.hparams.exploration_noise * noise).clamp(-1.0, 1.0)

    def _update(self) -> dict[str, torch.Tensor]:
        hp = self.hparams
        obs, action, reward, next_obs, term = self.buffer.sample(hp.batch_size, self.generator)

        # ---- critics ---------------------------------------------------------------------
        with torch.no_grad():
            next_action = self.actor_target(next_obs)
            if self.twin:
                eps = torch.randn(next_action.shape, device=self.device, generator=self.generator)
                eps = (eps * hp.policy_noise).clamp(-hp.noise_clip, hp.noise_clip)
                next_action = (next_action + eps).clamp(-1.0, 1.0)
            q_next = (
                torch.stack([q(next_obs, next_action) for q in self.critic_targets]).min(0).values
            )
            target = reward + hp.gamma * (1.0 - term) * q_next
        q_loss = sum(((q(obs, action) - target) ** 2).mean() for q in self.critics)
        self.optims["critic"].zero_grad(set_to_none=True)
        q_loss.backward()
        self.optims["critic"].step()

        # ---- actor and targets, every policy_delay critic steps -------------------------
        # self.updates counts gradient steps already taken (host int: no sync).
        delay = hp.policy_delay if self.twin else 1
        if self.updates % delay == 0:
            with frozen(self.critics[0]):  # backward through the critic, not into it
                actor_loss = -self.critics[0](obs, self.actor(obs)).mean()
            self.optims["actor"].zero_grad(set_to_none=True)
            actor_loss.backward()
            self.optims["actor"].step()
            soft_update(
                (self.actor_target, *self.critic_targets), (self.actor, *self.critics), hp.tau
            )
            return {"q_loss": q_loss.detach(), "actor_loss": actor_loss.detach()}
        return {"q_loss": q_loss.detach()}


class DDPG(TD3):
    """Deep deterministic policy gradient: one critic, no target smoothing, no delay."""

    algorithm = "ddpg"
    twin = False
