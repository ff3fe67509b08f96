"""Fuzzing the cleaner with the mistakes one row makes: a mistyped year, a ticker with a
single row, and tickers stamped by vendors with different conventions (a date, a close
time or UTC midnight for daily bars; bar start or bar end, offsets or New York wall time
for minute bars).

The oracle: nothing changes unless the user asked for it. Either the build fails with one
finpod error that names a ticker it was handed a bad row of, or it yields exactly the
tickers, the range, the splits, the listing dates and the closes of the clean input; with
``drop_bad_tickers`` (the user asking) a one-row ticker goes, named with its cause, and
nothing else changes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finpod.data.calendar import bar_grid, sessions
from finpod.data.clean import clean_long
from finpod.data.splits import plan_splits
from finpod.errors import FinpodError
from tests.data.conftest import make_daily

TICKERS = ("AAA", "BBB", "CCC")
DAILY_WAYS = ("date", "close_time", "utc_midnight")
MINUTE_WAYS = ("start_aware", "end_aware", "start_naive", "end_naive")


def _minute_base() -> pd.DataFrame:
    grid = bar_grid(sessions("2019-03-04", "2019-03-20")[:4], "5min", "XNYS")
    rng = np.random.default_rng(0)
    frames = []
    for k, tic in enumerate(TICKERS):
        close = 50 * (k + 1) * np.exp(np.cumsum(0.001 * rng.standard_normal(len(grid))))
        frames.append(
            pd.DataFrame(
                {
                    "date": grid,
                    "tic": tic,
                    "open": close,
                    "high": close * 1.001,
                    "low": close * 0.999,
                    "close": close,
                    "volume": 100.0,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


DAILY = make_daily(TICKERS, n=80)
MINUTE = _minute_base()
TRUTH = {
    "1d": clean_long(DAILY, "1d"),
    "5min": clean_long(MINUTE.assign(date=MINUTE["date"].astype(str)), "5min"),
}


def _write(stamps: pd.Series, way: str) -> pd.Series:
    """The stamps of one ticker as its vendor writes them."""
    if way == "date":
        return pd.to_datetime(stamps).dt.strftime("%Y-%m-%d")
    if way == "close_time":
        return pd.to_datetime(stamps).dt.strftime("%Y-%m-%d") + " 16:00"
    if way == "utc_midnight":
        return pd.to_datetime(stamps).dt.strftime("%Y-%m-%d") + " 00:00:00+00:00"
    t = stamps + pd.Timedelta(minutes=5) if way.startswith("end") else stamps
    if way.endswith("aware"):
        return t.dt.tz_convert("UTC").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return t.dt.strftime("%Y-%m-%d %H:%M")  # naive New York wall time


@st.composite
def bad_inputs(draw):
    bar = draw(st.sampled_from(["1d", "5min"]))
    base = (DAILY if bar == "1d" else MINUTE).copy()
    ways = DAILY_WAYS if bar == "1d" else MINUTE_WAYS
    parts = []
    for tic in TICKERS:
        rows = base[base.tic == tic].copy()
        rows["date"] = _write(rows["date"], draw(st.sampled_from(ways))).to_numpy()
        parts.append(rows)
    df = pd.concat(parts, ignore_index=True)
    typos = draw(
        st.lists(
            st.tuples(st.integers(0, len(df) - 1), st.sampled_from([-5, -3, -1, 1, 2, 4])),
            max_size=2,
            unique_by=lambda t: t[0],
        )
    )
    mistyped = set()
    for row, shift in typos:
        text = str(df.at[row, "date"])
        df.at[row, "date"] = f"{int(text[:4]) + shift:04d}{text[4:]}"
        mistyped.add(df.at[row, "tic"])
    lone = draw(st.lists(st.sampled_from(["DDD", "EEE"]), max_size=2, unique=True))
    for tic in lone:
        pick = base.iloc[[draw(st.integers(0, len(base) - 1))]].assign(tic=tic)
        when = draw(st.sampled_from(["inside", "years before"]))
        way = ways[0]
        pick["date"] = _write(pick["date"], way).to_numpy()
        if when == "years before":
            pick["date"] = [f"{int(s[:4]) - 3}{s[4:]}" for s in pick["date"]]
        df = pd.concat([df, pick], ignore_index=True)
    drop = draw(st.booleans())
    return bar, df, mistyped, set(lone), drop


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(bad_inputs())
def test_one_bad_row_changes_no_ticker_range_or_split(case):
    bar, df, mistyped, lone, drop = case
    truth, truth_report = TRUTH[bar]
    try:
        bars, report = clean_long(df, bar, drop_bad_tickers=drop)
    except FinpodError as err:
        # refused: only for a bad row, and naming a ticker it was given one of
        named = mistyped | lone
        assert named, f"a clean input was refused: {err}"
        assert any(t in str(err) for t in named) or "label" in str(err), str(err)
        return
    assert not mistyped, "a mistyped year was built without a word"
    assert drop or not lone, "a one-row ticker was dropped without being asked"
    for tic in lone:
        assert tic in report["tickers_dropped"]  # named with its cause
    assert bars.tickers == truth.tickers
    assert bars.timestamps.equals(truth.timestamps)
    assert plan_splits(bars.timestamps) == plan_splits(truth.timestamps)
    assert report["listed_late"] == truth_report["listed_late"]
    assert report.get("delisted") == truth_report.get("delisted")
    np.testing.assert_allclose(bars.close, truth.close, rtol=0, atol=0)
