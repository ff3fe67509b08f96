"""Deprecated import path: use :mod:`finpod.tournament.actor_pool` (the pool of pod actors).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.actor_pool import *  # noqa: F403

warnings.warn(
    "finpod.tournament.actors is deprecated; import from finpod.tournament.actor_pool",
    DeprecationWarning,
    stacklevel=2,
)
