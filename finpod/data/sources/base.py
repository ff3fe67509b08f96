"""Deprecated import path: use :mod:`finpod.data.sources.loaded` (what every source returns).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.data.sources.loaded import *  # noqa: F403

warnings.warn(
    "finpod.data.sources.base is deprecated; import from finpod.data.sources.loaded",
    DeprecationWarning,
    stacklevel=2,
)
