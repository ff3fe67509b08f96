"""The data contract, end to end: every ticker in the input reaches the dataset or the
build fails naming it; columns are used or refused, never ignored; benchmark files are
held to the standard of prices; interrupted builds leave nothing behind; messages say
what is true. Each case runs ``finpod download`` as a user does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

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
    out = tmp_path / "ds"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = [
        tmp_path / f".ds.{int(dead.stdout)}-abcd1234",  # a build killed mid-way
        tmp_path / ".ds.k2j4h5g6",  # from a build before the pid was in the name
        tmp_path / f".ds.old-{int(dead.stdout)}",  # a swap cut short
    ]
    for folder in stale:
        folder.mkdir()
        (folder / "bars.parquet").write_bytes(b"partial")
    running = tmp_path / f".ds.{os.getpid()}-zzzz9999"  # a build still running
    running.mkdir()
    mine = tmp_path / ".ds.backup"  # the user's own folder
    mine.mkdir()
    args = ("--source", "synthetic", "--n-tickers", "2", "--years", "0.2")
    code, err = _download(tmp_path, capsys, *args, out=out)
    assert code == 0, err
    assert (out / "manifest.json").exists()
    assert _temp_folders(out) == sorted([mine, running])
