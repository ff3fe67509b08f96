"""Deprecated import path: use :mod:`finpod.agents.sac` (SAC is written once, over a member axis).

Kept for one release so that notebooks importing the old path keep working.
"""

import warnings

from finpod.agents.sac import SACPopulation  # noqa: F401

warnings.warn(
    "finpod.agents.population_sac is deprecated; import from finpod.agents.sac",
    DeprecationWarning,
    stacklevel=2,
)
