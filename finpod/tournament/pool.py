"""Deprecated import path: use :mod:`finpod.tournament.placement` (where pods go on the cluster).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.placement import *  # noqa: F403

warnings.warn(
    "finpod.tournament.pool is deprecated; import from finpod.tournament.placement",
    DeprecationWarning,
    stacklevel=2,
)
