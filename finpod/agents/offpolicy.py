"""The off-policy loop (SAC, TD3, DDPG), over a member axis; a single agent is a population
of one (:class:`~finpod.agents.base.OffPolicyAgent`).

Each vector step: every member acts on its ``W`` envs (uniform random actions until its
own ``learning_starts`` env steps, its policy's exploration afterwards) → one env step of
all ``K·W`` envs → each member's transitions go to its own slice of a stacked replay
buffer ``(K, capacity, …)`` (one shared write position: every member adds ``W`` rows a
step) → ``gradient_steps`` batched updates. A member that may not update yet (warm-up) is
masked: its weights, Adam state and target networks stay untouched and its generator
draws nothing. The algorithm supplies ``_policy_action`` and ``_update``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from finpod.agents import deadline
from finpod.agents.batched import gather_rows, mlp_on_pair
from finpod.agents.buffer import FIELDS, check_buffer_fits, replay_buffer_nbytes
from finpod.agents.cross_section import CrossSectionalCritic, TickerLayout, pooled_value
from finpod.agents.nets import QCritic
from finpod.agents.population import Population
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv


@dataclass(frozen=True)
class Ring:
    """One member's replay ring (views of the stacked buffer): rows ``[0, size)`` are
    filled, the next write goes to ``pos``; ``terminated`` is 1.0 where the episode truly
    ended (no bootstrap)."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor
    size: int
    pos: int
    capacity: int


#: Names of the stacked replay-buffer fields, ``(K, capacity, …)``.
BUFFER_FIELDS = FIELDS


class OffPolicyPopulation(Population):
    """Base of replay-buffer populations; subclasses give ``_policy_action`` and ``_update``.

    Replay buffer: member k's transitions are ``buffer[name][k, :buffer_size]``, written
    at the shared ring position ``buffer_pos``. :meth:`import_member` keeps member k's
    slice (its transitions remain valid off-policy data for the imported weights).
    """

    #: Precision of the matrix products inside gradient updates: ``None`` (float32, the
    #: default) or ``torch.bfloat16``, run under ``torch.autocast`` (about 1.7× faster
    #: SAC updates on CPUs with AVX-512 BF16 or AMX, and on GPUs). Parameters, optimizer
    #: moments, losses and the replay buffer stay float32; acting stays float32. A runtime
    #: setting, not a hyperparameter: it is not in the state dict.
    update_autocast: torch.dtype | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffer: dict[str, torch.Tensor] | None = None
        self.buffer_pos = 0
        self.buffer_size = 0
        hp = self.hparams[0]
        self._q_depth = len(hp.critic_hidden) + 1
        #: Cross-sectional networks' reading of the observation (None: flat MLPs).
        self._layout: TickerLayout | None = None
        if hp.net == "cross_sectional":
            self._layout = TickerLayout.infer(self.obs_dim, self.action_dim, hp.ticker_features)

    def _q(self, name: str, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q_name(obs (K, B, D), action (K, B, A))`` → ``(K, B)``."""
        if self._layout is not None:
            depth = self._q_depth - 1
            return pooled_value(self.params, name, obs, self._layout, depth, action)
        q = mlp_on_pair(obs, action, self.params, f"{name}.net", self._q_depth, torch.relu)
        return q.squeeze(-1)

    # ----- per algorithm ----------------------------------------------------------------
    def _policy_action(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Exploration action ``(K, W, A)`` in ``[-1, 1]`` given standard normal ``noise``."""
        raise NotImplementedError

    def _update(
        self, active: list[bool], mask: torch.Tensor | None
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """One gradient step of the members where ``active`` (``mask``: the same as a
        tensor, None when all are). Returns the statistics ``(K,)`` and, for statistics
        only some of those members produced (TD3's delayed actor loss), their masks."""
        raise NotImplementedError

    def _draw_exploration(self, shape: tuple[int, ...], warmup: list[bool]) -> torch.Tensor:
        """Member k's uniform draw if it is in its warm-up, else its standard normal one."""
        d = self.device
        return torch.stack(
            [
                torch.rand(shape, device=d, generator=g)
                if r
                else torch.randn(shape, device=d, generator=g)
                for g, r in zip(self.generators, warmup, strict=True)
            ]
        )

    def _sample_batch(self, active: list[bool]) -> tuple[torch.Tensor, ...]:
        """``batch_size`` transitions per member, drawn as its single agent's buffer does:
        ``(obs, action, reward, next_obs, terminated)``, each ``(K, batch, …)``."""
        assert self.buffer is not None
        idx = self._randint(self.buffer_size, (self.hparams[0].batch_size,), active)
        return tuple(gather_rows(self.buffer[name], idx) for name in BUFFER_FIELDS)

    # ----- replay buffer ----------------------------------------------------------------
    def _ensure_buffer(self, w: int) -> None:
        capacity = max(int(self.hparams[0].buffer_size), w)
        if self.buffer is not None and self.buffer["reward"].shape[1] >= w:
            return
        check_buffer_fits(self.size * capacity, self.obs_dim, self.action_dim, self.device)
        K, d = self.size, self.device
        self.buffer = {
            "obs": torch.zeros((K, capacity, self.obs_dim), device=d),
            "action": torch.zeros((K, capacity, self.action_dim), device=d),
            "reward": torch.zeros((K, capacity), device=d),
            "next_obs": torch.zeros((K, capacity, self.obs_dim), device=d),
            "terminated": torch.zeros((K, capacity), device=d),
        }
        self.buffer_pos = self.buffer_size = 0

    def _add(self, rows: dict[str, torch.Tensor]) -> None:
        """Append ``W`` transitions per member (``rows[name]`` ``(K, W, …)``)."""
        assert self.buffer is not None
        capacity = self.buffer["reward"].shape[1]
        w = rows["reward"].shape[1]
        idx = (torch.arange(w, device=self.device) + self.buffer_pos) % capacity
        for name in BUFFER_FIELDS:
            self.buffer[name][:, idx] = rows[name]
        self.buffer_pos = (self.buffer_pos + w) % capacity
        self.buffer_size = min(self.buffer_size + w, capacity)

    def export_buffer(self, k: int) -> dict[str, np.ndarray]:
        """Member ``k``'s replay rows, oldest first, in the format of
        :meth:`~finpod.agents.offpolicy.OffPolicyAgent.export_buffer` (host arrays)."""
        k = self._member(k)
        if self.buffer is None:
            return {
                "obs": np.zeros((0, self.obs_dim), np.float32),
                "action": np.zeros((0, self.action_dim), np.float32),
                "reward": np.zeros(0, np.float32),
                "next_obs": np.zeros((0, self.obs_dim), np.float32),
                "terminated": np.zeros(0, bool),
            }
        capacity = self.buffer["reward"].shape[1]
        start = (self.buffer_pos - self.buffer_size) % capacity
        idx = (torch.arange(self.buffer_size, device=self.device) + start) % capacity
        out = {}
        for name in BUFFER_FIELDS:
            rows = self.buffer[name][k, idx]
            if name == "terminated":
                rows = rows > 0.5
            out[name] = np.ascontiguousarray(rows.cpu().numpy())
        return out

    def import_buffer(self, data: dict[str, np.ndarray]) -> None:
        """Replace the replay buffer of a population of one with ``data`` (what
        :meth:`export_buffer` returned): oldest row first; the newest ``buffer_size`` rows
        are kept. Sizes that do not fit this population raise :class:`FinpodError`."""
        if self.size != 1:
            raise FinpodError(
                f"a replay buffer is imported into a single agent, not a population of {self.size}",
                "import it into the exported member's agent",
            )
        missing = [name for name in FIELDS if name not in data]
        if missing:
            raise FinpodError(
                f"replay buffer data lacks {missing[0]!r}",
                "pass what export_buffer() returned",
            )
        n = int(np.asarray(data["reward"]).shape[0])
        widths = {"obs": self.obs_dim, "next_obs": self.obs_dim, "action": self.action_dim}
        for name in FIELDS:
            shape = tuple(np.asarray(data[name]).shape)
            want = (n, widths[name]) if name in widths else (n,)
            if shape != want:
                what = "observation" if "obs" in name else name
                raise FinpodError(
                    f"replay buffer {name!r} has shape {shape} but this {self.algorithm} agent "
                    f"expects {want} ({what} size {widths.get(name, 1)})",
                    "inherit buffers only between agents of the same env and universe",
                )
        self.buffer = None
        self._ensure_buffer(1)
        assert self.buffer is not None
        capacity = self.buffer["reward"].shape[1]
        keep = min(n, capacity)
        for name in FIELDS:
            rows = torch.as_tensor(np.asarray(data[name])[n - keep :], device=self.device)
            self.buffer[name][0, :keep] = rows.float()
        self.buffer_pos, self.buffer_size = keep % capacity, keep

    def ring_state(self) -> dict[str, torch.Tensor] | None:
        """A population of one's ring as stored: filled rows in slot order, write position
        and capacity (checkpoints keep it, so resumed training continues exactly)."""
        if self.buffer is None:
            return None
        out = {name: self.buffer[name][0, : self.buffer_size].detach() for name in FIELDS}
        out["pos"] = torch.tensor(self.buffer_pos, dtype=torch.int64)
        out["capacity"] = torch.tensor(self.buffer["reward"].shape[1], dtype=torch.int64)
        return out

    def load_ring_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`ring_state` (rows, write position and capacity) exactly."""
        capacity, size = int(state["capacity"]), int(state["obs"].shape[0])
        check_buffer_fits(capacity, self.obs_dim, self.action_dim, self.device)
        self.buffer = {
            "obs": torch.zeros((1, capacity, self.obs_dim), device=self.device),
            "action": torch.zeros((1, capacity, self.action_dim), device=self.device),
            "reward": torch.zeros((1, capacity), device=self.device),
            "next_obs": torch.zeros((1, capacity, self.obs_dim), device=self.device),
            "terminated": torch.zeros((1, capacity), device=self.device),
        }
        for name in FIELDS:
            self.buffer[name][0, :size] = state[name].to(self.device).float()
        self.buffer_pos, self.buffer_size = int(state["pos"]), size

    def member_ring(self, k: int) -> Ring | None:
        """Member ``k``'s replay rows as views, in slot order (None before the first
        ``learn``)."""
        k = self._member(k)
        if self.buffer is None:
            return None
        b = self.buffer
        return Ring(
            *(b[name][k] for name in FIELDS),
            size=self.buffer_size,
            pos=self.buffer_pos,
            capacity=b["reward"].shape[1],
        )

    def buffer_nbytes(self) -> int:
        """Bytes the replay buffer occupies at capacity, allocated or not."""
        if self.buffer is not None:
            capacity = self.buffer["reward"].shape[1]
        else:
            capacity = int(self.hparams[0].buffer_size)
        return self.size * replay_buffer_nbytes(capacity, self.obs_dim, self.action_dim)

    def export_member(self, k: int, *, include_buffer: bool = False) -> Any:
        """Member ``k`` as a single agent (see :meth:`Population.export_member`); with
        ``include_buffer`` the agent also gets member k's replay rows."""
        agent = super().export_member(k)
        if include_buffer and self.buffer is not None:
            agent.import_buffer(self.export_buffer(k))
        return agent

    def clear_buffer(self) -> None:
        """Drop the replay buffer of every member (the next ``learn`` starts empty ones)."""
        self.buffer = None
        self.buffer_pos = self.buffer_size = 0

    # ----- learning ---------------------------------------------------------------------
    def learn(self, env: VecEnv, num_steps: int) -> dict[str, torch.Tensor]:
        hp = self.hparams[0]  # shared fields only
        K = self.size
        w = self._envs_per_member(env)
        n_envs = env.num_envs
        self._ensure_buffer(w)
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        stats: dict[str, torch.Tensor] = {}
        reward_sum = torch.zeros(K, device=self.device)
        vector_steps = max(1, math.ceil(num_steps / w))
        shape = (w, self.action_dim)
        done = 0
        for _ in range(vector_steps):
            if done and deadline.passed():
                break  # a time-capped pod: stop between vector steps (finpod.agents.deadline)
            done += 1
            with torch.no_grad():
                warmup = (self._env_steps < hp.learning_starts).tolist()
                x = obs.reshape(K, w, self.obs_dim)
                if self.shared_rng is not None:
                    uniform = self._rand(shape)
                    noise = uniform if all(warmup) else self._randn(shape)
                else:  # each member draws what its single agent draws
                    noise = self._draw_exploration(shape, warmup)
                    uniform = noise
                if all(warmup):
                    action = uniform * 2.0 - 1.0
                else:
                    policy = self._policy_action(x, noise)
                    random = self._mask(warmup).reshape(K, 1, 1)
                    action = torch.where(random, uniform * 2.0 - 1.0, policy)
                action = action.reshape(n_envs, self.action_dim)
                next_obs, reward, terminated, truncated, info = env.step(action)
                next_obs = next_obs.to(self.device, torch.float32)
                reward = reward.to(self.device, torch.float32)
                terminated = terminated.to(self.device)
                final = info.get("final_obs", next_obs).to(self.device, torch.float32)
                self._add(
                    {
                        "obs": x,
                        "action": action.reshape(K, w, self.action_dim),
                        "reward": reward.reshape(K, w),
                        "next_obs": final.reshape(K, w, self.obs_dim),
                        "terminated": terminated.float().reshape(K, w),
                    }
                )
                self._episodes_track(reward, (terminated | truncated.to(self.device)).float())
                reward_sum += reward.reshape(K, w).mean(1)
            obs = next_obs
            self._env_steps += w
            self.collected_steps += n_envs
            can = self.buffer_size >= hp.batch_size
            active = [can and bool(s >= hp.learning_starts) for s in self._env_steps]
            if any(active):
                mask = self._mask(active)
                with self._update_precision():
                    for _ in range(hp.gradient_steps):
                        step_stats, masks = self._update(active, None if all(active) else mask)
                        for name, value in step_stats.items():
                            old = stats.get(name, torch.full_like(value, float("nan")))
                            stats[name] = torch.where(masks.get(name, mask), value, old)
                        self._updates += active
        self._obs = obs
        out = dict(stats)
        out["reward_mean"] = reward_sum / done
        return {**out, **self._episodes_stats()}

    def _update_precision(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast of the gradient updates to :attr:`update_autocast` (none by default)."""
        if self.update_autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.update_autocast)


@contextlib.contextmanager
def frozen(params: dict[str, torch.Tensor], prefixes: Sequence[str]) -> Iterator[None]:
    """Inside the block, the parameters whose names start with one of ``prefixes`` do not
    require gradients.

    A loss built inside still differentiates *through* those networks (to their inputs),
    but backward skips their own gradients, e.g. the critics' weight gradients of the
    actor's loss, which no optimizer would use. Fewer matrix products, identical updates.
    """
    names = [k for k, p in params.items() if p.requires_grad and k.startswith(tuple(prefixes))]
    for k in names:
        params[k].requires_grad_(False)
    try:
        yield
    finally:
        for k in names:
            params[k].requires_grad_(True)


def q_network(hp: Any, obs_dim: int, action_dim: int) -> Callable[[], nn.Module]:
    """A maker of fresh Q networks of ``hp.net``'s family: cross-sectional (each ticker's
    token carries its own action) or a flat MLP on the observation and the action."""
    if hp.net == "cross_sectional":
        layout = TickerLayout.infer(obs_dim, action_dim, hp.ticker_features)
        return lambda: CrossSectionalCritic(layout, hp.critic_hidden, action=True)
    return lambda: QCritic(obs_dim, action_dim, hp.critic_hidden)


def add_targets(
    nets: dict[str, nn.Module], names: Sequence[str], make: Callable[[], nn.Module]
) -> None:
    """``nets[f"{name}_target"]``: a fresh ``make()`` holding a copy of ``nets[name]``'s
    weights, for each of ``names`` in order."""
    for name in names:
        target = make()
        target.load_state_dict(nets[name].state_dict())
        nets[f"{name}_target"] = target
