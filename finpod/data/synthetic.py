"""Deprecated import path: use :mod:`finpod.data.synthetic_market` (the seeded synthetic market).

Kept for one release so that code importing the old path keeps working.
"""

import warnings

from finpod.data.synthetic_market import *  # noqa: F403

warnings.warn(
    "finpod.data.synthetic is deprecated; import from finpod.data.synthetic_market",
    DeprecationWarning,
    stacklevel=2,
)
