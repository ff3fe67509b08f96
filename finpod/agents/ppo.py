"""PPO with the clipped surrogate objective (Schulman et al. 2017), CleanRL-style, over a
member axis (:mod:`finpod.agents.population`; a single agent is a population of one).

One ``learn`` call = ``ceil(num_steps / (horizon · W))`` iterations of: rollout of
``horizon`` steps of all ``K·W`` envs into ``(horizon, K·W, …)`` storage → per-member
GAE(γ_k, λ_k) → ``update_epochs`` passes of minibatch updates of

    L = −E[min(r·Â, clip(r, 1−ε, 1+ε)·Â)] + c_v · L_V − c_e · H[π],   r = π(a|s) / π_old(a|s)

with optional value clipping and per-minibatch advantage normalisation. Truncated
episodes (time limit, end of data) are bootstrapped with V(final_obs); terminated ones
are not. Minibatch ``j`` of member ``k`` is drawn by member k's generator, and one
backward pass of the summed member losses gives every member its own gradient. With
``target_kl`` a member whose approximate KL passes it stops updating for the rest of the
rollout (one host read per epoch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from finpod.agents import deadline
from finpod.agents.base import Agent
from finpod.agents.batched import clip_grad_norm_, gather_rows, mlp
from finpod.agents.cross_section import (
    CrossSectionalActor,
    CrossSectionalCritic,
    TickerLayout,
    pooled_value,
    ticker_head,
)
from finpod.agents.hparams import OnPolicyParams, check_positive
from finpod.agents.nets import GaussianActor, VCritic, gaussian_entropy, gaussian_log_prob
from finpod.agents.population import Population

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


def on_policy_nets(
    hp: OnPolicyParams, obs_dim: int, action_dim: int
) -> tuple[nn.Module, nn.Module]:
    """The actor and critic of an on-policy agent with hyperparameters ``hp`` (PPO, A2C)."""
    if hp.net == "cross_sectional":
        layout = TickerLayout.infer(obs_dim, action_dim, hp.ticker_features)
        return (
            CrossSectionalActor(layout, hp.actor_hidden, hp.log_std_init),
            CrossSectionalCritic(layout, hp.critic_hidden),
        )
    return (
        GaussianActor(obs_dim, action_dim, hp.actor_hidden, hp.log_std_init),
        VCritic(obs_dim, hp.critic_hidden),
    )


@dataclass
class PPOParams(OnPolicyParams):
    """PPO hyperparameters (defaults follow CleanRL's continuous-action PPO)."""

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
    target_kl: float | None = None
    """Stop an update early when the approximate KL exceeds this (None = never)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "update_epochs", "minibatch_size", "clip_coef")
        if self.minibatches_per_epoch is not None and self.minibatches_per_epoch <= 0:
            raise ValueError("minibatches_per_epoch must be > 0 or None")


class PPOPopulation(Population):
    """K PPO agents (Gaussian policy, separate value network) as one batched model."""

    algorithm = "ppo"
    params_cls = PPOParams
    lr_fields = {"model": "learning_rate"}
    frozen_fields = ("actor_hidden", "critic_hidden", "log_std_init", "net", "ticker_features")
    member_fields = (
        "learning_rate",
        "gamma",
        "gae_lambda",
        "clip_coef",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hp = self.hparams[0]
        self._actor_depth = len(hp.actor_hidden) + 1
        self._critic_depth = len(hp.critic_hidden) + 1
        self._storage_shape: tuple[int, int] | None = None
        self._layout: TickerLayout | None = None
        if hp.net == "cross_sectional":
            self._layout = TickerLayout.infer(self.obs_dim, self.action_dim, hp.ticker_features)

    # ----- networks ---------------------------------------------------------------------
    @classmethod
    def build_nets(cls, hp: OnPolicyParams, obs_dim: int, action_dim: int) -> dict[str, nn.Module]:
        actor, critic = on_policy_nets(hp, obs_dim, action_dim)
        return {"actor": actor, "critic": critic}

    @classmethod
    def optim_groups(cls, hp: OnPolicyParams) -> dict[str, tuple[tuple[str, ...], float]]:
        return {"model": (("actor", "critic"), 1e-5)}

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (K, B, D)`` → mean, log_std ``(K, B, A)``."""
        if self._layout is not None:
            depth = len(self.hparams[0].actor_hidden)
            mean = ticker_head(self.params, "actor", obs, self._layout, depth).squeeze(-1)
            return mean, self.params["actor.log_std"].unsqueeze(1).expand_as(mean)
        mean = mlp(obs, self.params, "actor.mean", self._actor_depth, torch.tanh)
        return mean, self.params["actor.log_std"].unsqueeze(1).expand_as(mean)

    def _value(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs (K, B, D)`` → ``V (K, B)``."""
        if self._layout is not None:
            depth = len(self.hparams[0].critic_hidden)
            return pooled_value(self.params, "critic", obs, self._layout, depth)
        return mlp(obs, self.params, "critic.net", self._critic_depth, torch.tanh).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        x = self._batch(obs)
        mean, log_std = self._policy(x)
        if not deterministic:
            noise = self._randn(tuple(mean.shape[1:]))
            mean = mean + noise * log_std.exp()
        return mean.clamp(-1.0, 1.0).reshape(-1, self.action_dim)

    # ----- learning ---------------------------------------------------------------------
    def _allocate(self, horizon: int, num_envs: int) -> None:
        if self._storage_shape == (horizon, num_envs):
            return
        shape, d = (horizon, num_envs), self.device
        # Observations member-major (K, T, W, D): member k's rollout is one contiguous
        # block, so the value pass and the minibatches read it without a copy.
        w = num_envs // self.size
        self.obs_buf = torch.zeros((self.size, horizon, w, self.obs_dim), device=d)
        self.act_buf = torch.zeros((*shape, self.action_dim), device=d)
        self.logp_buf = torch.zeros(shape, device=d)
        self.rew_buf = torch.zeros(shape, device=d)
        self.done_buf = torch.zeros(shape, device=d)
        self.val_buf = torch.zeros(shape, device=d)
        self._storage_shape = (horizon, num_envs)

    def _per_member(self, buf: torch.Tensor, w: int) -> torch.Tensor:
        """Rollout storage ``(T, K·W, …)`` → ``(K, T·W, …)``, member k's rows in the order
        its single agent flattens ``(T, W, …)``."""
        t = buf.shape[0]
        tail = buf.shape[2:]
        return buf.reshape(t, self.size, w, *tail).transpose(0, 1).reshape(self.size, t * w, *tail)

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, torch.Tensor]:
        hp = self.hparams[0]  # shared fields only
        K, horizon = self.size, hp.horizon
        w = self._envs_per_member(env)
        n_envs = env.num_envs
        self._allocate(horizon, n_envs)
        iterations = max(1, math.ceil(num_steps / (horizon * w)))
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        done = torch.zeros(n_envs, device=self.device)
        log_norm = 0.5 * math.log(2.0 * math.pi) * self.action_dim
        # Per-env discount and GAE factor: member k's values repeated over its W envs
        # (γλ formed in float64 as the single agent's Python floats are).
        gamma = self.hp["gamma"].float().repeat_interleave(w)
        gamma_lambda = (self.hp["gamma"] * self.hp["gae_lambda"]).float().repeat_interleave(w)
        stats: dict[str, torch.Tensor] = {}
        for iteration in range(iterations):
            if iteration and deadline.passed():
                break  # a time-capped pod: stop between rollouts (module finpod.agents.deadline)
            with torch.no_grad():
                for t in range(horizon):
                    self.obs_buf[:, t] = obs.reshape(K, w, self.obs_dim)
                    self.done_buf[t] = done
                    mean, log_std = self._policy(obs.reshape(K, w, self.obs_dim))
                    noise = self._randn((w, self.action_dim))
                    action = (mean + noise * log_std.exp()).reshape(n_envs, self.action_dim)
                    self.act_buf[t] = action
                    self.logp_buf[t] = (
                        -0.5 * (noise * noise).sum(-1) - log_std.sum(-1) - log_norm
                    ).reshape(n_envs)
                    obs, reward, terminated, truncated, info = env.step(action.clamp(-1.0, 1.0))
                    final_obs = info.get("final_obs", obs)
                    obs = obs.to(self.device, torch.float32)
                    reward = reward.to(self.device, torch.float32)
                    truncated = truncated.to(self.device)
                    terminated = terminated.to(self.device)
                    if final_obs is not obs:  # some episode ended: bootstrap time limits
                        f = final_obs.to(self.device, torch.float32).reshape(K, w, self.obs_dim)
                        boot = self._value(f).reshape(n_envs)
                        reward = reward + gamma * boot * (truncated & ~terminated)
                    self.rew_buf[t] = reward
                    done = (terminated | truncated).float()
                    self._episodes_track(reward, done)
                self._env_steps += horizon * w
                self.collected_steps += horizon * n_envs
                # Values of the whole rollout, member-major, in chunks of bounded rows.
                flat_obs = self.obs_buf.view(K, horizon * w, self.obs_dim)
                vals = torch.empty(flat_obs.shape[:2], device=self.device)
                chunk = max(1, VALUE_CHUNK // K)
                for i in range(0, flat_obs.shape[1], chunk):
                    vals[:, i : i + chunk] = self._value(flat_obs[:, i : i + chunk])
                self.val_buf.copy_(
                    vals.reshape(K, horizon, w).transpose(0, 1).reshape(horizon, n_envs)
                )
                next_value = self._value(obs.reshape(K, w, self.obs_dim)).reshape(n_envs)
                adv = torch.zeros_like(self.rew_buf)
                last = torch.zeros(n_envs, device=self.device)
                for t in reversed(range(horizon)):
                    if t == horizon - 1:
                        nonterminal, nv = 1.0 - done, next_value
                    else:
                        nonterminal, nv = 1.0 - self.done_buf[t + 1], self.val_buf[t + 1]
                    delta = self.rew_buf[t] + gamma * nv * nonterminal - self.val_buf[t]
                    last = delta + gamma_lambda * nonterminal * last
                    adv[t] = last
                ret = adv + self.val_buf
            stats = self._update(
                flat_obs,
                self._per_member(self.act_buf, w),
                self._per_member(self.logp_buf, w),
                self._per_member(adv, w),
                self._per_member(ret, w),
                self._per_member(self.val_buf, w),
            )
        self._obs = obs
        out = dict(stats)
        # Per member, over the last rollout, as its single agent computes it.
        out["explained_variance"] = explained_variance(
            self._per_member(self.val_buf, w), self._per_member(ret, w)
        )
        out["reward_mean"] = self.rew_buf.reshape(horizon, K, w).mean(dim=(0, 2))
        return {**out, **self._episodes_stats()}

    def _losses(
        self, obs, act, logp, adv, ret, val, clip: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's loss per member ``(K,)`` on minibatch tensors ``(K, mb, …)``."""
        hp = self.hparams[0]
        mean, log_std = self._policy(obs)
        new_logp = gaussian_log_prob(act, mean, log_std)
        entropy = gaussian_entropy(log_std).mean(1)
        log_ratio = new_logp - logp
        ratio = log_ratio.exp()
        if hp.norm_adv:
            adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
        lo = (1.0 - self.hp["clip_coef"]).float().unsqueeze(1)
        hi = (1.0 + self.hp["clip_coef"]).float().unsqueeze(1)
        c = clip.unsqueeze(1)
        pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, lo, hi)).mean(1)
        new_v = self._value(obs)
        if hp.clip_vloss:
            v_clip = val + torch.clamp(new_v - val, -c, c)
            v_loss = 0.5 * torch.max((new_v - ret) ** 2, (v_clip - ret) ** 2).mean(1)
        else:
            v_loss = 0.5 * ((new_v - ret) ** 2).mean(1)
        loss = pg_loss - self._hp32("ent_coef") * entropy + self._hp32("vf_coef") * v_loss
        with torch.no_grad():
            approx_kl = ((ratio - 1.0) - log_ratio).mean(1)
            clip_frac = ((ratio - 1.0).abs() > c).float().mean(1)
        return loss, {
            "policy_loss": pg_loss.detach(),
            "value_loss": v_loss.detach(),
            "entropy": entropy.detach(),
            "approx_kl": approx_kl,
            "clip_frac": clip_frac,
        }

    def _update(self, b_obs, b_act, b_logp, b_adv, b_ret, b_val) -> dict[str, torch.Tensor]:
        """``update_epochs`` passes of minibatch steps; data ``(K, n, …)`` member-major."""
        hp = self.hparams[0]
        K, n = self.size, b_obs.shape[1]
        mb = min(hp.minibatch_size, n)
        opt = self.optims["model"]
        clip = self._hp32("clip_coef")
        max_norm = self._hp32("max_grad_norm")
        shape = (hp.minibatches_per_epoch or 1, mb)
        active = [True] * K
        stats: dict[str, torch.Tensor] = {}
        steps_taken = 0
        for _ in range(hp.update_epochs):
            if not any(active) or (steps_taken and deadline.passed()):
                break
            mask = None if all(active) else self._mask(active)
            if hp.minibatches_per_epoch is None:
                perm = self._randperm(n, active)
                batches = [perm[:, i : i + mb] for i in range(0, n - mb + 1, mb)]
            else:
                idx = self._randint(n, shape, active)
                batches = list(idx.unbind(1))
            for ids in batches:
                if steps_taken and deadline.passed():
                    break  # a time-capped pod: the update so far stands
                loss, step_stats = self._losses(
                    gather_rows(b_obs, ids),
                    gather_rows(b_act, ids),
                    gather_rows(b_logp, ids),
                    gather_rows(b_adv, ids),
                    gather_rows(b_ret, ids),
                    gather_rows(b_val, ids),
                    clip,
                )
                opt.zero_grad()
                loss.sum().backward()
                clip_grad_norm_([p.grad for p in opt.params], max_norm)
                opt.step(mask)
                self._updates += active
                steps_taken += 1
            if mask is None or not stats:
                stats = step_stats
            else:
                stats = {k: torch.where(mask, v, stats[k]) for k, v in step_stats.items()}
            if hp.target_kl is not None:
                over = (step_stats["approx_kl"] > hp.target_kl).tolist()
                active = [a and not o for a, o in zip(active, over, strict=True)]
        return stats


class PPO(Agent):
    """A single PPO agent: a :class:`PPOPopulation` of one."""

    population_cls = PPOPopulation
