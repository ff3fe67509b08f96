"""The data contract, end to end: every ticker in the input reaches the dataset or the
build fails naming it; columns are used or refused, never ignored; benchmark files are
held to the standard of prices; interrupted builds leave nothing behind; messages say
what is true. Each case runs ``finpod download`` as a user does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from finpod.data import load_split
from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download, _nothing_left, _one_line


def _excel_serials(df: pd.DataFrame) -> pd.DataFrame:
    days = pd.to_datetime(df["date"]) - pd.Timestamp("1899-12-30")
    return df.assign(date=days.dt.days)


@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_excel_serial_dates_are_refused_as_such(tmp_path, capsys, fraction):
    df = make_daily(("AAA", "BBB"))
    bad = _excel_serials(df[df.tic == "BBB"])
    bad = bad.assign(date=bad["date"] + fraction)
    folder = _csv(tmp_path, df[df.tic == "AAA"].drop(columns="tic"), "AAA.csv")
    _csv(tmp_path, bad.drop(columns="tic"), "BBB.csv")
    line = _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "Excel serial dates are not supported",
        "BBB",
        "2019-01-02",
        "YYYY-MM-DD",
    )
    assert "bar size" not in line and "0min" not in line
    _nothing_left(tmp_path)


def test_a_file_of_excel_serial_dates_alone_is_refused_as_such(tmp_path, capsys):
    df = _excel_serials(make_daily(("AAA",)))
    folder = _csv(tmp_path, df)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "Excel serial dates are not supported",
        "43467",
    )


# ------------------------------------------------------------ interrupted builds clean up

#: ``finpod download`` in a real process whose source blocks (so a signal lands mid-build,
#: after the temporary folder is made); SIGINT is delivered as at a terminal.
_BLOCKING_DOWNLOAD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import finpod.data.sources as sources
def blocking(*args, **kwargs):
    print("building", flush=True)
    time.sleep(120)
sources.load_source = blocking
from finpod.cli import main
main(sys.argv[1:])
"""


def _temp_folders(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.*"))


@pytest.mark.parametrize(
    ("signum", "code", "words"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM, "stopped by SIGTERM"),
        (signal.SIGINT, 130, "interrupted"),
    ],
)
def test_a_signal_during_download_removes_the_temporary_folder(tmp_path, signum, code, words):
    out = tmp_path / "ds"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _BLOCKING_DOWNLOAD,
            "download",
            "--source",
            "synthetic",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "building"
        assert len(_temp_folders(out)) == 1  # the build is under way
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert words in err
    assert not out.exists()
    assert _temp_folders(out) == []


def test_a_later_build_removes_a_stale_temporary_folder(tmp_path, capsys):
    from finpod.data.outdir import TEMP_MARKER

    out = tmp_path / "ds"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = [
        tmp_path / f".ds.{int(dead.stdout)}-abcd1234",  # a build killed mid-way
        tmp_path / ".ds.k2j4h5g6",  # from a build before the pid was in the name
    ]
    for folder in stale:
        folder.mkdir()
        (folder / "bars.parquet").write_bytes(b"partial")
        # the marker finpod writes into each temporary folder it makes
        (folder / TEMP_MARKER).write_text(f"finpod temporary build folder {folder.name}\n")
    running = tmp_path / f".ds.{os.getpid()}-zzzz9999"  # a build still running
    running.mkdir()
    (running / TEMP_MARKER).write_text(f"finpod temporary build folder {running.name}\n")
    mine = tmp_path / ".ds.backup"  # the user's own folder
    mine.mkdir()
    args = ("--source", "synthetic", "--n-tickers", "2", "--years", "0.2")
    code, err = _download(tmp_path, capsys, *args, out=out)
    assert code == 0, err
    assert (out / "manifest.json").exists()
    assert _temp_folders(out) == sorted([mine, running])


# ------------------------------------------------------------------- the ticker rule


def _three_files(tmp_path: Path, third: pd.DataFrame, name: str = "CCC.csv") -> Path:
    """AAA.csv and BBB.csv, good, beside ``third``."""
    df = make_daily(("AAA", "BBB"))
    for tic in ("AAA", "BBB"):
        folder = _csv(tmp_path, df[df.tic == tic].drop(columns="tic"), f"{tic}.csv")
    _csv(tmp_path, third, name)
    return folder


def _manifest(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "ds" / "manifest.json").read_text())


def _ccc() -> pd.DataFrame:
    return make_daily(("CCC",), seed=3).drop(columns="tic")


def test_a_file_whose_columns_are_not_recognised_fails_naming_its_ticker(tmp_path, capsys):
    folder = _three_files(tmp_path, _ccc().rename(columns={"close": "Px_Last"}))
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "CCC.csv",
        "ticker CCC would vanish",
        "no close column",
        "Px_Last",
        "--drop-bad-tickers",
    )
    _nothing_left(tmp_path)


def test_a_file_whose_numbers_cannot_be_read_fails_naming_file_column_and_value(tmp_path, capsys):
    ccc = _ccc()
    for col in ("open", "high", "low", "close"):
        ccc[col] = ccc[col].map(lambda x: f"${x:.2f}")
    folder = _three_files(tmp_path, ccc)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "ticker CCC would vanish",
        "80 of its 80 bars (100%)",
        "CCC.csv",
        "column open",
        "'$",
        "--drop-bad-tickers",
    )
    _nothing_left(tmp_path)


def test_a_ticker_losing_most_of_its_bars_is_named_with_the_share_lost(tmp_path, capsys):
    ccc = _ccc()
    ccc.loc[ccc.index[:60], "date"] = "not a date"
    folder = _three_files(tmp_path, ccc)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "ticker CCC would vanish",
        "60 of its 80 bars (75%)",
        "unreadable timestamps",
        "'not a date'",
    )


@pytest.mark.parametrize("how", ["cells", "file names"])
def test_two_spellings_of_a_ticker_that_collide_fail_naming_both(tmp_path, capsys, how):
    df = make_daily(("AAA", "BBB"))
    other = make_daily(("AAA",), seed=5)
    if how == "cells":
        _csv(tmp_path, df, "long.csv")
        folder = _csv(tmp_path, other.assign(tic="aaa"), "other.csv")
        words = ("'AAA' in long.csv", "'aaa' in other.csv")
    else:
        for tic in ("AAA", "BBB"):
            folder = _csv(tmp_path, df[df.tic == tic].drop(columns="tic"), f"{tic}.csv")
        _csv(tmp_path, other.drop(columns="tic"), "aaa_daily.csv")
        words = ("file AAA.csv and file aaa_daily.csv",)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "ticker AAA would vanish: two spellings collide",
        *words,
        "keep one of them",
    )
    _nothing_left(tmp_path)


def test_two_files_that_give_one_ticker_different_rows_fail_naming_both(tmp_path, capsys):
    _csv(tmp_path, make_daily(("AAA", "BBB")), "a.csv")
    folder = _csv(tmp_path, make_daily(("AAA",), seed=5), "b.csv")
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "ticker AAA would vanish: two files collide: 'AAA' in a.csv and 'AAA' in b.csv",
    )


def test_drop_bad_tickers_lists_each_dropped_ticker_with_its_cause(tmp_path, capsys):
    folder = _three_files(tmp_path, _ccc().rename(columns={"close": "Px_Last"}))
    ddd = make_daily(("DDD",), seed=4).drop(columns="tic")
    for col in ("open", "high", "low", "close"):
        ddd[col] = ddd[col].map(lambda x: f"{x:.2f} USD")
    _csv(tmp_path, ddd, "DDD.csv")
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--drop-bad-tickers")
    assert code == 0, err
    manifest = _manifest(tmp_path)
    assert manifest["tickers"] == ["AAA", "BBB"]
    assert manifest["universe"]["name"].startswith("2 tickers")
    dropped = manifest["cleaning"]["tickers_dropped"]
    assert set(dropped) == {"CCC", "DDD"}
    assert "no close column" in dropped["CCC"]
    assert "not numbers" in dropped["DDD"] and "USD" in dropped["DDD"]


def test_the_manifest_universe_counts_the_dataset_tickers(tmp_path, capsys):
    df = make_daily(("AAA", "BBB", "CCC"))
    sparse = df[(df.tic != "CCC") | (df.index % 3 == 0)]  # CCC below --min-coverage
    folder = _csv(tmp_path, sparse)
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    assert code == 0, err
    manifest = _manifest(tmp_path)
    assert manifest["tickers"] == ["AAA", "BBB"]
    assert manifest["universe"]["name"].startswith("2 tickers")
    assert "coverage" in manifest["cleaning"]["tickers_dropped"]["CCC"]


# ---------------------------------------------------------------- columns used or refused


@pytest.mark.parametrize(
    ("column", "value", "kind"),
    [
        ("split_ratio", 2.0, "a split ratio"),
        ("Stock Splits", 4.0, "a split ratio"),
        ("adj_factor", 0.5, "an adjustment factor"),
        ("Dividends", 0.24, "a dividend"),
    ],
)
def test_a_column_that_changes_prices_is_refused(tmp_path, capsys, column, value, kind):
    neutral = 0.0 if kind == "a dividend" else 1.0
    df = make_daily(("AAA",)).assign(**{column: neutral})
    df.loc[40, column] = value
    folder = _csv(tmp_path, df)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "bars.csv",
        f"column {column!r} looks like {kind}",
        "does not apply",
        "already adjusted",
    )
    _nothing_left(tmp_path)


def test_an_all_neutral_split_column_is_harmless_and_reported_unused(tmp_path, capsys):
    df = make_daily(("AAA",)).assign(split_ratio=1.0, dividend=0.0, **{"Stock Splits": 0.0})
    folder = _csv(tmp_path, df)
    code, err = _download(tmp_path, capsys, "--path", str(folder))
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert set(report["unused_columns"]["bars.csv"]) == {"split_ratio", "dividend", "Stock Splits"}


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ("date,tic,open,high,low,close,close,volume", ("'close' appears twice",)),
        ("date,tic,open,high,low,Close,close,volume", ("'Close' and 'close'", "read as close")),
        ("date,tic,open,high,low,close ,close,volume", ("'close ' and 'close'",)),
        ("date,tic,open,high,low,close,last,volume", ("'close' and 'last'",)),
    ],
)
def test_two_columns_read_as_one_field_are_refused(tmp_path, capsys, header, words):
    df = make_daily(("AAA",))
    df.insert(6, "second", df["close"] * 2)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "bars.csv").write_text(header + "\n" + df.to_csv(index=False, header=False))
    _one_line(*_download(tmp_path, capsys, "--path", str(folder)), "bars.csv", *words)
    _nothing_left(tmp_path)


@pytest.mark.parametrize("sample", ["1,234.56", "1.234,56", "1 234.56", "12,5"])
def test_numbers_with_thousands_separators_are_refused_naming_file_and_value(
    tmp_path, capsys, sample
):
    df = make_daily(("AAA", "BBB"))
    df["close"] = df["close"].map(lambda x: f"{x:.2f}").astype(object)
    df.loc[df.tic == "BBB", "close"] = sample
    _csv(tmp_path, df[df.tic == "AAA"].drop(columns="tic"), "AAA.csv")
    folder = _csv(tmp_path, df[df.tic == "BBB"].drop(columns="tic"), "BBB.csv")
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "BBB.csv",
        "column close",
        "thousands separator",
        repr(sample),
    )
    _nothing_left(tmp_path)


# ------------------------------------------------------------------- benchmark files


def _levels(days: pd.Series, values) -> pd.DataFrame:
    return pd.DataFrame({"date": list(days), "close": list(values)})


def _with_benchmark(tmp_path: Path, capsys, levels: pd.DataFrame) -> tuple[int, str]:
    folder = _csv(tmp_path, make_daily(("AAA", "BBB")))
    bench = tmp_path / "NDX.csv"
    levels.to_csv(bench, index=False)
    return _download(tmp_path, capsys, "--path", str(folder), "--benchmark", str(bench))


def test_a_benchmark_date_given_twice_with_two_levels_is_one_line(tmp_path, capsys):
    days = sorted(make_daily(("AAA",))["date"])
    levels = _levels(days, range(100, 100 + len(days)))
    twice = pd.concat([levels, _levels([days[30]], [195.0])], ignore_index=True)
    _one_line(
        *_with_benchmark(tmp_path, capsys, twice),
        "NDX.csv",
        f"{days[30]} is given 2 times with different levels",
        "130 and 195",
        "one row per date",
    )
    _nothing_left(tmp_path)


def test_a_benchmark_date_repeated_with_the_same_level_is_one_level(tmp_path, capsys):
    days = sorted(make_daily(("AAA",))["date"])
    levels = _levels(days, range(100, 100 + len(days)))
    code, err = _with_benchmark(tmp_path, capsys, pd.concat([levels, levels.iloc[[30]]]))
    assert code == 0, err


@pytest.mark.parametrize(
    ("cut", "words"),
    [
        (slice(None, 50), ("stops before the data", "last bar of")),
        (slice(10, None), ("starts after the data", "first bar of 2019-01-02")),
    ],
)
def test_benchmark_levels_that_do_not_cover_the_data_are_one_line(tmp_path, capsys, cut, words):
    days = sorted(make_daily(("AAA",))["date"])
    levels = _levels(days, range(100, 100 + len(days))).iloc[cut]
    _one_line(*_with_benchmark(tmp_path, capsys, levels), "NDX.csv", *words)
    _nothing_left(tmp_path)


def test_a_benchmark_of_excel_serial_dates_is_refused_naming_the_file(tmp_path, capsys):
    days = sorted(make_daily(("AAA",))["date"])
    levels = _excel_serials(_levels(days, range(100, 100 + len(days))))
    _one_line(
        *_with_benchmark(tmp_path, capsys, levels),
        "Excel serial dates are not supported: benchmark file",
        "NDX.csv",
    )


def test_a_benchmark_gap_longer_than_the_datas_own_is_one_line(tmp_path, capsys):
    days = sorted(make_daily(("AAA",))["date"])
    levels = _levels(days, range(100, 100 + len(days)))
    holed = levels.drop(index=range(20, 25))  # five sessions the bars have
    _one_line(
        *_with_benchmark(tmp_path, capsys, holed),
        "NDX.csv",
        "no level for 5 session(s) in a row",
        f"({days[20]} → {days[24]})",
        "longer gap than any in the bars (0)",
    )
    _nothing_left(tmp_path)


def test_the_sample_universe_counts_the_tickers_with_data(sample_dir):
    manifest = json.loads((sample_dir / "manifest.json").read_text())
    assert f"({len(manifest['tickers'])} with data)" in manifest["universe"]["name"]


def test_an_explicit_rename_chooses_between_two_close_columns(tmp_path, capsys):
    df = make_daily(("AAA",))
    df.insert(6, "Adj Close", df["close"] * 0.9)
    folder = _csv(tmp_path, df.rename(columns={"close": "Close"}))
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--column", "Adj Close=close")
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["unused_columns"]["bars.csv"] == {
        "Close": "replaced by --column 'Adj Close=close'"
    }
    bars = load_split(tmp_path / "ds", "all")
    assert bars.close[0, 0] == pytest.approx(df["close"].iloc[0] * 0.9, rel=1e-6)
