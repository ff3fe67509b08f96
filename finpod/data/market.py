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
- ``buyable`` (bool, optional) is False where a tradable ticker may only be sold, e.g. a
  stock outside a point-in-time index universe: it keeps its real prices (so a held
  position moves with the stock) and can be sold, but not bought. ``None`` = every
  tradable bar is buyable.
- ``delisted`` (bool, optional) is True from the first bar after a ticker's last valid
  price for good (delisting inside the range). The env converts a position in a delisted
  ticker to cash at its last valid close; it is never frozen at a stale mark. ``None`` =
  nothing delists.
- ``bars_per_year`` (optional) is the number of bars per year counted from the dataset's
  own exchange calendar and bar size (half days included); ``None`` falls back to
  :func:`periods_per_year`.
- ``features`` are causal: the value at bar t uses bars ≤ t only. They are already scaled
  to O(1) by the data layer (see ``feature_names`` and the dataset manifest).
- ``volume`` (optional) is shares traded per bar (0 on filled bars); ``liquidity``
  (optional) holds the causal daily volatility and average daily traded value of
  :func:`finpod.data.liquidity.daily_liquidity`, computed by the loader over the whole
  dataset so that a split's first bars see the sessions before it.
- ``timestamps`` are timezone-aware (America/New_York) bar times, one per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

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
        buyable: optional (T, N) bool; False where a tradable ticker may only be sold.
        delisted: optional (T, N) bool; True after a ticker's last valid price, for good.
        bars_per_year: optional bars per year from the dataset's calendar.
        volume: optional (T, N) float32 shares traded per bar.
        liquidity: optional (T, N, 2) float32 ``sigma_daily`` and ``adv_value`` (dollars)
            at each bar from bars ≤ t (:mod:`finpod.data.liquidity`).
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
    buyable: torch.Tensor | None = None
    delisted: torch.Tensor | None = None
    bars_per_year: float | None = None
    volume: torch.Tensor | None = None
    liquidity: torch.Tensor | None = None

    def __post_init__(self) -> None:
        t, n = self.close.shape
        if self.open.shape != (t, n) or self.tradable.shape != (t, n):
            raise ValueError("open, close and tradable must all be (T, N)")
        for name in ("buyable", "delisted", "volume"):
            mask = getattr(self, name)
            if mask is not None and tuple(mask.shape) != (t, n):
                raise ValueError(f"{name} must be (T, N) like tradable")
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
    def annualization(self) -> float:
        """Bars per year for annualizing bar returns: the calendar's count when the dataset
        recorded it, else :func:`periods_per_year` of the bar size."""
        return float(self.bars_per_year) if self.bars_per_year else periods_per_year(self.bar)

    @property
    def device(self) -> torch.device:
        return self.close.device

    def to(self, device: torch.device | str) -> MarketData:
        """Same data on ``device``: every tensor field moved there, each keeping its dtype."""
        return replace(self, **{k: x.to(device) for k, x in self._tensors().items()})

    def slice(self, start: int, stop: int) -> MarketData:
        """Bars ``start:stop`` (row positions), same tickers: every tensor field (all are
        time-major) with its timestamps and benchmark; the split name is kept."""
        cut = {k: x[start:stop] for k, x in self._tensors().items()}
        bench = None if self.benchmark is None else self.benchmark.iloc[start:stop]
        return replace(self, timestamps=self.timestamps[start:stop], benchmark=bench, **cut)

    def take_bars(self, rows: torch.Tensor) -> MarketData:
        """The bars at ``rows`` ((P,) int64 row positions, in any order, repeats allowed),
        same tickers: every tensor field (all are time-major) with its timestamps and
        benchmark, so a per-bar field added to the class is cut too."""
        at = rows.cpu().numpy()
        cut = {k: x.index_select(0, rows.to(x.device)) for k, x in self._tensors().items()}
        bench = None if self.benchmark is None else self.benchmark.iloc[at]
        return replace(self, timestamps=self.timestamps[at], benchmark=bench, **cut)

    def take_tickers(self, tickers: list[str]) -> MarketData:
        """The columns of ``tickers`` (each one of :attr:`tickers`), in that order, on the
        same bars: every tensor field (all are (T, N, ...)) along its ticker axis."""
        cols = [self.tickers.index(t) for t in tickers]
        cut = {
            k: x.index_select(1, torch.tensor(cols, device=x.device))
            for k, x in self._tensors().items()
        }
        return replace(self, tickers=list(tickers), **cut)

    def _tensors(self) -> dict[str, torch.Tensor]:
        """The fields that hold a tensor (optional ones left out when ``None``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


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
