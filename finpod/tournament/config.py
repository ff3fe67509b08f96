"""Deprecated import path: use :mod:`finpod.tournament.settings` (the tournament's settings).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.settings import *  # noqa: F403

warnings.warn(
    "finpod.tournament.config is deprecated; import from finpod.tournament.settings",
    DeprecationWarning,
    stacklevel=2,
)
