"""Deprecated import path: use :mod:`finpod.tournament.ensemble_candidate` (the leaderboard ensemble as a candidate).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.ensemble_candidate import *  # noqa: F403

warnings.warn(
    "finpod.tournament.ensemble is deprecated; import from finpod.tournament.ensemble_candidate",
    DeprecationWarning,
    stacklevel=2,
)
