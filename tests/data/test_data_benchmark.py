"""Index benchmarks: causal alignment on daily and intraday bars, from files of any stamp."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import build_dataset, load_manifest, load_split
from finpod.data.benchmark import BENCHMARK_KIND, align_benchmark
from finpod.data.calendar import sessions
from finpod.data.sources import SAMPLE_DIR, SAMPLE_INDEX, load_files
from finpod.errors import FinpodError

from .conftest import make_daily

MINUTES = SAMPLE_DIR / "minute_samples"
NY = "America/New_York"


def _ndx() -> pd.Series:
    """Real ^NDX closes by session date (naive dates)."""
    idx = pd.read_csv(SAMPLE_DIR / SAMPLE_INDEX, index_col="Date", parse_dates=True)["Close"]
    return idx.loc["2018-12-01":"2019-06-30"]


def _write_levels(path, stamps, values) -> None:
    df = pd.DataFrame({"Date": stamps, "Close": np.asarray(values)})
    if str(path).endswith(".parquet"):
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False)


def _stampings(ndx: pd.Series) -> dict[str, object]:
    """The same daily levels stamped four ways vendors do it."""
    dates = ndx.index
    at_close = dates + pd.Timedelta(hours=16)
    return {
        "date_only.csv": dates.strftime("%Y-%m-%d"),
        "close_ny_aware.csv": at_close.tz_localize(NY).strftime("%Y-%m-%d %H:%M:%S%z"),
        "close_ny_naive.csv": at_close.strftime("%Y-%m-%d %H:%M:%S"),
        "close_as_utc.parquet": at_close.tz_localize(NY).tz_convert("UTC"),
        "midnight_utc.parquet": dates.tz_localize("UTC"),
        "midnight_utc.csv": dates.tz_localize("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


@pytest.fixture
def daily_dir(tmp_path):
    d = tmp_path / "bars"
    d.mkdir()
    make_daily(n=60, start="2019-01-02").to_csv(d / "long.csv", index=False)
    return d


@pytest.mark.parametrize("name", list(_stampings(_ndx())))
def test_daily_level_sits_on_its_own_session_on_daily_bars(tmp_path, daily_dir, name):
    ndx = _ndx()
    path = tmp_path / name
    _write_levels(path, _stampings(ndx)[name], ndx.to_numpy())
    src = load_files(daily_dir, benchmark=path)
    dates = src.bars.timestamps.tz_localize(None)
    # Neither a session late (16:00 stamps) nor a session early (midnight UTC = 19:00 NY).
    np.testing.assert_allclose(src.benchmark.to_numpy(), ndx.loc[dates].to_numpy())
    assert src.benchmark_info == {
        "name": name.split(".")[0],
        "kind": BENCHMARK_KIND,
        "source": str(path),
    }


@pytest.mark.parametrize("name", ["date_only.csv", "close_ny_aware.csv", "midnight_utc.parquet"])
def test_daily_level_appears_on_the_last_minute_of_its_session(tmp_path, name):
    """On 1-minute bars a session's close is known at the end of its last bar (15:59–16:00):
    every earlier minute of that day shows the previous session's close."""
    ndx = _ndx().loc["2019-02-01":"2019-02-28"]
    path = tmp_path / name
    _write_levels(path, _stampings(ndx)[name], ndx.to_numpy())
    src = load_files(MINUTES, tickers=["AAPL", "MSFT"], benchmark=path)
    ts = src.bars.timestamps
    bench = src.benchmark
    for day in sessions("2019-02-11", "2019-02-15"):
        prev = ndx.index[ndx.index.get_loc(day) - 1]
        in_day = ts.tz_localize(None).normalize() == day
        day_vals = bench[in_day].to_numpy()
        assert (day_vals[:-1] == ndx[prev]).all()  # 09:30 … 15:58: yesterday's close
        assert day_vals[-1] == ndx[day]  # 15:59 bar, ends at the close
        assert ts[in_day][-1].strftime("%H:%M") == "15:59"


def test_intraday_index_file_aligns_bar_by_bar(tmp_path):
    """The real QQQ minute file (stamped at bar ends) as a benchmark equals QQQ loaded as bars."""
    src = load_files(MINUTES, tickers=["AAPL"], benchmark=MINUTES / "QQQ_1min.csv")
    ref = load_files(MINUTES, tickers=["QQQ"]).bars
    assert "QQQ" not in src.bars.tickers  # the benchmark file is not read as a ticker
    assert src.bars.timestamps.equals(ref.timestamps)
    np.testing.assert_allclose(src.benchmark.to_numpy(), ref.close[:, 0], rtol=1e-6)


def _as_naive_utc(src, dst) -> None:
    """A copy of a minute file of ``src`` (naive New York stamps) with naive UTC stamps."""
    raw = pd.read_csv(src)
    utc = pd.to_datetime(raw["datetime"]).dt.tz_localize(NY).dt.tz_convert("UTC")
    raw.assign(datetime=utc.dt.strftime("%Y-%m-%d %H:%M:%S")).to_csv(dst, index=False)


def test_an_intraday_benchmark_with_naive_utc_stamps_aligns_bar_by_bar(tmp_path):
    """Bars and benchmark both written in naive UTC (``timezone="UTC"``): the benchmark is
    read in that zone too, so each bar shows the index level of its own minute."""
    bars = tmp_path / "bars"
    bars.mkdir()
    _as_naive_utc(MINUTES / "AAPL_1min.csv", bars / "AAPL_1min.csv")
    _as_naive_utc(MINUTES / "QQQ_1min.csv", tmp_path / "QQQ_1min.csv")
    src = load_files(bars, timezone="UTC", benchmark=tmp_path / "QQQ_1min.csv")
    ref = load_files(MINUTES, tickers=["QQQ"]).bars
    assert src.bars.timestamps.equals(ref.timestamps)
    np.testing.assert_allclose(src.benchmark.to_numpy(), ref.close[:, 0], rtol=1e-6)


def test_intraday_levels_on_daily_bars_use_the_session_close():
    raw = pd.read_csv(MINUTES / "QQQ_1min.csv")
    series = pd.Series(raw["close"].to_numpy(), index=pd.Index(raw["datetime"]))
    days = pd.DatetimeIndex(sessions("2019-02-11", "2019-02-15")).tz_localize(NY)
    out = align_benchmark(series, days, "1d")
    closes = raw[raw["datetime"].str.endswith("16:00:00")].set_index("datetime")["close"]
    np.testing.assert_allclose(out.to_numpy(), closes.sort_index().to_numpy())


def test_a_level_is_never_shown_before_the_close_it_reports():
    ndx = _ndx()
    minutes = pd.date_range("2019-01-02 09:30", "2019-01-02 15:59", freq="1min", tz=NY)
    out = align_benchmark(ndx, minutes, "1min")
    assert (out.iloc[:-1] == ndx.loc["2018-12-31"]).all()
    assert out.iloc[-1] == ndx.loc["2019-01-02"]


def test_benchmark_errors_are_one_line(tmp_path, daily_dir):
    with pytest.raises(FinpodError, match="benchmark file .* does not exist"):
        load_files(daily_dir, benchmark=tmp_path / "nope.csv")
    (tmp_path / "two.csv").write_text("date,a,b\n2019-01-02,1,2\n")
    with pytest.raises(FinpodError, match="which column holds the index level"):
        load_files(daily_dir, benchmark=tmp_path / "two.csv")
    (tmp_path / "old.csv").write_text("date,close\n2001-01-02,100\n2001-01-03,101\n")
    with pytest.raises(FinpodError, match="stops before the data"):  # not a flat line
        load_files(daily_dir, benchmark=tmp_path / "old.csv")
    (tmp_path / "late.csv").write_text("date,close\n2030-01-02,100\n2030-01-03,101\n")
    with pytest.raises(FinpodError, match="starts after the data"):
        load_files(daily_dir, benchmark=tmp_path / "late.csv")


def test_benchmark_recorded_in_manifest_and_loaded(tmp_path, daily_dir):
    ndx = _ndx()
    path = tmp_path / "NDX.csv"
    _write_levels(path, _stampings(ndx)["close_ny_aware.csv"], ndx.to_numpy())
    out = build_dataset("files", tmp_path / "ds", path=daily_dir, benchmark=path)
    man = load_manifest(out)
    assert man["benchmark"] == {"name": "NDX", "kind": "index level, no costs", "source": str(path)}
    m = load_split(out, "backtest")
    assert m.benchmark is not None and m.benchmark.name == "NDX"
    np.testing.assert_allclose(
        m.benchmark.to_numpy(), ndx.loc[m.timestamps.tz_localize(None)].to_numpy()
    )
    plain = build_dataset("files", tmp_path / "ds2", path=daily_dir)
    assert load_manifest(plain)["benchmark"] is None and load_split(plain, "all").benchmark is None
