"""Small hand-built markets for the env tests (no dependency on the data pipeline)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from finpod.data.calendar import bar_grid, get_calendar
from finpod.data.market import MarketData


def make_market(
    num_bars: int = 20,
    num_stocks: int = 3,
    num_features: int = 2,
    seed: int = 0,
    listing: list[int] | None = None,
    untradable: float = 0.0,
    bar: str = "1d",
    start: str = "2020-11-24",
) -> MarketData:
    """Random-walk market; ticker j lists at bar ``listing[j]`` (price 0, untradable before).

    ``untradable`` is the probability that a listed (bar, ticker) is marked not tradable
    (a filled bar: the price is carried from the previous bar). Daily bars are stamped on
    business days from 2020-01-02; intraday bars (e.g. ``bar="30min"``) lie on the XNYS
    grid of the sessions from ``start`` (2020-11-27, the day after Thanksgiving, closes at
    13:00), starting at a session's open.
    """
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0, 0.02, size=(num_bars, num_stocks))
    close = 50.0 * np.exp(np.cumsum(steps, axis=0)) * rng.uniform(0.5, 2.0, size=num_stocks)
    open_ = close * np.exp(rng.normal(0.0, 0.005, size=close.shape))
    tradable = np.ones((num_bars, num_stocks), dtype=bool)
    if untradable > 0:
        filled = rng.random((num_bars, num_stocks)) < untradable
        for t in range(1, num_bars):
            carry = filled[t]
            close[t, carry] = close[t - 1, carry]
            open_[t, carry] = close[t - 1, carry]
        tradable &= ~filled
    if listing is not None:
        for j, start in enumerate(listing):
            close[:start, j] = 0.0
            open_[:start, j] = 0.0
            tradable[:start, j] = False
    features = rng.normal(0.0, 1.0, size=(num_bars, num_stocks, num_features))
    if bar == "1d":
        timestamps = pd.date_range(
            "2020-01-02 16:00", periods=num_bars, freq="B", tz="America/New_York"
        )
    else:
        cal = get_calendar("XNYS")
        sessions = cal.sessions_in_range(
            pd.Timestamp(start), pd.Timestamp(start) + pd.Timedelta(days=60)
        )
        timestamps = bar_grid(sessions, bar)[:num_bars]
    return MarketData(
        timestamps=timestamps,
        tickers=[f"T{j:03d}" for j in range(num_stocks)],
        open=torch.tensor(open_, dtype=torch.float32),
        close=torch.tensor(close, dtype=torch.float32),
        features=torch.tensor(features, dtype=torch.float32),
        feature_names=[f"f{k}" for k in range(num_features)],
        tradable=torch.tensor(tradable),
        bar=bar,
    )


def reference_price_z(marks: np.ndarray, t: int, j: int, window: int = 20) -> float:
    """The ``prices`` observation of ticker j at bar t from its marks (slow, obvious).

    Bars ``lo = max(0, t − W + 1) .. t``: z = (log m_t − mean of log m over the bars with a
    mark) / (RMS of the 1-bar log returns into those bars, where both marks exist, · √W).
    """
    if marks[t, j] <= 0:
        return 0.0
    lo = max(0, t - window + 1)
    logs = [np.log(marks[i, j]) for i in range(lo, t + 1) if marks[i, j] > 0]
    rets = [
        np.log(marks[i, j] / marks[i - 1, j])
        for i in range(max(lo, 1), t + 1)
        if marks[i, j] > 0 and marks[i - 1, j] > 0
    ]
    rms = max(float(np.sqrt(np.mean(np.square(rets)))) if rets else 0.0, 1e-6)
    z = (np.log(marks[t, j]) - np.mean(logs)) / (rms * np.sqrt(window))
    return float(np.clip(z, -10.0, 10.0))


def session_positions(market: MarketData) -> tuple[np.ndarray, np.ndarray]:
    """(T,) position of each bar in its session and bars left after it (the market must
    hold whole sessions; read from the timestamps' dates, independent of the env)."""
    dates = np.asarray(market.timestamps.date)
    index = np.zeros(len(dates), dtype=int)
    left = np.zeros(len(dates), dtype=int)
    for day in np.unique(dates):
        rows = np.flatnonzero(dates == day)
        index[rows] = np.arange(len(rows))
        left[rows] = np.arange(len(rows))[::-1]
    return index, left
