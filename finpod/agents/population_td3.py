"""Deprecated import path: use :mod:`finpod.agents.td3` (TD3 and DDPG are written once, over a member axis).

Kept for one release so that notebooks importing the old path keep working.
"""

import warnings

from finpod.agents.td3 import DDPGPopulation, TD3Population  # noqa: F401

warnings.warn(
    "finpod.agents.population_td3 is deprecated; import from finpod.agents.td3",
    DeprecationWarning,
    stacklevel=2,
)
