"""The algorithms finpod trains, by name: :func:`make_agent` builds a single agent and
:func:`make_population` a population of K members of one algorithm.

Beside the agents rather than in :mod:`finpod.agents`'s ``__init__``, so that a module of
the package (:mod:`finpod.agents.checkpoint`) can build an agent without importing the
package that imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from finpod.agents.a2c import A2C, A2CParams
from finpod.agents.base import Agent
from finpod.agents.hparams import build_hparams
from finpod.agents.population import Population
from finpod.agents.ppo import PPO, PPOParams
from finpod.agents.sac import SAC, SACParams
from finpod.agents.td3 import DDPG, TD3, DDPGParams, TD3Params
from finpod.errors import FinpodError

#: Algorithm name → (hyperparameter dataclass, single-agent class).
ALGORITHMS: dict[str, tuple[type, type[Agent]]] = {
    "ppo": (PPOParams, PPO),
    "a2c": (A2CParams, A2C),
    "sac": (SACParams, SAC),
    "td3": (TD3Params, TD3),
    "ddpg": (DDPGParams, DDPG),
}
#: Algorithm → its population class (the one implementation; a single agent holds one).
POPULATIONS: dict[str, type[Population]] = {
    name: agent_cls.population_cls for name, (_, agent_cls) in ALGORITHMS.items()
}


def _known(algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise FinpodError(
            f"unknown algorithm {algorithm!r}", f"choose one of {', '.join(sorted(ALGORITHMS))}"
        )


def make_agent(
    algorithm: str,
    hparams: dict[str, Any] | None,
    obs_dim: int,
    action_dim: int,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> Agent:
    """A fresh agent; same arguments give identical initial weights and random streams."""
    _known(algorithm)
    params_cls, agent_cls = ALGORITHMS[algorithm]
    hp = build_hparams(params_cls, hparams, where=f"{algorithm} hparams")
    return agent_cls(hp, int(obs_dim), int(action_dim), torch.device(device), int(seed))


def make_population(
    algorithm: str,
    hparams: Sequence[Any],
    obs_dim: int,
    action_dim: int,
    device: torch.device | str,
    seeds: Sequence[int],
    *,
    rng: str = "member",
) -> Population:
    """A population of ``len(hparams)`` members of ``algorithm`` (``"ppo"``, ``"a2c"``,
    ``"sac"``, ``"td3"``, ``"ddpg"``); ``hparams[k]`` is member k's params dataclass
    (``PPOParams`` …, or a dict of its fields) and ``seeds[k]`` its seed. Members must
    share every field but the algorithm's ``member_fields`` (FinpodError naming the
    field otherwise).

    ``rng="member"`` (default): member k draws from its own generator, in its single
    agent's order, so it reproduces that agent; this takes one torch call per member per
    draw (the one loop over members in the hot path). ``rng="shared"``: every draw is one
    call for all members from one population generator (seeded from ``seeds``): no loop
    over members, a reproducible population, but member k no longer reproduces the single
    agent with seed ``seeds[k]``. Worth it where kernel launches cost (large K on a GPU).
    """
    _known(algorithm)
    return POPULATIONS[algorithm](
        hparams, obs_dim, action_dim, torch.device(device), seeds, rng=rng
    )


def population_class(algorithm: str) -> type[Population] | None:
    """The population class of ``algorithm`` (``None``: not an algorithm finpod knows)."""
    return POPULATIONS.get(algorithm)
