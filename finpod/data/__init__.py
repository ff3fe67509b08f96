"""Data layer: sources, calendar cleaning, causal features, splits, dataset on disk."""

from finpod.data.market import MarketData

__all__ = ["MarketData"]
