"""Pick the torch device once, at the entry point, and pass it down."""

from __future__ import annotations

import torch

from finpod.errors import FinpodError


def pick_device(name: str = "auto") -> torch.device:
    """Return ``cuda`` when asked for (or ``auto`` and available), else ``cpu``.

    ``name`` is ``auto``, ``cpu``, ``cuda`` or ``cuda:K``.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise FinpodError(
            f"device {name!r} was asked for but CUDA is not available", "use --device cpu"
        )
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise FinpodError(f"unknown device {name!r}", "use auto, cpu, cuda or cuda:K") from err
