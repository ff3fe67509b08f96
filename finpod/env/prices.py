"""Valid prices and the mark price: the last tradable, valid close (host-side tables).

Shared by the env's table building (:mod:`finpod.env.tables`) and the reference portfolio
(:mod:`finpod.env.reference`).
"""

from __future__ import annotations

import torch


def valid_prices(price: torch.Tensor) -> torch.Tensor:
    """Finite and positive."""
    return torch.isfinite(price) & (price > 0)


def mark_prices(close: torch.Tensor, tradable: torch.Tensor) -> torch.Tensor:
    """(T, N) last tradable, valid close at or before each bar (0 where none exists yet)."""
    valid = valid_prices(close) & tradable
    rows = torch.arange(close.shape[0], device=close.device).unsqueeze(1).expand_as(close)
    last = torch.where(valid, rows, torch.full_like(rows, -1)).cummax(dim=0).values
    marked = torch.gather(torch.nan_to_num(close, nan=0.0), 0, last.clamp(min=0))
    return torch.where(last >= 0, marked, torch.zeros_like(marked))
