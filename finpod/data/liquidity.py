"""Causal liquidity of each ticker: daily volatility and average daily traded value.

What the square-root impact model (:mod:`finpod.env.impact`) needs to price a fill, from
the dataset's own bars. Both are trailing statistics over the last
:data:`LIQUIDITY_WINDOW_SESSIONS` sessions: the value at bar t uses bars ≤ t only, and a
window that is not full yet (the first bars of a dataset, a new listing) holds the bars
available. Bar-level statistics are scaled to a day with B = bars per regular session
(1 for daily bars, 390 / minutes for intraday bars):

- ``sigma_daily``: RMS of the 1-bar log returns of the close (over pairs of consecutive
  listed bars) × √B, a fraction per day (0.02 = 2 %). Where the window holds fewer than
  :data:`MIN_RETURNS` returns it is :data:`DEFAULT_SIGMA_DAILY`.
- ``adv_value``: mean of close × volume over the listed bars of the window (close > 0;
  a filled bar counts with volume 0, as no share traded there) × B, dollars per day.
"""

from __future__ import annotations

import torch

from finpod.data.calendar import bar_minutes
from finpod.data.market import MINUTES_PER_SESSION

#: Trailing window of the volatility and the average daily traded value, in sessions
#: (the usual 20-day ADV of execution desks).
LIQUIDITY_WINDOW_SESSIONS = 20
#: Fewest 1-bar returns in the window for a volatility estimate.
MIN_RETURNS = 2
#: Daily volatility taken where a ticker has fewer than MIN_RETURNS returns (2 % a day,
#: about 32 % a year: a typical single stock).
DEFAULT_SIGMA_DAILY = 0.02


def bars_per_session(bar: str) -> float:
    """B: bars of size ``bar`` in a full regular session (1 for daily bars)."""
    minutes = bar_minutes(bar)
    return 1.0 if minutes is None else MINUTES_PER_SESSION / float(minutes)


def _trailing_sum(x: torch.Tensor, window: int) -> torch.Tensor:
    c = torch.cumsum(x, dim=0)
    out = c.clone()
    if window < len(c):
        out[window:] -= c[:-window]
    return out


def daily_liquidity(
    close: torch.Tensor, volume: torch.Tensor, bar: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sigma_daily, adv_value)``, each (T, N) float64 on ``close``'s device (module doc).

    ``close`` (T, N) prices (0 = not listed yet), ``volume`` (T, N) shares per bar.
    """
    b = bars_per_session(bar)
    window = max(1, int(round(LIQUIDITY_WINDOW_SESSIONS * b)))
    close = close.to(torch.float64)
    volume = torch.nan_to_num(volume.to(torch.float64), nan=0.0).clamp(min=0.0)
    listed = (close > 0).to(torch.float64)
    logc = torch.log(torch.where(close > 0, close, torch.ones_like(close)))
    pair = torch.zeros_like(listed)
    pair[1:] = listed[1:] * listed[:-1]
    ret = torch.zeros_like(logc)
    ret[1:] = (logc[1:] - logc[:-1]) * pair[1:]
    count = _trailing_sum(pair, window)
    var = _trailing_sum(ret * ret, window) / count.clamp(min=1.0)
    sigma = torch.where(
        count >= MIN_RETURNS, (var * b).sqrt(), torch.full_like(var, DEFAULT_SIGMA_DAILY)
    )
    traded = _trailing_sum(close * volume * listed, window)
    adv = traded / _trailing_sum(listed, window).clamp(min=1.0) * b
    return sigma, adv
