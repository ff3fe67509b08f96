"""Deprecated import path: use :mod:`finpod.tournament.launch` (run_tournament).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.launch import *  # noqa: F403

warnings.warn(
    "finpod.tournament.run is deprecated; import from finpod.tournament.launch",
    DeprecationWarning,
    stacklevel=2,
)
