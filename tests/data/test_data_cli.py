"""``finpod download`` / ``finpod info`` through the real entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "finpod", *args], capture_output=True, text=True, timeout=120
    )


def _one_red_line(err: str, message: str) -> None:
    err = err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error:") and message in err


@pytest.mark.parametrize(
    "args,message",
    [
        (["download", "--source", "bogus", "--out", "{tmp}/x"], "unknown source 'bogus'"),
        (["download", "--tickers", "AAPL,NOPE", "--out", "{tmp}/x"], "unknown ticker(s) NOPE"),
        (["info", "{tmp}"], "not a finpod dataset"),
    ],
)
def test_bad_input_is_one_red_line_and_nonzero_exit(tmp_path, args, message):
    res = _run(*[a.format(tmp=tmp_path) for a in args])
    assert res.returncode != 0
    _one_red_line(res.stderr, message)
    assert not (tmp_path / "x").exists()


OVERLAP = ["--train", "2010-01-01:2016-12-31", "--validation", "2016-06-01:2017-12-31"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--source", "files", "--path", "{tmp}/missing"], "does not exist"),
        (["--train", "2010-01-01:2015-12-31"], "split dates are incomplete"),
        ([*OVERLAP, "--backtest", "2018-01-01:2019-12-31"], "overlap"),
        (["--train", "2010-01-01"], "FIRST:LAST"),
        (["--source", "synthetic", "--tickers", "AAPL"], "--n-tickers"),
        (["--source", "sample", "--regime", "alpha"], "do not apply to the sample"),
        (["--embargo", "-1"], "embargo"),
        (["--bar", "7x"], "unknown bar size"),
        (["--source", "files", "--path", ".", "--column", "oops"], "VENDOR=canonical"),
        (
            ["--source", "yfinance", "--tickers", "AAPL", "--start", "2000-01-01", "--bar", "1min"],
            "last ~30 days",
        ),
    ],
)
def test_bad_download_input_in_process(tmp_path, capsys, args, message):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["download", *[a.format(tmp=tmp_path) for a in args], "--out", str(tmp_path / "x")])
    assert exc.value.code != 0
    _one_red_line(capsys.readouterr().err, message)
    assert not (tmp_path / "x").exists()


def test_download_synthetic_then_info(tmp_path):
    out = tmp_path / "syn"
    res = _run(
        "download",
        "--source",
        "synthetic",
        "--n-tickers",
        "3",
        "--regime",
        "alpha",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert (out / "manifest.json").exists()
    info = _run("info", str(out))
    assert info.returncode == 0 and "alpha_signal" in info.stdout and "validation" in info.stdout


def test_help_on_every_data_command(capsys):
    from finpod.cli import main

    for cmd in ("download", "info"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        assert "Usage" in capsys.readouterr().out
