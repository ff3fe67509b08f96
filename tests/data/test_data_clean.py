"""Cleaning: every bad input gets a clear error or a documented repair."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finpod.data import clean_long, from_frame
from finpod.errors import FinpodError

from .conftest import make_daily


def _row(df, tic, i):
    return df.index[df["tic"] == tic][i]


def test_missing_column_error_names_it(daily):
    with pytest.raises(FinpodError, match="missing column.*volume"):
        clean_long(daily.drop(columns=["volume"]), "1d")


def test_misnamed_columns_aliases_and_mapping(daily):
    renamed = daily.rename(
        columns={"date": "Date", "tic": "Symbol", "open": "Open", "close": "Close"}
    )
    a, _ = clean_long(daily, "1d")
    b, _ = clean_long(renamed, "1d")
    np.testing.assert_array_equal(a.close, b.close)
    odd = daily.rename(columns={"close": "px_last"})
    with pytest.raises(FinpodError, match="close"):
        clean_long(odd, "1d")
    c, _ = clean_long(odd, "1d", columns={"px_last": "close"})
    np.testing.assert_array_equal(a.close, c.close)


def test_empty_input_is_an_error(daily):
    with pytest.raises(FinpodError, match="no rows"):
        clean_long(daily.iloc[:0], "1d")


@pytest.mark.parametrize(
    "column,value,reason",
    [
        ("close", np.nan, "missing_price"),
        ("open", 0.0, "non_positive_price"),
        ("low", -3.0, "non_positive_price"),
    ],
)
def test_bad_price_rejected_and_filled_from_past(daily, column, value, reason):
    i = _row(daily, "BBB", 10)
    prev_close = daily.loc[_row(daily, "BBB", 9), "close"]
    bad = daily.copy()
    bad.loc[i, column] = value
    bars, report = clean_long(bad, "1d")
    j = bars.tickers.index("BBB")
    assert report["dropped"][reason] == 1
    assert not bars.tradable[10, j] and bars.filled[10, j]
    # Filled from the past: a flat bar at the previous close, volume 0, never 0 price.
    for arr in (bars.open, bars.high, bars.low, bars.close):
        assert arr[10, j] == pytest.approx(prev_close, rel=1e-6)
    assert bars.volume[10, j] == 0


def test_high_below_low_rejected(daily):
    bad = daily.copy()
    i = _row(bad, "AAA", 5)
    bad.loc[i, ["high", "low"]] = [10.0, 20.0]
    bars, report = clean_long(bad, "1d")
    assert report["dropped"]["high_below_low"] == 1
    assert not bars.tradable[5, bars.tickers.index("AAA")]


def test_duplicates(daily):
    exact = pd.concat([daily, daily.iloc[[3, 4]]], ignore_index=True)
    bars, report = clean_long(exact, "1d")
    assert report["repaired"]["exact_duplicates_dropped"] == 2
    assert bars.tradable.all()
    conflict = daily.iloc[[3]].copy()
    conflict["close"] *= 1.5
    bad = pd.concat([daily, conflict], ignore_index=True)
    bars, report = clean_long(bad, "1d")
    assert report["dropped"]["conflicting_duplicates"] == 2
    t = 3  # row 3 is AAA's 4th bar
    assert not bars.tradable[t, bars.tickers.index(daily.loc[3, "tic"])]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000))
def test_row_order_does_not_matter(seed):
    df = make_daily(n=40)
    a, _ = clean_long(df, "1d")
    shuffled = df.sample(frac=1.0, random_state=seed)
    b, rep = clean_long(shuffled, "1d")
    for name in ("open", "high", "low", "close", "volume", "tradable"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.tickers == b.tickers


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_gaps_filled_from_past_only_never_backfilled(data):
    df = make_daily(tickers=("AAA", "BBB"), n=30)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(df), max_size=len(df))))
    keep[df.index[df["tic"] == "AAA"][[0, -1]]] = True  # AAA sets the grid's ends
    sub = df[keep]
    if (sub["tic"] == "BBB").sum() < 2:
        return
    bars, _ = clean_long(sub, "1d", min_coverage=0.0)
    j = bars.tickers.index("BBB")
    b = df[df["tic"] == "BBB"].reset_index(drop=True)
    seen = keep[df["tic"].to_numpy() == "BBB"]
    last = None
    for t in range(len(bars.timestamps)):
        if seen[t]:
            last = b.loc[t, "close"]
            assert bars.tradable[t, j] and bars.close[t, j] == pytest.approx(last, rel=1e-6)
        elif last is None:
            assert np.isnan(bars.close[t, j]) and not bars.tradable[t, j] and not bars.filled[t, j]
        else:
            assert bars.close[t, j] == pytest.approx(last, rel=1e-6) and bars.filled[t, j]


def test_late_listing_masked_with_zero_price_in_tensors(daily):
    late = daily[~((daily["tic"] == "CCC") & (daily.groupby("tic").cumcount() < 20))]
    m = from_frame(late)
    j = m.tickers.index("CCC")
    assert (m.close[:20, j] == 0).all() and not m.tradable[:20, j].any()
    assert (m.close[20:, j] > 0).all() and m.tradable[20:, j].all()


def test_timestamps_outside_sessions_dropped(daily):
    extra = daily.iloc[[0]].copy()
    extra["date"] = "2019-01-05"  # a Saturday
    hol = daily.iloc[[1]].copy()
    hol["date"] = "2019-01-21"  # Martin Luther King Jr. Day
    bars, report = clean_long(pd.concat([daily, extra, hol]), "1d")
    assert report["dropped"]["outside_sessions"] == 2
    assert pd.Timestamp("2019-01-21", tz="America/New_York") not in bars.timestamps
    assert pd.Timestamp("2019-01-05", tz="America/New_York") not in bars.timestamps


def test_minute_bars_outside_regular_session_dropped():
    stamps = pd.date_range("2019-02-11 09:00", "2019-02-11 16:30", freq="1min")
    df = pd.DataFrame(
        {
            "timestamp": stamps,
            "tic": "X",
            "open": 10.0,
            "high": 10.5,
            "low": 9.5,
            "close": 10.0,
            "volume": 1.0,
        }
    )
    bars, report = clean_long(df, "1min", bar_label="start")
    assert len(bars.timestamps) == 390
    assert (
        bars.timestamps[0].strftime("%H:%M") == "09:30"
        and bars.timestamps[-1].strftime("%H:%M") == "15:59"
    )
    assert report["dropped"]["outside_sessions"] == len(stamps) - 390


def test_half_day_has_short_session():
    stamps = pd.date_range(
        "2019-11-29 09:30", "2019-11-29 15:59", freq="1min"
    )  # day after Thanksgiving
    df = pd.DataFrame(
        {
            "timestamp": stamps,
            "tic": "X",
            "open": 10.0,
            "high": 10.5,
            "low": 9.5,
            "close": 10.0,
            "volume": 1.0,
        }
    )
    bars, _ = clean_long(df, "1min", bar_label="start")
    assert len(bars.timestamps) == 210  # 09:30–13:00


def test_naive_and_aware_timestamps_agree():
    stamps = pd.date_range("2019-07-01 09:30", periods=60, freq="1min")
    base = pd.DataFrame(
        {
            "tic": "X",
            "open": 10.0,
            "high": 10.5,
            "low": 9.5,
            "close": np.linspace(10, 11, 60),
            "volume": 1.0,
        }
    )
    naive = base.assign(timestamp=stamps)
    utc = base.assign(timestamp=stamps.tz_localize("America/New_York").tz_convert("UTC"))
    text = base.assign(timestamp=utc["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S+00:00"))
    a, ra = clean_long(naive, "1min", bar_label="start")
    b, rb = clean_long(utc, "1min", bar_label="start")
    c, _ = clean_long(text, "1min", bar_label="start")
    assert a.timestamps.equals(b.timestamps) and a.timestamps.equals(c.timestamps)
    np.testing.assert_array_equal(a.close, b.close)
    assert "naive" in ra["input_timezone"] and "UTC" in rb["input_timezone"]
    # A naive timestamp read in another zone lands elsewhere (here: before the open → dropped).
    with pytest.raises(FinpodError, match="no bar falls on an exchange session"):
        clean_long(naive, "1min", bar_label="start", timezone="Europe/London")


def test_daily_dates_keep_their_wall_clock_date(daily):
    aware = daily.assign(date=pd.to_datetime(daily["date"]).dt.tz_localize("UTC"))
    a, _ = clean_long(daily, "1d")
    b, _ = clean_long(aware, "1d")
    assert a.timestamps.equals(b.timestamps)


def test_sparse_ticker_dropped_and_reported(daily):
    sparse = daily[~((daily["tic"] == "BBB") & (daily.groupby("tic").cumcount() % 3 != 0))]
    bars, report = clean_long(sparse, "1d", min_coverage=0.8)
    assert "BBB" not in bars.tickers and "BBB" in report["tickers_dropped"]
    bars, _ = clean_long(sparse, "1d", min_coverage=0.2)
    assert "BBB" in bars.tickers


def test_unparseable_and_all_bad():
    df = make_daily(n=5)
    df.loc[0, "date"] = "not a date"
    _, report = clean_long(df, "1d")
    assert report["dropped"]["unreadable_timestamp"] == 1
    df["close"] = -1.0
    with pytest.raises(FinpodError, match="no usable bars"):
        clean_long(df, "1d")


def test_unadjusted_split_is_reported_not_changed(daily):
    bad = daily.copy()
    rows = bad.index[(bad["tic"] == "AAA") & (bad.groupby("tic").cumcount() >= 30)]
    bad.loc[rows, ["open", "high", "low", "close"]] /= 4.0
    bars, report = clean_long(bad, "1d")
    assert list(report["large_moves"]) == ["AAA"]
    assert report["large_moves"]["AAA"] == [str(bars.timestamps[30])]
    j = bars.tickers.index("AAA")
    assert bars.close[30, j] == pytest.approx(bad.loc[rows[0], "close"], rel=1e-6)
    assert clean_long(daily, "1d")[1]["large_moves"] == {}


def test_rows_without_a_ticker_are_dropped(daily):
    bad = daily.copy()
    bad["tic"] = bad["tic"].astype(object)
    bad.loc[[2, 5], "tic"] = [None, "  "]
    bars, report = clean_long(bad, "1d")
    assert report["dropped"]["missing_ticker"] == 2
    assert bars.tickers == ["AAA", "BBB", "CCC"]
