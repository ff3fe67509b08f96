"""Deprecated import path: use :mod:`finpod.runs.metrics_file` (a run's ``metrics.csv``).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.runs.metrics_file import *  # noqa: F403

warnings.warn(
    "finpod.runs.metrics is deprecated; import from finpod.runs.metrics_file",
    DeprecationWarning,
    stacklevel=2,
)
