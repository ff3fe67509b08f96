"""Deprecated import path: use :mod:`finpod.tournament.pod_results` (what a pod sends back).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.tournament.pod_results import *  # noqa: F403

warnings.warn(
    "finpod.tournament.results is deprecated; import from finpod.tournament.pod_results",
    DeprecationWarning,
    stacklevel=2,
)
