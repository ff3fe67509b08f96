"""Every bad input to ``finpod download`` is one red line and exit 1, and leaves nothing
behind; no bad input silently becomes data.

Each case runs the real entry point (``finpod.cli.main``) in process on a small table
written the way a careless or hostile user would write it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finpod.data import load_split
from tests.data.conftest import make_daily


def _download(tmp_path: Path, capsys, *args: str, out: Path | None = None) -> tuple[int, str]:
    """Run ``finpod download --source files ...``; returns (exit code, stderr)."""
    from finpod.cli import main

    out = out if out is not None else tmp_path / "ds"
    argv = ["download", "--source", "files", *args, "--out", str(out)]
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _one_line(code: int, err: str, *words: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _nothing_left(tmp_path: Path, out: Path | None = None) -> None:
    out = out if out is not None else tmp_path / "ds"
    assert not out.exists()
    # no temporary folder beside it either
    assert not [p for p in out.parent.glob(f".{out.name}.*")], list(out.parent.iterdir())


def _csv(tmp_path: Path, df: pd.DataFrame, name: str = "bars.csv", **kw) -> Path:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    df.to_csv(folder / name, index=False, **kw)
    return folder


# --------------------------------------------------------------------- silently wrong


def test_inf_close_is_dropped_and_counted_never_tradable(tmp_path, capsys):
    df = make_daily(n=60)
    df.loc[[5, 70], "close"] = np.inf
    df.loc[100, "high"] = -np.inf
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["dropped"]["non_finite_price"] == 3
    m = load_split(tmp_path / "ds", "all")
    assert bool(m.close.isfinite().all()) and bool(m.open.isfinite().all())
    assert float(m.close.abs().max()) < 1e4


def test_day_month_dates_are_read_in_the_order_the_column_proves(tmp_path, capsys):
    df = make_daily(n=60)
    day = pd.to_datetime(df["date"])
    df["date"] = day.dt.strftime("%d/%m/%Y")  # 2019-01-04 → 04/01/2019
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["date_order"].startswith("day/month")
    assert "unreadable_timestamp" not in report["dropped"]
    assert "bars_forward_filled" not in report["repaired"]
    m = load_split(tmp_path / "ds", "all")
    assert m.timestamps[0].strftime("%Y-%m-%d") == day.min().strftime("%Y-%m-%d")


def test_ambiguous_day_month_dates_are_an_error_unless_a_format_is_given(tmp_path, capsys):
    df = make_daily(n=60)
    df = df[pd.to_datetime(df["date"]).dt.day <= 12]  # no value tells the order
    df = df.assign(date=pd.to_datetime(df["date"]).dt.strftime("%d/%m/%Y"))
    path = str(_csv(tmp_path, df))
    code, err = _download(tmp_path, capsys, "--path", path)
    _one_line(code, err, "day/month or month/day", "--date-format")
    _nothing_left(tmp_path)
    code, err = _download(
        tmp_path, capsys, "--path", path, "--date-format", "%d/%m/%Y", "--min-coverage", "0"
    )
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["date_format"] == "%d/%m/%Y" and not report["dropped"]


def test_daily_and_minute_bars_in_one_source_are_an_error_naming_the_tickers(tmp_path, capsys):
    daily = make_daily(tickers=("AAPL", "MSFT"), n=60)
    minutes = pd.date_range("2019-03-01 09:30", periods=200, freq="1min")
    intraday = pd.DataFrame(
        {
            "date": minutes.strftime("%Y-%m-%d %H:%M"),
            "tic": "AAPL",
            "open": 100.0,
            "high": 101.0,
            "low": 99.0,
            "close": 100.5,
            "volume": 10.0,
        }
    )
    folder = _csv(tmp_path, daily, "daily.csv")
    _csv(tmp_path, intraday, "minutes.csv")
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    _one_line(code, err, "different bar sizes", "1min: AAPL", "1d: MSFT")
    _nothing_left(tmp_path)


def test_out_on_an_existing_dataset_needs_overwrite_and_is_replaced_whole(tmp_path, capsys):
    folder = _csv(tmp_path, make_daily(n=60))
    assert _download(tmp_path, capsys, "--path", str(folder))[0] == 0
    before = json.loads((tmp_path / "ds" / "manifest.json").read_text())["hash"]
    _csv(tmp_path, make_daily(n=60, seed=5))
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    _one_line(code, err, "already holds a dataset", "--overwrite")
    assert json.loads((tmp_path / "ds" / "manifest.json").read_text())["hash"] == before
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--overwrite")
    assert code == 0, err
    after = json.loads((tmp_path / "ds" / "manifest.json").read_text())["hash"]
    assert after != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "in"]  # nothing beside it


# ------------------------------------------------------------ tracebacks, now one line


@pytest.mark.parametrize("n", [2, 12, 29])
def test_a_short_series_is_a_minimum_length_line(tmp_path, capsys, n):
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, make_daily(n=n))))
    _one_line(code, err, f"only {n} 1d bars", "at least 30")
    _nothing_left(tmp_path)


def test_a_trailing_junk_line_and_an_empty_ticker_cell_are_dropped_and_counted(tmp_path, capsys):
    df = make_daily(n=60)
    df.loc[3, "tic"] = None
    folder = _csv(tmp_path, df)
    with open(folder / "bars.csv", "a", encoding="utf-8") as fh:
        fh.write("this line is junk\n")
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["dropped"]["missing_ticker"] == 1
    assert report["dropped"]["unreadable_timestamp"] == 1


@pytest.mark.parametrize("kind", ["devnull", "fifo"])
def test_path_that_is_a_device_or_a_pipe_is_one_line(tmp_path, capsys, kind):
    if kind == "devnull":
        path = "/dev/null"
    else:
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    code, err = _download(tmp_path, capsys, "--path", path)
    _one_line(code, err, "neither a directory nor a regular file")
    _nothing_left(tmp_path)


@pytest.mark.parametrize("where", ["proc", "under_file", "is_file"])
def test_out_that_cannot_be_written_is_one_line_before_any_work(tmp_path, capsys, where):
    folder = _csv(tmp_path, make_daily(n=60))
    (tmp_path / "afile").write_text("x")
    out = {
        "proc": Path("/proc/finpod-test/ds"),
        "under_file": tmp_path / "afile" / "ds",
        "is_file": tmp_path / "afile",
    }[where]
    code, err = _download(tmp_path, capsys, "--path", str(folder), out=out)
    line = _one_line(code, err)
    assert str(out) in line or str(out.parent) in line or "afile" in line
    assert (tmp_path / "afile").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "in"]


def test_a_csv_that_is_not_utf8_is_one_line(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    make_daily(n=60).to_csv(folder / "bars.csv", index=False, encoding="utf-16")
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    _one_line(code, err, "bars.csv")
    _nothing_left(tmp_path)


@pytest.mark.parametrize("flag", ["--min-coverage", "--years"])
def test_a_non_finite_number_option_is_one_line(tmp_path, capsys, flag):
    from finpod.cli import main

    args = ["download", "--source", "synthetic", "--n-tickers", "2", flag, "nan"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "ds")])
    _one_line(int(exc.value.code), capsys.readouterr().err, flag, "finite")
    _nothing_left(tmp_path)


# ----------------------------------------------------------------- misleading lines


def test_high_below_low_on_most_rows_names_the_cause(tmp_path, capsys):
    df = make_daily(n=60)
    bad = df.sample(frac=0.3, random_state=0).index
    df.loc[bad, ["high", "low"]] = df.loc[bad, ["low", "high"]].to_numpy()
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    _one_line(code, err, "high_below_low")
    _nothing_left(tmp_path)


def test_int64_epoch_stamps_are_read_as_unix_time(tmp_path, capsys):
    df = make_daily(n=60)
    # 16:00 New York of each session, in epoch seconds (an Int64 column)
    close = pd.to_datetime(df["date"]).dt.tz_localize("America/New_York") + pd.Timedelta("16h")
    epoch = pd.Timestamp("1970-01-01", tz="UTC")
    df["date"] = ((close - epoch) // pd.Timedelta("1s")).astype("Int64")
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--bar", "1d")
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["input_timezone"] == "Unix epoch seconds (UTC)"
    assert "unreadable_timestamp" not in report["dropped"]


@pytest.mark.parametrize("bad", ["AA\u200bPL", "AAPL\U0001f680", "AA\x07PL"])
def test_a_ticker_with_an_invisible_or_emoji_character_is_named(tmp_path, capsys, bad):
    df = make_daily(n=60)
    df.loc[df["tic"] == "BBB", "tic"] = bad
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    line = _one_line(code, err, "bars.csv", "row ", "U+")
    assert repr(bad.upper())[1:-1] in line
    _nothing_left(tmp_path)


def test_a_file_name_with_a_zero_width_character_is_named(tmp_path, capsys):
    df = make_daily(tickers=("AAA",), n=60).drop(columns=["tic"])
    folder = _csv(tmp_path, df, "AA\u200bPL.csv")
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    _one_line(code, err, "U+200B")
    _nothing_left(tmp_path)
