"""Deprecated import path: use :mod:`finpod.agents.registry` (one registry of algorithms).

Kept for one release so that notebooks importing the old path keep working.
"""

import warnings

from finpod.agents.registry import POPULATIONS, make_population, population_class  # noqa: F401

warnings.warn(
    "finpod.agents.populations is deprecated; import from finpod.agents.registry",
    DeprecationWarning,
    stacklevel=2,
)
