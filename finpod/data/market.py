"""``MarketData``: what the environment and the backtester read, as tensors on one device.

This is the contract between the data layer and everything above it. A dataset directory
is turned into one ``MarketData`` per split by :func:`finpod.data.dataset.load_split`.

Conventions (all arrays are time-major, T bars × N tickers × F features):

- ``open``/``close`` are real traded prices (float32). Where a ticker has no past bar yet
  (before its listing) the value is ``0.0`` and ``tradable`` is False: such an entry is
  never a price and must never be traded or valued. After a delisting, or on a bar the
  cleaner forward-filled, the last known price is carried (from the past only).
- ``tradable`` (bool) is False outside a ticker's listed life and on bars the cleaner
  filled; the env never fills an order on a non-tradable (bar, ticker).
- ``features`` are causal: the value at bar t uses bars ≤ t only. They are already scaled
  to O(1) by the data layer (see ``feature_names`` and the dataset manifest).
- ``timestamps`` are timezone-aware (America/New_York) bar times, one per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd
import torch


@dataclass(frozen=True)
class MarketData:
    """One split of a dataset, ready for the env.

    Attributes:
        timestamps: (T,) tz-aware bar times.
        tickers: (N,) ticker symbols, column order of every tensor.
        open: (T, N) float32 open prices (0.0 where no price exists yet).
        close: (T, N) float32 close prices (0.0 where no price exists yet).
        features: (T, N, F) float32 causal, O(1)-scaled features.
        feature_names: (F,) names of the feature axis.
        tradable: (T, N) bool; False before listing, after delisting, on filled bars.
        bar: bar size, e.g. ``"1d"`` or ``"1min"``.
        split: ``"train"``, ``"validation"``, ``"backtest"`` or ``"all"``.
        benchmark: optional index level series (e.g. ^NDX close) on the same timestamps.
    """

    timestamps: pd.DatetimeIndex
    tickers: list[str]
    open: torch.Tensor
    close: torch.Tensor
    features: torch.Tensor
    feature_names: list[str]
    tradable: torch.Tensor
    bar: str = "1d"
    split: str = "all"
    benchmark: pd.Series | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        t, n = self.close.shape
        if self.open.shape != (t, n) or self.tradable.shape != (t, n):
            raise ValueError("open, close and tradable must all be (T, N)")
        if self.features.shape[:2] != (t, n) or self.features.shape[2] != len(self.feature_names):
            raise ValueError("features must be (T, N, F) with F == len(feature_names)")
        if len(self.timestamps) != t or len(self.tickers) != n:
            raise ValueError("timestamps must have T entries and tickers N entries")

    @property
    def num_bars(self) -> int:
        return int(self.close.shape[0])

    @property
    def num_stocks(self) -> int:
        return int(self.close.shape[1])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[2])

    @property
    def device(self) -> torch.device:
        return self.close.device

    def to(self, device: torch.device | str) -> MarketData:
        """Same data on ``device``."""
        return replace(
            self,
            open=self.open.to(device),
            close=self.close.to(device),
            features=self.features.to(device),
            tradable=self.tradable.to(device),
        )

    def slice(self, start: int, stop: int) -> MarketData:
        """Bars ``start:stop`` (row positions), same tickers."""
        bench = None if self.benchmark is None else self.benchmark.iloc[start:stop]
        return replace(
            self,
            timestamps=self.timestamps[start:stop],
            open=self.open[start:stop],
            close=self.close[start:stop],
            features=self.features[start:stop],
            tradable=self.tradable[start:stop],
            benchmark=bench,
        )


#: Regular-session minutes in a full NYSE/NASDAQ trading day (09:30–16:00).
MINUTES_PER_SESSION = 390
#: Trading sessions per year used for annualization (empyrical's convention).
SESSIONS_PER_YEAR = 252


def periods_per_year(bar: str) -> float:
    """Number of bars of size ``bar`` in a trading year, for annualizing bar returns.

    ``"1d"`` → 252; ``"1min"`` → 252 × 390; ``"5min"`` → 252 × 78; ``"1h"`` → 252 × 6.5.
    """
    bar = bar.strip().lower()
    if bar in {"1d", "d", "day", "daily"}:
        return float(SESSIONS_PER_YEAR)
    units = {"min": 1.0, "m": 1.0, "h": 60.0}
    for suffix, minutes in units.items():
        if bar.endswith(suffix) and bar[: -len(suffix)].isdigit():
            size = int(bar[: -len(suffix)]) * minutes
            return SESSIONS_PER_YEAR * MINUTES_PER_SESSION / size
    raise ValueError(f"unknown bar size {bar!r}: use 1d, Nmin or Nh")
