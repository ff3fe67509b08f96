"""Point-in-time universes (sell-only outside the index), delistings, survivorship notes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import build_dataset, load_manifest, load_split, verify_dataset
from finpod.data.clean import DELISTING_RULE
from finpod.data.sources import SAMPLE_DAILY, SAMPLE_DIR, load_files

from .conftest import make_daily

#: NFLX left the NASDAQ-100 on 2012-12-24 and rejoined on 2013-06-06.
NFLX_OUT = ("2012-12-24", "2013-06-05")


@pytest.fixture(scope="module")
def pit(tmp_path_factory):
    return build_dataset(
        "sample", tmp_path_factory.mktemp("pit") / "ds", tickers="NFLX,AAPL", point_in_time=True
    )


def test_stock_outside_the_index_keeps_moving_and_is_sell_only(pit):
    m = load_split(pit, "all")
    j = m.tickers.index("NFLX")
    days = m.timestamps.tz_localize(None)
    out = (days >= NFLX_OUT[0]) & (days <= NFLX_OUT[1])
    assert out.sum() == 112
    raw = pd.read_csv(SAMPLE_DIR / SAMPLE_DAILY)
    raw = raw[raw["tic"] == "NFLX"].set_index("date")["close"]
    close = m.close[out, j].numpy()
    # Real prices every session of the exit (12.89 → 31.92), not a frozen mark.
    np.testing.assert_allclose(close, raw.loc[days[out].strftime("%Y-%m-%d")].to_numpy(), rtol=1e-6)
    assert len(np.unique(close)) > 100 and close[-1] / close[0] > 2
    assert m.tradable[out, j].all()  # a holder can sell
    assert not m.buyable[out, j].any()  # nobody can buy
    back_in = int(np.flatnonzero(out)[-1]) + 1
    assert str(days[back_in].date()) == "2013-06-06" and m.buyable[back_in, j]
    assert m.buyable[:, m.tickers.index("AAPL")].all()


def test_pit_masks_are_persisted_and_hashed(pit):
    man = load_manifest(pit)
    assert man["masks"] == {"buyable": True, "delisted": False}
    assert verify_dataset(pit) == man["hash"]
    plain = build_dataset("sample", pit.parent / "plain", tickers="NFLX,AAPL")
    assert load_manifest(plain)["hash"] != man["hash"]  # same prices, other mask
    assert load_split(plain, "all").buyable is None


def test_survivorship_disclosed_in_the_manifest(pit, sample_dir):
    u = load_manifest(sample_dir)["universe"]
    assert u["point_in_time"] is False
    assert u["note"].startswith("members as of 2019-12-31 used for 2010–2019: survivorship bias")
    assert "buyable only while an index member" in load_manifest(pit)["universe"]["note"]


def _with_delisting(tmp_path):
    df = make_daily(n=80)
    last = sorted(df["date"].unique())[59]
    df = df[~((df["tic"] == "BBB") & (df["date"] > last))]
    d = tmp_path / "bars"
    d.mkdir()
    df.to_csv(d / "long.csv", index=False)
    return d, last, df


def test_delisted_from_the_bar_after_the_last_price_for_good(tmp_path):
    d, last, df = _with_delisting(tmp_path)
    src = load_files(d)
    b = src.bars
    j = b.tickers.index("BBB")
    t_last = int(np.flatnonzero(b.timestamps.strftime("%Y-%m-%d") == last)[0])
    assert not b.delisted[: t_last + 1, j].any() and b.delisted[t_last + 1 :, j].all()
    assert not b.delisted[:, [b.tickers.index("AAA"), b.tickers.index("CCC")]].any()
    last_close = df[(df["tic"] == "BBB") & (df["date"] == last)]["close"].iloc[0]
    entry = src.report["delisted"]["BBB"]
    assert entry["last_valid_bar"].startswith(last)
    assert entry["last_close"] == pytest.approx(last_close)
    assert src.report["delisting_rule"] == DELISTING_RULE
    assert "converted to cash at its last valid close" in DELISTING_RULE
    assert "treated as delisted" in src.universe_info["note"]


def test_delisted_mask_round_trips_through_the_dataset(tmp_path):
    d, _, _ = _with_delisting(tmp_path)
    out = build_dataset("files", tmp_path / "ds", path=d)
    man = load_manifest(out)
    assert man["masks"] == {"buyable": False, "delisted": True}
    assert verify_dataset(out) == man["hash"]
    m = load_split(out, "all")
    ref = load_files(d).bars
    np.testing.assert_array_equal(m.delisted.numpy(), ref.delisted)
    assert m.buyable is None
    bt = load_split(out, "backtest")
    assert bt.delisted[:, m.tickers.index("BBB")].all()


def test_a_gap_in_the_last_session_is_not_a_delisting(tmp_path):
    """MSFT's last three minutes missing: a forward-filled gap, not a delisting."""
    minutes = SAMPLE_DIR / "minute_samples"
    for tic in ("AAPL", "MSFT"):
        raw = pd.read_csv(minutes / f"{tic}_1min.csv")
        if tic == "MSFT":
            raw = raw[raw["datetime"] < "2019-02-15 15:58:00"]
        raw.to_csv(tmp_path / f"{tic}_1min.csv", index=False)
    src = load_files(tmp_path)
    assert src.report["ended_early"] == {"MSFT": "2019-02-15 15:56:00-05:00"}
    assert src.bars.delisted is None and "delisted" not in src.report
