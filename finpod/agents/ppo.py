"""PPO with the clipped surrogate objective (Schulman et al. 2017), CleanRL-style.

One ``learn`` call = ``ceil(num_steps / (horizon · num_envs))`` iterations of:
rollout of ``horizon`` steps over all envs into preallocated ``(horizon, num_envs, …)``
tensors → GAE(γ, λ) → ``update_epochs`` passes of minibatch updates of

    L = −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)] + c_v · L_V − c_e · H[π],   r = π(a|s) / π_old(a|s)

with optional value clipping and per-minibatch advantage normalisation. Truncated
episodes (time limit, end of data) are bootstrapped with V(final_obs); terminated ones
are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from finpod.agents.base import Agent, check_positive, check_unit, make_adam
from finpod.agents.cross_section import (
    NETS,
    CrossSectionalActor,
    CrossSectionalCritic,
    TickerLayout,
)
from finpod.agents.nets import GaussianActor, VCritic, gaussian_entropy, gaussian_log_prob

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv

#: Rows per critic call when valuing a whole rollout (bounds the activations' memory).
VALUE_CHUNK = 65_536


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 − Var(returns − values) / Var(returns) over the last axis: how much of the
    rollout's return targets the critic's values explain (1 perfect, 0 no better than a
    constant, < 0 worse). Constant returns (nothing to explain) give 0. ``(..., n)`` →
    ``(...)``."""
    var = returns.var(-1, unbiased=False)
    ev = 1.0 - (returns - values).var(-1, unbiased=False) / var
    return torch.where(var > 0, ev, torch.zeros_like(ev))


def check_net(hp: object) -> None:
    """``ValueError`` unless ``hp.net`` names a network family of :data:`NETS`."""
    if hp.net is not None and hp.net not in NETS:  # type: ignore[attr-defined]
        raise ValueError(f"net must be one of {', '.join(NETS)}, got {hp.net!r}")  # type: ignore[attr-defined]
    tf = hp.ticker_features  # type: ignore[attr-defined]
    if tf is not None and tf < 0:
        raise ValueError(f"ticker_features must be ≥ 0, got {tf!r}")


def on_policy_nets(hp: object, obs_dim: int, action_dim: int) -> tuple[nn.Module, nn.Module]:
    """The actor and critic of an on-policy agent with hyperparameters ``hp`` (PPO, A2C)."""
    if hp.net == "cross_sectional":  # type: ignore[attr-defined]
        layout = TickerLayout.infer(obs_dim, action_dim, hp.ticker_features)  # type: ignore[attr-defined]
        return (
            CrossSectionalActor(layout, hp.actor_hidden, hp.log_std_init),  # type: ignore[attr-defined]
            CrossSectionalCritic(layout, hp.critic_hidden),  # type: ignore[attr-defined]
        )
    return (
        GaussianActor(obs_dim, action_dim, hp.actor_hidden, hp.log_std_init),  # type: ignore[attr-defined]
        VCritic(obs_dim, hp.critic_hidden),  # type: ignore[attr-defined]
    )


@dataclass
class PPOParams:
    """PPO hyperparameters (defaults follow CleanRL's continuous-action PPO)."""

    learning_rate: float = 3e-4
    """Adam step size for actor and critic."""
    horizon: int = 128
    """Rollout length per env between updates (steps)."""
    gamma: float = 0.99
    """Discount factor per step."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation."""
    update_epochs: int = 10
    """Passes over each rollout."""
    minibatch_size: int = 64
    """Transitions per gradient step."""
    minibatches_per_epoch: int | None = None
    """Gradient steps per epoch on random minibatches; None = one full pass over the rollout."""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective."""
    clip_vloss: bool = True
    """Clip the value update around the rollout's value estimates (same ε)."""
    norm_adv: bool = True
    """Normalise advantages within each minibatch."""
    ent_coef: float = 0.0
    """Weight c_e of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight c_v of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = None
    """Stop an update early when the approximate KL exceeds this (None = never)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the policy MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the value MLP."""
    net: str | None = None
    """Network family: ``"mlp"`` (one MLP over the whole observation) or
    ``"cross_sectional"`` (one network shared by every ticker, with pooled context; the
    hidden widths are then the per-ticker encoder's, see :mod:`finpod.agents.cross_section`).
    None: cross-sectional when built for a benchmark-relative env, else the MLP."""
    ticker_features: int | None = None
    """Features per ticker in the observation (cross-sectional nets; None = read from the
    observation's size, set automatically from the env when an agent is built for one)."""

    def __post_init__(self) -> None:
        check_net(self)
        check_positive(self, "learning_rate", "horizon", "update_epochs", "minibatch_size")
        check_positive(self, "clip_coef", "max_grad_norm")
        check_unit(self, "gamma", "gae_lambda")
        if self.minibatches_per_epoch is not None and self.minibatches_per_epoch <= 0:
            raise ValueError("minibatches_per_epoch must be > 0 or None")


class PPO(Agent):
    """Proximal policy optimisation with a Gaussian policy and a separate value network."""

    algorithm = "ppo"
    lr_fields = {"model": "learning_rate"}
    frozen_fields = ("actor_hidden", "critic_hidden", "log_std_init", "net", "ticker_features")

    def __init__(
        self, hparams: PPOParams, obs_dim: int, action_dim: int, device: torch.device, seed: int
    ) -> None:
        super().__init__(hparams, obs_dim, action_dim, device, seed)
        hp = hparams
        self.actor, self.critic = on_policy_nets(hp, obs_dim, action_dim)
        self.actor.to(self.device)
        self.critic.to(self.device)
        self.nets = {"actor": self.actor, "critic": self.critic}
        params = [*self.actor.parameters(), *self.critic.parameters()]
        self.optims = {"model": make_adam(params, hp.learning_rate, eps=1e-5)}
        self._storage_shape: tuple[int, int] | None = None

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        mean, log_std = self.actor(obs.to(self.device, torch.float32))
        if deterministic:
            return mean.clamp(-1.0, 1.0)
        noise = torch.randn(mean.shape, device=self.device, generator=self.generator)
        return (mean + noise * log_std.exp()).clamp(-1.0, 1.0)

    def _allocate(self, horizon: int, num_envs: int) -> None:
        if self._storage_shape == (horizon, num_envs):
            return
        shape, d = (horizon, num_envs), self.device
        self.obs_buf = torch.zeros((*shape, self.obs_dim), device=d)
        self.act_buf = torch.zeros((*shape, self.action_dim), device=d)
        self.logp_buf = torch.zeros(shape, device=d)
        self.rew_buf = torch.zeros(shape, device=d)
        self.done_buf = torch.zeros(shape, device=d)
        self.val_buf = torch.zeros(shape, device=d)
        self._storage_shape = (horizon, num_envs)

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, float]:
        hp = self.hparams
        n_envs, horizon = env.num_envs, hp.horizon
        self._allocate(horizon, n_envs)
        iterations = max(1, math.ceil(num_steps / (horizon * n_envs)))
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        done = torch.zeros(n_envs, device=self.device)
        log_norm = 0.5 * math.log(2.0 * math.pi) * self.action_dim
        for _ in range(iterations):
            # ---- rollout: horizon steps of all envs, no host sync -----------------------
            with torch.no_grad():
                for t in range(horizon):
                    self.obs_buf[t] = obs
                    self.done_buf[t] = done
                    mean, log_std = self.actor(obs)
                    noise = torch.randn(mean.shape, device=self.device, generator=self.generator)
                    action = mean + noise * log_std.exp()
                    self.act_buf[t] = action
                    # log N(a; μ, σ) with a = μ + σ·ε, written with ε directly.
                    self.logp_buf[t] = -0.5 * (noise * noise).sum(-1) - log_std.sum(-1) - log_norm
                    obs, reward, terminated, truncated, info = env.step(action.clamp(-1.0, 1.0))
                    final_obs = info.get("final_obs", obs)
                    obs = obs.to(self.device, torch.float32)  # no-op (same object) if already there
                    reward = reward.to(self.device, torch.float32)
                    truncated = truncated.to(self.device)
                    terminated = terminated.to(self.device)
                    # Time-limit ends are not real ends: bootstrap with V(last obs). An env
                    # returns final_obs as the very obs tensor when no episode ended, which
                    # skips the extra critic pass without a device sync.
                    if final_obs is not obs:
                        boot = self.critic(final_obs.to(self.device, torch.float32))
                        reward = reward + hp.gamma * boot * (truncated & ~terminated)
                    self.rew_buf[t] = reward
                    ended = terminated | truncated
                    done = ended.float()
                    self._episodes_track(reward, done)
                self.env_steps += horizon * n_envs
                # Values of the whole rollout in a few large batches (cheaper than per step).
                flat_obs = self.obs_buf.reshape(-1, self.obs_dim)
                flat_val = self.val_buf.reshape(-1)
                for i in range(0, flat_obs.shape[0], VALUE_CHUNK):
                    flat_val[i : i + VALUE_CHUNK] = self.critic(flat_obs[i : i + VALUE_CHUNK])

                # ---- GAE(γ, λ) -----------------------------------------------------------
                next_value = self.critic(obs)
                adv = torch.zeros_like(self.rew_buf)
                last = torch.zeros(n_envs, device=self.device)
                for t in reversed(range(horizon)):
                    if t == horizon - 1:
                        nonterminal, nv = 1.0 - done, next_value
                    else:
                        nonterminal, nv = 1.0 - self.done_buf[t + 1], self.val_buf[t + 1]
                    delta = self.rew_buf[t] + hp.gamma * nv * nonterminal - self.val_buf[t]
                    last = delta + hp.gamma * hp.gae_lambda * nonterminal * last
                    adv[t] = last
                ret = adv + self.val_buf

            # ---- minibatch epochs --------------------------------------------------------
            stats = self._update(
                self.obs_buf.reshape(-1, self.obs_dim),
                self.act_buf.reshape(-1, self.action_dim),
                self.logp_buf.reshape(-1),
                adv.reshape(-1),
                ret.reshape(-1),
                self.val_buf.reshape(-1),
            )
        # The next learn() call continues the episodes in flight from this observation.
        self._obs = obs
        out = {k: float(v) for k, v in stats.items()}
        ev = explained_variance(self.val_buf.reshape(-1), ret.reshape(-1))
        out["explained_variance"] = float(ev)
        out["reward_mean"] = float(self.rew_buf.mean())
        return {**out, **self._episodes_stats()}

    def _update(self, b_obs, b_act, b_logp, b_adv, b_ret, b_val) -> dict[str, torch.Tensor]:
        hp = self.hparams
        opt = self.optims["model"]
        n = b_obs.shape[0]
        mb = min(hp.minibatch_size, n)
        params = [p for g in opt.param_groups for p in g["params"]]
        stats: dict[str, torch.Tensor] = {}
        for _ in range(hp.update_epochs):
            if hp.minibatches_per_epoch is None:
                perm = torch.randperm(n, device=self.device, generator=self.generator)
                batches = [perm[i : i + mb] for i in range(0, n - mb + 1, mb)]
            else:
                idx = torch.randint(
                    0,
                    n,
                    (hp.minibatches_per_epoch, mb),
                    device=self.device,
                    generator=self.generator,
                )
                batches = list(idx)
            for ids in batches:
                mean, log_std = self.actor(b_obs[ids])
                new_logp = gaussian_log_prob(b_act[ids], mean, log_std)
                entropy = gaussian_entropy(log_std).mean()
                log_ratio = new_logp - b_logp[ids]
                ratio = log_ratio.exp()
                adv = b_adv[ids]
                if hp.norm_adv:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1.0 - hp.clip_coef, 1.0 + hp.clip_coef)
                ).mean()
                new_v = self.critic(b_obs[ids])
                if hp.clip_vloss:
                    v_clip = b_val[ids] + (new_v - b_val[ids]).clamp(-hp.clip_coef, hp.clip_coef)
                    v_loss = (
                        0.5
                        * torch.max((new_v - b_ret[ids]) ** 2, (v_clip - b_ret[ids]) ** 2).mean()
                    )
                else:
                    v_loss = 0.5 * ((new_v - b_ret[ids]) ** 2).mean()
                loss = pg_loss - hp.ent_coef * entropy + hp.vf_coef * v_loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
                opt.step()
                self.updates += 1
                with torch.no_grad():
                    approx_kl = ((ratio - 1.0) - log_ratio).mean()
            stats = {
                "policy_loss": pg_loss.detach(),
                "value_loss": v_loss.detach(),
                "entropy": entropy.detach(),
                "approx_kl": approx_kl,
                "clip_frac": ((ratio - 1.0).abs() > hp.clip_coef).float().mean().detach(),
            }
            if hp.target_kl is not None and float(approx_kl) > hp.target_kl:
                break
        return stats
