"""Deprecated import path: use :mod:`finpod.agents.offpolicy` (the off-policy loop is written once, over a member axis).

Kept for one release so that notebooks importing the old path keep working.
"""

import warnings

from finpod.agents.offpolicy import BUFFER_FIELDS, OffPolicyPopulation  # noqa: F401

warnings.warn(
    "finpod.agents.population_offpolicy is deprecated; import from finpod.agents.offpolicy",
    DeprecationWarning,
    stacklevel=2,
)
