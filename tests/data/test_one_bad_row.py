"""One bad row is one bad row: a mistyped year or a one-row ticker is named, and never
moves the dataset's range, its splits or the other tickers' listing dates."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finpod.data.clean import clean_long
from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download, _nothing_left, _one_line


def _files(tmp_path: Path, df: pd.DataFrame) -> Path:
    tmp_path.mkdir(exist_ok=True)
    for tic in sorted(df.tic.unique()):
        folder = _csv(tmp_path, df[df.tic == tic].drop(columns="tic"), f"{tic}.csv")
    return folder


def _retype(df: pd.DataFrame, tic: str, k: int, year: str) -> pd.DataFrame:
    """``df`` with the ``k``-th row of ``tic`` given the year ``year`` (a typo)."""
    df = df.copy()
    row = df.index[df.tic == tic][k]
    df.loc[row, "date"] = year + df.loc[row, "date"][4:]
    return df


def test_a_row_typed_years_before_its_ticker_is_named_not_a_new_range(tmp_path, capsys):
    df = _retype(make_daily(n=120), "AAA", 50, "2016")
    _one_line(
        *_download(tmp_path, capsys, "--path", str(_files(tmp_path, df))),
        "1 row of AAA in AAA.csv",
        "2016-03-15",
        "mistyped year",
        "--start/--end",
    )
    _nothing_left(tmp_path)


def test_a_row_typed_a_year_late_is_named_not_filled_into_the_backtest(tmp_path, capsys):
    df = _retype(make_daily(n=120), "CCC", 48, "2020")
    _one_line(
        *_download(tmp_path, capsys, "--path", str(_files(tmp_path, df))),
        "1 row of CCC in CCC.csv",
        "2020-03-13",
        "mistyped year",
    )
    _nothing_left(tmp_path)


def test_cutting_a_stray_row_off_with_start_builds_the_unchanged_dataset(tmp_path, capsys):
    good = make_daily(n=120)
    code, err = _download(tmp_path, capsys, "--path", str(_files(tmp_path, good)))
    assert code == 0, err
    want = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    bad = _retype(good, "AAA", 50, "2016")
    out = tmp_path / "ds2"
    folder = _files(tmp_path / "b", bad)
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--start", "2019-01-01", out=out)
    assert code == 0, err
    got = json.loads((out / "manifest.json").read_text())
    assert (got["start"], got["end"], got["tickers"]) == (
        want["start"],
        want["end"],
        want["tickers"],
    )


def test_a_one_row_ticker_is_named_not_dropped_with_exit_0(tmp_path, capsys):
    df = make_daily(n=60)
    one = make_daily(("DDD",), n=60).iloc[[30]]
    _one_line(
        *_download(tmp_path, capsys, "--path", str(_files(tmp_path, pd.concat([df, one])))),
        "ticker DDD has only 1 usable bar",
        "at least 2",
        "--drop-bad-tickers",
    )
    _nothing_left(tmp_path)


def test_a_one_row_ticker_dropped_on_request_leaves_range_and_listings_alone(tmp_path, capsys):
    df = make_daily(n=60)
    code, err = _download(tmp_path, capsys, "--path", str(_files(tmp_path / "a", df)))
    assert code == 0, err
    want = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    # a lone bar a year before everything else
    one = make_daily(("DDD",), n=1, start="2018-01-02")
    folder = _files(tmp_path / "b", pd.concat([df, one]))
    out = tmp_path / "ds2"
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--drop-bad-tickers", out=out)
    assert code == 0, err
    got = json.loads((out / "manifest.json").read_text())
    assert "only 1 bar" in got["cleaning"]["tickers_dropped"]["DDD"]
    assert "100 % coverage" not in got["cleaning"]["tickers_dropped"]["DDD"]
    assert (got["start"], got["end"], got["tickers"]) == (
        want["start"],
        want["end"],
        want["tickers"],
    )
    assert got["splits"] == want["splits"]
    report = json.loads((out / "cleaning_report.json").read_text())
    assert report["listed_late"] == {}


def test_a_ticker_dropped_for_coverage_never_moves_the_range(daily):
    kept, _ = clean_long(daily, "1d")
    # EEE: ten bars spread over the year before, far below 80 % coverage
    eee = make_daily(("EEE",), n=250, start="2018-01-02").iloc[::25]
    bars, report = clean_long(pd.concat([daily, eee]), "1d")
    assert "coverage" in report["tickers_dropped"]["EEE"]
    assert bars.tickers == kept.tickers
    assert bars.timestamps.equals(kept.timestamps)
    assert report["listed_late"] == {}
