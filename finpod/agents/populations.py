"""The population engines by algorithm: :func:`make_population` and :func:`population_class`.

See :mod:`finpod.agents.population` for what a population is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from finpod.agents.population import Population
from finpod.agents.population_ppo import A2CPopulation, PPOPopulation
from finpod.agents.population_sac import SACPopulation
from finpod.agents.population_td3 import DDPGPopulation, TD3Population
from finpod.errors import FinpodError

#: Algorithm → its batched population class.
POPULATIONS: dict[str, type[Population]] = {
    "ppo": PPOPopulation,
    "a2c": A2CPopulation,
    "sac": SACPopulation,
    "td3": TD3Population,
    "ddpg": DDPGPopulation,
}


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
    kind = population_class(algorithm)
    if kind is None:
        raise FinpodError(
            f"no batched population for algorithm {algorithm!r}",
            f"choose one of {', '.join(sorted(POPULATIONS))}",
        )
    return kind(hparams, obs_dim, action_dim, torch.device(device), seeds, rng=rng)


def population_class(algorithm: str) -> type[Population] | None:
    """The batched population class of ``algorithm`` (``None``: it has none)."""
    return POPULATIONS.get(algorithm)
