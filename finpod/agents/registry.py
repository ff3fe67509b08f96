"""The algorithms finpod trains, by name, and :func:`make_agent`, which builds one.

Beside the agents rather than in :mod:`finpod.agents`'s ``__init__``, so that a module of
the package (:mod:`finpod.agents.checkpoint`) can build an agent without importing the
package that imports it.
"""

from __future__ import annotations

from typing import Any

import torch

from finpod.agents.a2c import A2C, A2CParams
from finpod.agents.base import Agent, build_hparams
from finpod.agents.ppo import PPO, PPOParams
from finpod.agents.sac import SAC, SACParams
from finpod.agents.td3 import DDPG, TD3, DDPGParams, TD3Params
from finpod.errors import FinpodError

#: Algorithm name → (hyperparameter dataclass, agent class).
ALGORITHMS: dict[str, tuple[type, type[Agent]]] = {
    "ppo": (PPOParams, PPO),
    "a2c": (A2CParams, A2C),
    "sac": (SACParams, SAC),
    "td3": (TD3Params, TD3),
    "ddpg": (DDPGParams, DDPG),
}


def make_agent(
    algorithm: str,
    hparams: dict[str, Any] | None,
    obs_dim: int,
    action_dim: int,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> Agent:
    """A fresh agent; same arguments give identical initial weights and random streams."""
    if algorithm not in ALGORITHMS:
        raise FinpodError(
            f"unknown algorithm {algorithm!r}", f"choose one of {', '.join(sorted(ALGORITHMS))}"
        )
    params_cls, agent_cls = ALGORITHMS[algorithm]
    hp = build_hparams(params_cls, hparams, where=f"{algorithm} hparams")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return agent_cls(hp, int(obs_dim), int(action_dim), torch.device(device), int(seed))
