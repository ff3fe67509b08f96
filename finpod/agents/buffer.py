"""Replay buffer for off-policy agents: preallocated contiguous tensors on the device.

Transitions are written as whole ``(num_envs, …)`` batches into a ring of ``capacity``
rows; the write position is a host integer, so adding and sampling never sync with the
device.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from finpod.errors import FinpodError

#: Largest share of the device's free memory one replay buffer may take.
MAX_MEMORY_SHARE = 0.6


def _free_bytes(device: torch.device) -> int:
    """Free memory of ``device`` in bytes (host RAM for the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    import psutil

    return int(psutil.virtual_memory().available)


#: Names of the stored fields, in export order.
FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


def replay_buffer_nbytes(capacity: int, obs_dim: int, action_dim: int) -> int:
    """Bytes a :class:`ReplayBuffer` of ``capacity`` transitions occupies (float32 rows)."""
    return 4 * int(capacity) * (2 * int(obs_dim) + int(action_dim) + 2)


def check_buffer_fits(capacity: int, obs_dim: int, action_dim: int, device: torch.device) -> None:
    """Raise a clear error, before allocating, when a buffer would not fit in memory.

    A buffer that overcommits memory does not fail at allocation: it gets its process
    killed later (by the kernel or Ray's memory monitor) with no hint of the cause.
    """
    need = replay_buffer_nbytes(capacity, obs_dim, action_dim)
    free = _free_bytes(device)
    if need > MAX_MEMORY_SHARE * free:
        raise FinpodError(
            f"a replay buffer of {capacity:,} transitions × {obs_dim} observation floats needs "
            f"{need / 2**30:.1f} GiB but {device} has {free / 2**30:.1f} GiB free",
            f"lower buffer_size (e.g. {max(1000, int(MAX_MEMORY_SHARE * free / need * capacity) // 2):,})"
            " in the strategy's [agent.hparams] or [search.<algorithm>]",
        )


class ReplayBuffer:
    """Ring buffer of ``(obs, action, reward, next_obs, terminated)`` transitions.

    Attributes:
        obs: (capacity, obs_dim) float32.
        action: (capacity, action_dim) float32 in [-1, 1].
        reward: (capacity,) float32.
        next_obs: (capacity, obs_dim) float32, the true next observation (the final one
            when an episode ended, not the reset one).
        terminated: (capacity,) float32, 1.0 when the episode truly ended (no bootstrap);
            time-limit truncation is 0.0 (bootstrap).
        size: rows holding data (≤ capacity).
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device) -> None:
        self.capacity = int(capacity)
        self.device = torch.device(device)
        check_buffer_fits(self.capacity, obs_dim, action_dim, self.device)
        # Uninitialised: rows at or past ``size`` are never read (sampling and export stop
        # at ``size``), and not writing them keeps allocation instant (a 100,000-row
        # buffer at ~1,150 observation floats is ~0.9 GB that zero-filling took ~1 s to
        # write) and host pages untouched until transitions arrive.
        self.obs = torch.empty((self.capacity, obs_dim), device=self.device)
        self.action = torch.empty((self.capacity, action_dim), device=self.device)
        self.reward = torch.empty(self.capacity, device=self.device)
        self.next_obs = torch.empty((self.capacity, obs_dim), device=self.device)
        self.terminated = torch.empty(self.capacity, device=self.device)
        self.pos = 0
        self.size = 0

    def add(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Append a batch of ``B`` transitions (``B ≤ capacity``), overwriting the oldest."""
        b = obs.shape[0]
        if b > self.capacity:
            raise ValueError(
                f"batch of {b} transitions exceeds the buffer capacity {self.capacity}"
            )
        idx = (torch.arange(b, device=self.device) + self.pos) % self.capacity
        self.obs[idx] = obs
        self.action[idx] = action
        self.reward[idx] = reward
        self.next_obs[idx] = next_obs
        self.terminated[idx] = terminated.float()
        self.pos = (self.pos + b) % self.capacity
        self.size = min(self.size + b, self.capacity)

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement.

        Rows are gathered with ``index_select`` (on CPU about 2× faster than advanced
        indexing for the ``(batch_size, obs_dim)`` observation fields; same values)."""
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        return (
            self.obs.index_select(0, idx),
            self.action.index_select(0, idx),
            self.reward.index_select(0, idx),
            self.next_obs.index_select(0, idx),
            self.terminated.index_select(0, idx),
        )

    def export(self) -> dict[str, np.ndarray]:
        """The filled rows, oldest first, as compact host arrays (e.g. for ``ray.put``).

        Returns ``{"obs": (n, obs_dim) float32, "action": (n, action_dim) float32,
        "reward": (n,) float32, "next_obs": (n, obs_dim) float32, "terminated": (n,) bool}``
        with ``n = size``. One device-to-host copy per field.
        """
        start = (self.pos - self.size) % self.capacity
        idx = (torch.arange(self.size, device=self.device) + start) % self.capacity
        out: dict[str, np.ndarray] = {}
        for name in FIELDS:
            rows = getattr(self, name)[idx]
            if name == "terminated":
                rows = rows > 0.5
            out[name] = np.ascontiguousarray(rows.detach().cpu().numpy())
        return out

    def load(self, data: dict[str, np.ndarray]) -> None:
        """Replace the contents with exported rows (oldest first); keep the newest
        ``capacity`` rows when there are more. Shapes are checked by the caller."""
        n = int(data["reward"].shape[0])
        keep = min(n, self.capacity)
        for name in FIELDS:
            rows = np.asarray(data[name])[n - keep :]
            with warnings.catch_warnings():
                # Arrays from the object store are read-only; they are only read here.
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                source = torch.as_tensor(rows)
            getattr(self, name)[:keep].copy_(source)
        # Rows past ``size`` are never sampled, so older contents there need no clearing.
        self.size = keep
        self.pos = keep % self.capacity
