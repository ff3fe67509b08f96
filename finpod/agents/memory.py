"""Memory a training needs, checked before anything is allocated or written.

A setting such as ``train.num_envs = 100_000_000`` would otherwise end in an allocator
error in the middle of a run; :func:`check_memory` refuses it in one line first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import psutil
import torch

from finpod.agents.registry import ALGORITHMS
from finpod.env.tables import ObsLayout
from finpod.errors import FinpodError

#: Bytes of one float32.
_FLOAT = 4


def memory_needed(strategy: Any, market: Any, env_config: Any) -> int:
    """Bytes the envs and an on-policy rollout buffer hold, at least: (num_envs, obs_dim)
    observations and the envs' (num_envs, N) state, and, for PPO and A2C, ``horizon``
    steps of observations, actions and their scalars. A lower bound: the networks,
    optimizer and an off-policy replay buffer (which checks itself) come on top."""
    num_envs = int(strategy.train.num_envs)
    obs_dim = ObsLayout.for_env(market, env_config).obs_dim
    n = int(market.num_stocks)
    per_env = 2 * obs_dim + 4 * n + 8  # obs and next obs; holdings, prices, weights, orders
    params = ALGORITHMS[strategy.algorithm][0]
    if any(f.name == "horizon" for f in dataclasses.fields(params)):
        horizon = int(strategy.hparams.get("horizon", params.horizon))
        per_env += horizon * (obs_dim + 2 * n + 4)  # obs, action, mean; reward, done, ...
    return _FLOAT * num_envs * per_env


def memory_available(device: torch.device) -> int:
    """Bytes free on ``device``: the GPU's free memory, or the host's available memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return int(psutil.virtual_memory().available)


def check_memory(strategy: Any, market: Any, env_config: Any, device: torch.device) -> None:
    """Refuse settings whose envs and rollout buffer cannot fit in ``device``'s memory,
    before anything is allocated or written (:func:`memory_needed`)."""
    need = memory_needed(strategy, market, env_config)
    have = memory_available(device)
    if need > have:
        raise FinpodError(
            f"train.num_envs = {strategy.train.num_envs:,} needs at least {need / 2**30:,.1f} "
            f"GiB for the envs and their rollout buffer, but {have / 2**30:,.1f} GiB is "
            f"free on {device}",
            "lower train.num_envs (or agent.hparams.horizon)",
        )
