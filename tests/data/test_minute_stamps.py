"""Minute stamps: each ticker's bar label is read from its own stamps, naive UTC stamps
get the hint that reads them right, and daily stamps written several ways are daily."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data.calendar import bar_grid, sessions
from finpod.data.clean import clean_long
from finpod.errors import FinpodError
from tests.data.conftest import make_daily


def _minutes(tic: str, n_sessions: int = 3, seed: int = 0) -> pd.DataFrame:
    """5-minute bars of ``tic``, stamped at their start (New York, tz-aware)."""
    rng = np.random.default_rng(seed)
    grid = bar_grid(sessions("2019-03-04", "2019-03-20")[:n_sessions], "5min", "XNYS")
    close = 100 * np.exp(np.cumsum(0.001 * rng.standard_normal(len(grid))))
    return pd.DataFrame(
        {
            "timestamp": grid,
            "tic": tic,
            "open": close,
            "high": close * 1.001,
            "low": close * 0.999,
            "close": close,
            "volume": 100.0,
        }
    )


def test_each_ticker_keeps_its_own_bar_label_when_vendors_differ():
    start = pd.concat([_minutes("AAA"), _minutes("BBB", seed=1)])
    end = _minutes("CCC", seed=2)
    truth, _ = clean_long(pd.concat([start, end]), "5min")
    # CCC's vendor stamps each bar at its end (09:35 … 16:00)
    late = end.assign(timestamp=end["timestamp"] + pd.Timedelta(minutes=5))
    bars, report = clean_long(pd.concat([start, late]), "5min")
    assert bars.timestamps.equals(truth.timestamps)
    np.testing.assert_array_equal(bars.close, truth.close)
    assert "end" in report["bar_label"] and "CCC" in report["bar_label"]


def test_naive_utc_minute_stamps_get_the_timezone_hint_not_lower_coverage():
    df = pd.concat([_minutes("AAA"), _minutes("BBB", seed=1)])
    utc = df.assign(timestamp=df["timestamp"].dt.tz_convert("UTC").dt.strftime("%Y-%m-%d %H:%M:%S"))
    with pytest.raises(FinpodError) as err:
        clean_long(utc, "5min")
    assert "pass --timezone UTC" in str(err.value)
    bars, _ = clean_long(utc, "5min", timezone="UTC")
    truth, _ = clean_long(df, "5min")
    np.testing.assert_array_equal(bars.close, truth.close)


def test_daily_stamps_written_three_ways_are_daily_bars():
    df = make_daily(n=60)
    day = pd.to_datetime(df["date"])
    ways = {
        "AAA": day.dt.strftime("%Y-%m-%d"),
        "BBB": day.dt.strftime("%Y-%m-%d") + " 16:00",
        "CCC": day.dt.strftime("%Y-%m-%d") + " 00:00:00+00:00",
    }
    df["date"] = [ways[t].iloc[i] for i, t in enumerate(df["tic"])]
    bars, report = clean_long(df, None)
    assert report["bar_inferred"] == "1d"
    assert bars.bar == "1d" and len(bars.timestamps) == 60
    assert bool(bars.tradable.all())
