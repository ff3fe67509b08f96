"""The stray-row rule on each side of its limits: rows of a ticker more than 60 days from
the rest of its bars are a mistyped year when they are at most 5 rows **and** at most a
tenth of the ticker; a longer or larger piece is a real stretch of bars (a relisting)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data.clean import clean_long
from finpod.data.row_rules import STRAY_GAP_DAYS, STRAY_MAX_ROWS, STRAY_MAX_SHARE, refuse_stray_rows
from finpod.errors import FinpodError
from tests.data.conftest import make_daily

BODY_START = pd.Timestamp("2019-01-02 16:00", tz="UTC")


def _check(body_rows: int, away_days: int, piece_rows: int) -> None:
    """The rule on one ticker: ``body_rows`` daily bars, then ``piece_rows`` daily bars
    starting ``away_days`` after the body's last bar."""
    body = pd.date_range(BODY_START, periods=body_rows, freq="D")
    piece = pd.date_range(body[-1] + pd.Timedelta(days=away_days), periods=piece_rows, freq="D")
    ts = body.append(piece).as_unit("ns").asi8
    n = len(ts)
    codes = np.zeros(n, dtype=np.int64)
    refuse_stray_rows(
        ts, codes, pd.Index(["AAA"]), np.arange(n), pd.DataFrame(index=range(n)), "in"
    )


def test_the_limits_are_60_days_5_rows_and_a_tenth_of_the_ticker():
    assert (STRAY_GAP_DAYS, STRAY_MAX_ROWS, STRAY_MAX_SHARE) == (60, 5, 0.1)


def test_a_row_60_days_after_its_ticker_is_no_stray():
    _check(body_rows=100, away_days=60, piece_rows=1)


def test_a_row_61_days_after_its_ticker_is_a_stray():
    with pytest.raises(FinpodError, match=r"1 row of AAA .* lies 61 days away .* mistyped year"):
        _check(body_rows=100, away_days=61, piece_rows=1)


def test_five_far_rows_that_are_under_a_tenth_of_the_ticker_are_strays():
    with pytest.raises(FinpodError, match="5 rows of AAA"):
        _check(body_rows=200, away_days=90, piece_rows=5)


def test_six_far_rows_are_no_stray_however_small_a_share_of_the_ticker():
    _check(body_rows=200, away_days=90, piece_rows=6)


def test_far_rows_that_are_a_tenth_of_the_ticker_are_strays():
    with pytest.raises(FinpodError, match="3 rows of AAA"):
        _check(body_rows=27, away_days=90, piece_rows=3)  # 3 of 30 rows


def test_far_rows_over_a_tenth_of_the_ticker_are_no_stray_however_few():
    _check(body_rows=26, away_days=90, piece_rows=3)  # 3 of 29 rows


def test_a_relisting_of_eight_bars_after_90_days_is_kept_as_real_bars():
    df = make_daily(("AAA", "BBB"), n=600)
    days = pd.DatetimeIndex(sorted(df["date"].unique()))
    aaa = df["tic"] == "AAA"
    # AAA halts for 90 calendar days, then trades its last 8 sessions again.
    halted = aaa & (pd.to_datetime(df["date"]) > days[-9] - pd.Timedelta(days=90))
    halted &= pd.to_datetime(df["date"]) <= days[-9]
    bars, report = clean_long(df[~halted], "1d")
    assert bars.tickers == ["AAA", "BBB"]
    back = bars.tradable[:, 0][-8:]
    assert back.all() and int(bars.tradable[:, 0].sum()) == int((aaa & ~halted).sum())
