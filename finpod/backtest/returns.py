"""What every metric takes: per-bar returns, cleaned, and their annualization."""

from __future__ import annotations

import pandas as pd

from finpod.data.market import periods_per_year

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
