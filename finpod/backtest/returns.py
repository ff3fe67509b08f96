"""What every metric takes: per-bar returns, cleaned, and their annualization; the index's
returns and the dollars traded per bar, read from a market and a transactions table."""

from __future__ import annotations

import pandas as pd

from finpod.data.market import MarketData, periods_per_year

#: Bars per year (a number), or a bar size whose :func:`periods_per_year` is used.
Annualization = str | float


def bars_per_year(bar: Annualization) -> float:
    """Bars per year: ``bar`` itself when it is a number, else ``periods_per_year(bar)``."""
    if isinstance(bar, str):
        return periods_per_year(bar)
    value = float(bar)
    if not value > 0:
        raise ValueError(f"bars per year must be positive, got {bar!r}")
    return value


def clean_returns(returns: pd.Series) -> pd.Series:
    """Returns as float64, without missing values."""
    returns = pd.Series(returns, dtype="float64")
    return returns.dropna()


def traded_value(transactions: pd.DataFrame, index: pd.DatetimeIndex) -> pd.Series:
    """(T,) dollars bought + sold per bar, from a transactions table."""
    if transactions is None or transactions.empty:
        return pd.Series(0.0, index=index)
    when = transactions["timestamp"] if "timestamp" in transactions.columns else transactions.index
    notional = transactions["shares"].astype(float).abs() * transactions["price"].astype(float)
    per_bar = notional.groupby(pd.DatetimeIndex(when)).sum()
    return per_bar.reindex(index, fill_value=0.0).astype(float)


def index_returns(market: MarketData) -> pd.Series | None:
    """(T − 1,) simple returns of the dataset's index level, bar 1 onwards (as a rollout's)."""
    if market.benchmark is None:
        return None
    level = pd.Series(market.benchmark.to_numpy(dtype=float), index=market.timestamps)
    # A missing index print carries the last level (past only), so the move lands on the
    # next print instead of being lost.
    level = level.where(level > 0).ffill()
    return level.pct_change(fill_method=None).iloc[1:].fillna(0.0)
