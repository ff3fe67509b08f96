"""Patching a function that finpod's modules import at their top."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import pytest


def patch_everywhere(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, replacement: Any
) -> None:
    """``monkeypatch.setattr(owner, name, replacement)``, and the same in every loaded
    finpod module that imported the original under that name (a module binds what it
    imports at its top, so patching the package alone would miss it)."""
    _import_all()  # a module first imported while the patch is on would keep the patch
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name, replacement)
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("finpod") or module is None or module is owner:
            continue
        if getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, replacement)


def _import_all() -> None:
    """Import every finpod module (once)."""
    import finpod

    for info in pkgutil.walk_packages(finpod.__path__, "finpod."):
        if info.name.endswith("__main__") or info.name in sys.modules:
            continue
        importlib.import_module(info.name)
