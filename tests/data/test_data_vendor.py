"""Vendor file formats read from real files: Stooq/Kibot layouts, suffixes, mixed zones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data.sources import SAMPLE_DIR, load_files
from finpod.errors import FinpodError

MINUTES = SAMPLE_DIR / "minute_samples"
NY = "America/New_York"


@pytest.fixture(scope="module")
def aapl():
    """The real AAPL minute bars as finpod reads them (bar starts, New York)."""
    return load_files(MINUTES, tickers=["AAPL"]).bars


def _frame(bars) -> pd.DataFrame:
    ts = bars.timestamps
    keep = bars.tradable[:, 0]
    return pd.DataFrame(
        {
            "ts": ts[keep],
            "open": bars.open[keep, 0],
            "high": bars.high[keep, 0],
            "low": bars.low[keep, 0],
            "close": bars.close[keep, 0],
            "volume": bars.volume[keep, 0],
        }
    )


def _same(src, ref) -> None:
    assert src.bars.timestamps.equals(ref.timestamps)
    np.testing.assert_allclose(src.bars.close, ref.close, rtol=1e-6)
    np.testing.assert_array_equal(src.bars.tradable, ref.tradable)


def test_stooq_bracketed_headers_compact_date_time_and_suffix(tmp_path, aapl):
    f = _frame(aapl)
    stooq = pd.DataFrame(
        {
            "<TICKER>": "AAPL.US",
            "<PER>": 1,
            "<DATE>": f["ts"].dt.strftime("%Y%m%d"),
            "<TIME>": f["ts"].dt.strftime("%H%M%S"),
            "<OPEN>": f["open"],
            "<HIGH>": f["high"],
            "<LOW>": f["low"],
            "<CLOSE>": f["close"],
            "<VOL>": f["volume"],
            "<OPENINT>": 0,
        }
    )
    stooq.to_csv(tmp_path / "aapl.us.txt", index=False)
    src = load_files(tmp_path, ticker_pattern=r"^(.*)\.US$", bar_label="start")
    assert src.bars.tickers == ["AAPL"]
    _same(src, aapl)
    # Without the pattern the vendor's symbol is kept as it is.
    assert load_files(tmp_path, bar_label="start").bars.tickers == ["AAPL.US"]


def test_ticker_pattern_on_file_names(tmp_path, aapl):
    f = _frame(aapl)
    f.rename(columns={"ts": "timestamp"}).to_csv(tmp_path / "aapl.us.csv", index=False)
    src = load_files(tmp_path, ticker_pattern=r"^(.*)\.US$")
    assert src.bars.tickers == ["AAPL"]
    _same(src, aapl)


def test_kibot_style_date_and_time_columns_and_lost_leading_zero(tmp_path, aapl):
    f = _frame(aapl)
    kibot = pd.DataFrame(
        {
            "Date": f["ts"].dt.strftime("%m/%d/%Y"),
            "Time": f["ts"].dt.strftime("%H:%M"),
            "Open": f["open"],
            "High": f["high"],
            "Low": f["low"],
            "Close": f["close"],
            "Volume": f["volume"],
        }
    )
    kibot.to_csv(tmp_path / "AAPL.txt", index=False)
    _same(load_files(tmp_path), aapl)
    # Times written as integers (093000 → 93000 by a spreadsheet) are read back as 09:30:00.
    kibot["Date"] = f["ts"].dt.strftime("%Y%m%d").astype(int)
    kibot["Time"] = f["ts"].dt.strftime("%H%M%S").astype(int)
    kibot.to_csv(tmp_path / "AAPL.txt", index=False)
    assert kibot["Time"].iloc[0] == 93000
    _same(load_files(tmp_path), aapl)


def test_compact_daily_dates(tmp_path):
    days = pd.DatetimeIndex(["2019-01-02", "2019-01-03", "2019-01-04", "2019-01-07"])
    df = pd.DataFrame(
        {
            "<DATE>": days.strftime("%Y%m%d"),
            "<TIME>": "000000",
            "<OPEN>": [10.0, 11, 12, 13],
            "<HIGH>": [11.0, 12, 13, 14],
            "<LOW>": [9.0, 10, 11, 12],
            "<CLOSE>": [10.5, 11.5, 12.5, 13.5],
            "<VOL>": 100,
        }
    )
    df.to_csv(tmp_path / "XYZ.csv", index=False)
    src = load_files(tmp_path)
    assert src.bars.bar == "1d"
    assert list(src.bars.timestamps.strftime("%Y-%m-%d")) == list(days.strftime("%Y-%m-%d"))
    # A single column of compact dates (an integer column in the CSV) is a date too.
    df2 = pd.DataFrame({"date": days.strftime("%Y%m%d").astype(int), "close": [1.0, 2, 3, 4]})
    df2 = df2.assign(open=df2["close"], high=df2["close"], low=df2["close"], volume=1)
    df2.to_csv(tmp_path / "XYZ.csv", index=False)
    assert load_files(tmp_path).bars.timestamps.equals(src.bars.timestamps)


def test_files_mixing_aware_and_naive_stamps_are_repaired(tmp_path, aapl):
    """One vendor ships UTC-aware Parquet, another naive New York CSV: naive = --timezone."""
    f = _frame(aapl)
    half = len(f) // 2
    a = f.iloc[:half].rename(columns={"ts": "timestamp"})
    a = a.assign(timestamp=a["timestamp"].dt.tz_convert("UTC"), tic="AAPL")
    a.to_parquet(tmp_path / "part1.parquet")
    b = f.iloc[half:].rename(columns={"ts": "timestamp"})
    b = b.assign(timestamp=b["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S"), tic="AAPL")
    b.to_csv(tmp_path / "part2.csv", index=False)
    src = load_files(tmp_path, bar_label="start")
    _same(src, aapl)
    assert "mixed" in src.report["input_timezone"]
    assert src.report["mixed_naive_and_aware"].startswith(f"{len(f) - half} naive")


def test_one_file_mixing_aware_and_naive_stamps(tmp_path, aapl):
    f = _frame(aapl).rename(columns={"ts": "timestamp"})
    text = f["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    aware = f["timestamp"].dt.tz_convert("UTC").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    f["timestamp"] = text.where(np.arange(len(f)) % 2 == 0, aware)
    f.to_csv(tmp_path / "AAPL.csv", index=False)
    _same(load_files(tmp_path, bar_label="start"), aapl)


def test_bad_ticker_pattern_is_one_line(tmp_path, aapl):
    _frame(aapl).rename(columns={"ts": "timestamp"}).to_csv(tmp_path / "aapl.us.csv", index=False)
    with pytest.raises(FinpodError, match="not a regular expression"):
        load_files(tmp_path, ticker_pattern="(")
    with pytest.raises(FinpodError, match="no group"):
        load_files(tmp_path, ticker_pattern=r"^.*\.US$")
    with pytest.raises(FinpodError, match="cannot read a ticker from the file name"):
        load_files(tmp_path, ticker_pattern=r"^(.*)\.DE$")


@pytest.mark.parametrize(
    "shift,stamp",
    [
        (0, "%Y-%m-%d"),
        (0, "%Y-%m-%d 00:00:00+00:00"),  # midnight UTC: the date, not the previous NY evening
        (0, "%Y-%m-%d 16:00:00-05:00"),  # at the close, New York
        (0, "%Y-%m-%d 21:00:00Z"),  # the same instant in UTC
        (1, "%Y-%m-%d 06:00:00+09:00"),  # the same instant in Tokyo: next day's wall date
        (0, "%Y-%m-%d 16:00:00"),  # naive, read in New York
    ],
)
def test_daily_bars_stamped_any_way_land_on_their_session(tmp_path, shift, stamp):
    days = pd.DatetimeIndex(["2019-01-02", "2019-01-03", "2019-01-04", "2019-01-07"])
    close = [10.0, 11.0, 12.0, 13.0]
    written = (days + pd.Timedelta(days=shift)).strftime(stamp)
    df = pd.DataFrame({"date": written, "close": close})
    df = df.assign(open=df["close"], high=df["close"], low=df["close"], volume=1)
    df.to_csv(tmp_path / "XYZ.csv", index=False)
    bars = load_files(tmp_path, bar="1d").bars
    assert list(bars.timestamps.strftime("%Y-%m-%d")) == list(days.strftime("%Y-%m-%d"))
    np.testing.assert_array_equal(bars.close[:, 0], close)


def test_unknown_timezone_is_one_line(tmp_path, aapl):
    _frame(aapl).rename(columns={"ts": "timestamp"}).assign(
        timestamp=lambda d: d["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    ).to_csv(tmp_path / "AAPL.csv", index=False)
    with pytest.raises(FinpodError, match="unknown time zone 'Mars/Base'"):
        load_files(tmp_path, timezone="Mars/Base")
