"""CLI verbs of this layer (filled in by the layer that owns them)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the finpod app."""
