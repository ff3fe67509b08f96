"""Replay-buffer sizing: its fields, its bytes, and a clear refusal before a buffer that
would not fit in memory is allocated (the ring itself is the off-policy population's,
:mod:`finpod.agents.offpolicy`).
"""

from __future__ import annotations

import psutil
import torch

from finpod.errors import FinpodError

#: Largest share of the device's free memory one replay buffer may take.
MAX_MEMORY_SHARE = 0.6


def _free_bytes(device: torch.device) -> int:
    """Free memory of ``device`` in bytes (host RAM for the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
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
