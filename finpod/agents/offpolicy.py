"""The collection loop shared by SAC, TD3 and DDPG.

Each vector step: act (uniform random actions until ``learning_starts`` env steps, the
policy's exploration afterwards) → step all envs → store the transitions, with the true
final observation for envs whose episode ended → ``gradient_steps`` updates on minibatches
from the replay buffer. The algorithm supplies ``_explore(obs)`` and ``_update()``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from finpod.agents.base import Agent
from finpod.agents.buffer import FIELDS, ReplayBuffer, replay_buffer_nbytes
from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv


class OffPolicyAgent(Agent):
    """Base of replay-buffer agents; ``hparams`` must have ``buffer_size``, ``batch_size``,
    ``learning_starts``, ``gradient_steps``.

    The replay buffer is working memory, not part of :meth:`state_dict`: a new agent
    restored from a checkpoint refills it before updating again (``batch_size``
    transitions). Loading a state dict into an agent that already has a buffer keeps the
    buffer (learner fusion loads the fused weights and optimizer moments every epoch; the
    transitions each learner collected stay valid for an off-policy learner). A buffer
    moves between agents (a parent and its child pod) with :meth:`export_buffer` and
    :meth:`import_buffer`.
    """

    buffer: ReplayBuffer | None = None
    #: Precision of the matrix products inside gradient updates: ``None`` (float32, the
    #: default) or ``torch.bfloat16``, run under ``torch.autocast`` (about 1.7× faster
    #: SAC updates on CPUs with AVX-512 BF16 or AMX, and on GPUs). Parameters, optimizer
    #: moments, losses and the replay buffer stay float32; acting stays float32. A runtime
    #: setting of this agent, not a hyperparameter: it is not in the state dict.
    update_autocast: torch.dtype | None = None

    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        """Exploration action ``(num_envs, action_dim)`` in ``[-1, 1]``."""
        raise NotImplementedError

    def _update(self) -> dict[str, torch.Tensor]:
        """One gradient step from a replay minibatch; returns device tensors (no sync).

        Statistics missing from a step (TD3's actor loss on a delayed step) keep the value
        of the latest step of the same ``learn`` call that had them.
        """
        raise NotImplementedError

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, float]:
        hp = self.hparams
        n_envs = env.num_envs
        self._ensure_buffer(n_envs)
        assert self.buffer is not None
        self._episodes_begin(n_envs)
        obs = self._current_obs(env)
        stats: dict[str, torch.Tensor] = {}
        reward_sum = torch.zeros((), device=self.device)
        vector_steps = max(1, math.ceil(num_steps / n_envs))
        for _ in range(vector_steps):
            with torch.no_grad():
                if self.env_steps < hp.learning_starts:
                    action = torch.rand(
                        (n_envs, self.action_dim), device=self.device, generator=self.generator
                    )
                    action = action * 2.0 - 1.0
                else:
                    action = self._explore(obs)
                next_obs, reward, terminated, truncated, info = env.step(action)
                next_obs = next_obs.to(self.device, torch.float32)
                reward = reward.to(self.device, torch.float32)
                terminated = terminated.to(self.device)
                final = info.get("final_obs", next_obs).to(self.device, torch.float32)
                self.buffer.add(obs, action, reward, final, terminated)
                self._episodes_track(reward, (terminated | truncated.to(self.device)).float())
                reward_sum += reward.mean()
            obs = next_obs
            self.env_steps += n_envs
            if self.env_steps >= hp.learning_starts and self.buffer.size >= hp.batch_size:
                with self._update_precision():
                    for _ in range(hp.gradient_steps):
                        stats.update(self._update())
                        self.updates += 1
        self._obs = obs
        out = {k: float(v) for k, v in stats.items()}
        out["reward_mean"] = float(reward_sum) / vector_steps
        return {**out, **self._episodes_stats()}

    def _update_precision(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast of the gradient updates to :attr:`update_autocast` (none by default)."""
        if self.update_autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.update_autocast)

    # ----- the replay buffer ------------------------------------------------------------
    def _buffer_capacity(self, num_envs: int = 1) -> int:
        """Rows of the buffer: ``buffer_size``, at least one vector step of ``num_envs``."""
        return max(int(self.hparams.buffer_size), int(num_envs))

    def _ensure_buffer(self, num_envs: int) -> None:
        """Allocate the buffer on first use; grow it (keeping its rows) if one vector step
        of ``num_envs`` transitions would not fit."""
        if self.buffer is None:
            self.buffer = ReplayBuffer(
                self._buffer_capacity(num_envs), self.obs_dim, self.action_dim, self.device
            )
        elif self.buffer.capacity < num_envs:
            rows = self.buffer.export()
            self.buffer = None
            self.buffer = ReplayBuffer(num_envs, self.obs_dim, self.action_dim, self.device)
            self.buffer.load(rows)

    def buffer_nbytes(self) -> int:
        """Bytes the replay buffer occupies at capacity (``buffer_size`` rows of float32
        obs, action, reward, next obs, terminated), whether or not it is allocated yet —
        what a pod declares to Ray as memory."""
        capacity = self.buffer.capacity if self.buffer is not None else self._buffer_capacity()
        return replay_buffer_nbytes(capacity, self.obs_dim, self.action_dim)

    def export_buffer(self) -> dict[str, np.ndarray]:
        """The filled part of the replay buffer, oldest transition first, as host arrays.

        ``{"obs": (n, obs_dim) float32, "action": (n, action_dim) float32, "reward": (n,)
        float32, "next_obs": (n, obs_dim) float32, "terminated": (n,) bool}``, ``n`` = the
        rows collected so far (0 before the first ``learn``). Plain contiguous numpy arrays:
        ``ray.put`` stores them without pickling tensors, and readers on the same node map
        them zero-copy.
        """
        if self.buffer is None:
            return {
                "obs": np.zeros((0, self.obs_dim), np.float32),
                "action": np.zeros((0, self.action_dim), np.float32),
                "reward": np.zeros(0, np.float32),
                "next_obs": np.zeros((0, self.obs_dim), np.float32),
                "terminated": np.zeros(0, bool),
            }
        return self.buffer.export()

    def import_buffer(self, data: dict[str, np.ndarray]) -> None:
        """Replace the replay buffer's contents with ``data`` from :meth:`export_buffer`.

        The buffer is allocated on this agent's device at its own ``buffer_size``; when
        ``data`` holds more rows than that, the newest are kept. Observation or action
        sizes that differ from this agent's raise :class:`FinpodError`.
        """
        missing = [name for name in FIELDS if name not in data]
        if missing:
            raise FinpodError(
                f"replay buffer data lacks {missing[0]!r}",
                "pass what OffPolicyAgent.export_buffer() returned",
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
        self._ensure_buffer(1)
        assert self.buffer is not None
        self.buffer.load(data)

    def clear_buffer(self) -> None:
        """Drop the replay buffer (the next ``learn`` starts an empty one)."""
        self.buffer = None


@torch.no_grad()
def polyak(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """``target ← (1 − τ)·target + τ·source`` parameter-wise."""
    soft_update([target], [source], tau)


@torch.no_grad()
def soft_update(
    targets: Sequence[torch.nn.Module], sources: Sequence[torch.nn.Module], tau: float
) -> None:
    """:func:`polyak` for several ``(target, source)`` network pairs in one fused
    ``_foreach_lerp_`` (one kernel per dtype and device instead of one per parameter)."""
    dst = [p for net in targets for p in net.parameters()]
    src = [p for net in sources for p in net.parameters()]
    if len(dst) != len(src):
        raise ValueError(f"{len(dst)} target parameters but {len(src)} source parameters")
    torch._foreach_lerp_(dst, src, float(tau))


@contextlib.contextmanager
def frozen(*nets: torch.nn.Module) -> Iterator[None]:
    """Inside the block, the parameters of ``nets`` do not require gradients.

    A loss built inside still differentiates *through* the networks (to their inputs), but
    backward skips the parameters' own gradients, e.g. the critics' weight gradients of
    the actor's loss, which no optimizer would use (the critic optimizer clears them
    before its next step). Fewer matrix products, identical updates.
    """
    params = [p for net in nets for p in net.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
