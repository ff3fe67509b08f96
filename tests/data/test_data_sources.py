"""Sources: the real minute files, vendor directories, yfinance without a network."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import build_dataset, load_manifest, load_split
from finpod.data.sources import SAMPLE_DIR, load_files, plan_chunks
from finpod.errors import FinpodError

MINUTES = SAMPLE_DIR / "minute_samples"


def test_reversed_naive_minute_files_load_in_time_order():
    src = load_files(MINUTES)
    bars = src.bars
    assert bars.bar == "1min" and bars.tickers == [
        "AAPL",
        "AMZN",
        "MSFT",
        "MU",
        "QQQ",
        "SBUX",
        "TSLA",
    ]
    assert bars.timestamps.is_monotonic_increasing and len(bars.timestamps) == 5 * 390
    assert bars.timestamps[0] == pd.Timestamp("2019-02-11 09:30", tz="America/New_York")
    assert bars.timestamps[-1] == pd.Timestamp("2019-02-15 15:59", tz="America/New_York")
    assert src.report["repaired"]["rows_sorted"] is True
    raw = pd.read_csv(MINUTES / "AAPL_1min.csv")
    # The vendor stamps a bar at its end: "09:31" is the bar that starts at 09:30.
    first = raw[raw["datetime"] == "2019-02-11 09:31:00"].iloc[0]
    last = raw[raw["datetime"] == "2019-02-15 16:00:00"].iloc[0]
    j = bars.tickers.index("AAPL")
    assert bars.close[0, j] == pytest.approx(first["close"]) and bars.open[0, j] == pytest.approx(
        first["open"]
    )
    assert bars.close[-1, j] == pytest.approx(last["close"])


def test_minute_files_labelled_at_the_end_are_refused_under_an_explicit_start_label():
    # Read as bar starts, every bar would move by a minute and the 16:00 bars drop out.
    with pytest.raises(FinpodError, match="--bar-label start, but the stamps of .* at the end"):
        load_files(MINUTES, bar_label="start")


def test_files_long_table_with_custom_columns_and_aware_time(tmp_path):
    raw = pd.read_csv(MINUTES / "MSFT_1min.csv")
    ts = pd.to_datetime(raw["datetime"]).dt.tz_localize("America/New_York").dt.tz_convert("UTC")
    df = pd.DataFrame(
        {
            "Time": ts,
            "Symbol": "MSFT",
            "O": raw["open"],
            "H": raw["high"],
            "L": raw["low"],
            "C": raw["close"],
            "Vol": raw["volume"],
        }
    )
    df.to_parquet(tmp_path / "all.parquet")
    src = load_files(
        tmp_path,
        columns={
            "Time": "timestamp",
            "Symbol": "tic",
            "O": "open",
            "H": "high",
            "L": "low",
            "C": "close",
            "Vol": "volume",
        },
    )
    ref = load_files(MINUTES, tickers=["MSFT"])
    assert src.bars.timestamps.equals(ref.bars.timestamps)
    np.testing.assert_array_equal(src.bars.close, ref.bars.close)


def test_files_errors(tmp_path):
    with pytest.raises(FinpodError, match="does not exist"):
        load_files(tmp_path / "nope")
    with pytest.raises(FinpodError, match="no CSV or Parquet"):
        load_files(tmp_path)
    (tmp_path / "EMPTY.csv").write_text("")
    with pytest.raises(FinpodError, match="empty"):
        load_files(tmp_path)
    (tmp_path / "EMPTY.csv").write_text("datetime,open,high,low,close,volume\n")
    with pytest.raises(FinpodError, match="no rows"):
        load_files(tmp_path)
    with pytest.raises(FinpodError, match="unknown ticker.*ZZZZ"):
        load_files(MINUTES, tickers=["AAPL", "ZZZZ"])


def test_sample_errors():
    from finpod.data.sources import load_sample

    with pytest.raises(FinpodError, match="unknown ticker.*NOPE"):
        load_sample(tickers=["AAPL", "NOPE"])
    with pytest.raises(FinpodError, match="daily bars only"):
        load_sample(bar="1min")


def test_sample_point_in_time_outside_membership_is_sell_only_not_frozen():
    from finpod.data.sources import load_sample

    src = load_sample(tickers=["AAL", "AAPL"], point_in_time=True)
    b = src.bars
    j = b.tickers.index("AAL")  # joined the index 2014-12-22
    joined = np.flatnonzero(b.buyable[:, j])[0]
    assert str(b.timestamps[joined].date()) == "2014-12-22"
    assert b.buyable[:, b.tickers.index("AAPL")].all()
    # Before joining: real prices, tradable (a holder could sell), just not buyable.
    assert b.tradable[joined - 1, j] and not np.isnan(b.close[joined - 1, j])
    assert src.report["sell_only_outside_membership"] == joined


def test_minute_dataset_loads(tmp_path):
    out = build_dataset("files", tmp_path / "m", path=MINUTES)
    man = load_manifest(out)
    assert man["bar"] == "1min"
    m = load_split(out, "backtest")
    assert m.bar == "1min" and m.close.shape[1] == 7 and (m.close > 0).all()


# ----------------------------------------------------------------- yfinance (no network)
NOW = pd.Timestamp("2024-06-20 12:00")


def test_chunk_plan_respects_interval_limits():
    chunks = plan_chunks("2024-06-01", "2024-06-19", "1m", now=NOW)
    assert len(chunks) == 3 and all(b - a <= pd.Timedelta(days=7) for a, b in chunks)
    assert chunks[0][0] == pd.Timestamp("2024-06-01") and chunks[-1][1] == pd.Timestamp(
        "2024-06-20"
    )
    assert all(chunks[i][1] == chunks[i + 1][0] for i in range(len(chunks) - 1))
    assert len(plan_chunks("2000-01-01", "2024-06-19", "1d", now=NOW)) == 1
    assert len(plan_chunks("2023-01-01", "2024-06-19", "1h", now=NOW)) == 1


@pytest.mark.parametrize(
    "interval,start", [("1m", "2024-04-01"), ("5m", "2024-01-02"), ("1h", "2020-01-01")]
)
def test_range_beyond_what_the_interval_allows_is_an_error(interval, start):
    with pytest.raises(FinpodError, match="only the last ~\\d+ days"):
        plan_chunks(start, "2024-06-19", interval, now=NOW)


def _fake_download(frames, calls):
    def download(tic, start, end, interval, **kw):
        calls.append((tic, start, end, interval))
        return frames(tic, start, end)

    return download


def test_offline_yfinance_is_a_plain_error_and_writes_nothing(tmp_path, monkeypatch):
    import yfinance

    calls: list = []
    monkeypatch.setattr(yfinance, "download", _fake_download(lambda *a: pd.DataFrame(), calls))
    with pytest.raises(FinpodError, match="yfinance returned no data.*network"):
        build_dataset(
            "yfinance",
            tmp_path / "ds",
            tickers="AAPL,MSFT",
            start="2019-01-01",
            end="2019-06-30",
            cache_dir=tmp_path / "cache",
        )
    assert calls and not (tmp_path / "ds").exists()
    assert not list((tmp_path).glob("cache/**/*.parquet"))


def _yahoo_frame(tic, start, end):
    days = pd.bdate_range(start, end - pd.Timedelta(days=1), name="Date")
    rng = np.random.default_rng(abs(hash(tic)) % 1000)
    close = 100 * np.exp(np.cumsum(0.01 * rng.standard_normal(len(days))))
    cols = pd.MultiIndex.from_product(
        [["Adj Close", "Close", "High", "Low", "Open", "Volume"], [tic]], names=["Price", "Ticker"]
    )
    data = np.column_stack(
        [close, close, close * 1.01, close * 0.99, close, np.full(len(days), 1e6)]
    )
    return pd.DataFrame(data, index=days, columns=cols)


def test_yfinance_download_is_cached_and_resumable(tmp_path, monkeypatch):
    import yfinance

    calls: list = []
    monkeypatch.setattr(yfinance, "download", _fake_download(_yahoo_frame, calls))
    kw = {
        "tickers": "AAPL,MSFT",
        "start": "2019-01-01",
        "end": "2019-06-30",
        "cache_dir": tmp_path / "cache",
    }
    out = build_dataset("yfinance", tmp_path / "ds", **kw)
    # One request per ticker, plus one for the ^NDX benchmark.
    assert sorted(c[0] for c in calls) == ["AAPL", "MSFT", "^NDX"]
    m = load_split(out, "all")
    assert m.tickers == ["AAPL", "MSFT"] and m.tradable.all()
    # A second run reads the cache: no request at all.
    out2 = build_dataset("yfinance", tmp_path / "ds2", **kw)
    assert len(calls) == 3
    assert load_manifest(out)["hash"] == load_manifest(out2)["hash"]


def test_yfinance_bad_requests():
    from finpod.data.sources import load_yfinance

    with pytest.raises(FinpodError, match="needs --start"):
        load_yfinance(tickers="AAPL")
    with pytest.raises(FinpodError, match="no 3min bars"):
        load_yfinance(tickers="AAPL", start="2024-01-01", bar="3min")


def test_nasdaq100_point_in_time_universe():
    from finpod.data.sources import nasdaq100_members

    on_2019 = nasdaq100_members(on="2019-12-31")
    assert "AAPL" in on_2019 and "AAL" in on_2019 and len(on_2019) in range(100, 106)
    assert "AAL" not in nasdaq100_members(on="2013-06-28")  # joined 2014-12-22
    assert set(on_2019) <= set(nasdaq100_members(start="2015-01-01", end="2019-12-31"))


def test_yfinance_network_exception_is_a_plain_error(tmp_path, monkeypatch):
    import yfinance

    def boom(*a, **k):
        raise ConnectionError("Failed to resolve 'query2.finance.yahoo.com'")

    monkeypatch.setattr(yfinance, "download", boom)
    with pytest.raises(FinpodError, match="request for AAPL failed.*resolve"):
        build_dataset(
            "yfinance",
            tmp_path / "ds",
            tickers="AAPL",
            start="2019-01-01",
            end="2019-02-01",
            cache_dir=tmp_path / "c",
        )
    assert not (tmp_path / "ds").exists()


def test_yfinance_fetches_the_index_as_benchmark(tmp_path, monkeypatch):
    import yfinance

    calls: list = []
    monkeypatch.setattr(yfinance, "download", _fake_download(_yahoo_frame, calls))
    out = build_dataset(
        "yfinance",
        tmp_path / "ds",
        tickers="AAPL,MSFT",
        start="2019-01-01",
        end="2019-06-30",
        cache_dir=tmp_path / "cache",
    )
    man = load_manifest(out)
    assert man["benchmark"]["name"] == "^NDX"
    assert man["benchmark"]["kind"] == "index level, no costs"
    assert man["universe"]["point_in_time"] is False and "survivorship" in man["universe"]["note"]
    m = load_split(out, "all")
    ndx = _yahoo_frame("^NDX", pd.Timestamp("2019-01-01"), pd.Timestamp("2019-07-01"))
    ndx = ndx[("Close", "^NDX")]
    np.testing.assert_allclose(
        m.benchmark.to_numpy(), ndx.loc[m.timestamps.tz_localize(None)].to_numpy(), rtol=1e-6
    )


def test_yfinance_nasdaq100_is_point_in_time_and_sell_only_outside(tmp_path, monkeypatch):
    import yfinance

    from finpod.data.sources import load_yfinance, nasdaq100_members

    calls: list = []
    monkeypatch.setattr(yfinance, "download", _fake_download(_yahoo_frame, calls))
    src = load_yfinance(
        tickers="nasdaq100", start="2013-01-02", end="2013-08-30", cache_dir=tmp_path / "c"
    )
    members = nasdaq100_members(start="2013-01-02", end="2013-08-30")
    assert sorted(c[0] for c in calls) == sorted([*members, "^NDX"])
    b = src.bars
    j = b.tickers.index("NFLX")  # out of the index until 2013-06-05
    days = b.timestamps.tz_localize(None)
    out = days <= "2013-06-05"
    assert b.tradable[:, j].all() and not b.buyable[out, j].any() and b.buyable[~out, j].all()
    assert src.universe_info["point_in_time"] is True
    assert src.benchmark_info["name"] == "^NDX"
