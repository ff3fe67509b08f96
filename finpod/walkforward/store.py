"""Deprecated import path: use :mod:`finpod.walkforward.directory` (the walk-forward directory).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.walkforward.directory import *  # noqa: F403

warnings.warn(
    "finpod.walkforward.store is deprecated; import from finpod.walkforward.directory",
    DeprecationWarning,
    stacklevel=2,
)
