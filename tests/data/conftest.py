"""Fixtures of the data-layer tests: a built sample dataset and tiny bar tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import build_dataset
from finpod.data.calendar import sessions


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory):
    """The shipped sample built once for the whole test session."""
    return build_dataset("sample", tmp_path_factory.mktemp("sample") / "ds")


def make_daily(tickers=("AAA", "BBB", "CCC"), n=80, start="2019-01-02", seed=0) -> pd.DataFrame:
    """A clean long table of daily bars on real XNYS sessions."""
    rng = np.random.default_rng(seed)
    days = sessions(start, pd.Timestamp(start) + pd.Timedelta(days=3 * n))[:n]
    rows = []
    for k, tic in enumerate(tickers):
        close = 50 * (k + 1) * np.exp(np.cumsum(0.01 * rng.standard_normal(n)))
        open_ = close * np.exp(0.002 * rng.standard_normal(n))
        high = np.maximum(open_, close) * 1.01
        low = np.minimum(open_, close) * 0.99
        vol = rng.integers(1000, 5000, n).astype(float)
        rows.append(
            pd.DataFrame(
                {
                    "date": days.strftime("%Y-%m-%d"),
                    "tic": tic,
                    "open": open_,
                    "high": high,
                    "low": low,
                    "close": close,
                    "volume": vol,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


@pytest.fixture
def daily() -> pd.DataFrame:
    return make_daily()
