"""Deprecated import path: use :mod:`finpod.agents.ppo` (PPO is written once, over a member axis).

Kept for one release so that notebooks importing the old path keep working.
"""

import warnings

from finpod.agents.a2c import A2CPopulation  # noqa: F401
from finpod.agents.ppo import PPOPopulation  # noqa: F401

warnings.warn(
    "finpod.agents.population_ppo is deprecated; import from finpod.agents.ppo",
    DeprecationWarning,
    stacklevel=2,
)
