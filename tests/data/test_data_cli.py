"""``finpod download`` / ``finpod info`` through the real entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finpod", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize(
    "args,message",
    [
        (["download", "--source", "bogus", "--out", "{tmp}/x"], "unknown source 'bogus'"),
        (["download", "--source", "synthetic", "--tickers", "AAPL", "--out", "{tmp}/x"], "--n-tickers"),
        (["download", "--source", "sample", "--regime", "alpha", "--out", "{tmp}/x"], "do not apply to the sample"),
        (["download", "--embargo", "-1", "--out", "{tmp}/x"], "embargo"),
        (["download", "--column", "oops", "--source", "files", "--path", ".", "--out", "{tmp}/x"], "VENDOR=canonical"),
    ],
)
def test_bad_input_in_process(tmp_path, capsys, args, message):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exc:
        main([a.format(tmp=tmp_path) for a in args])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error:") and message in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (["download", "--source", "files", "--path", "{tmp}/missing", "--out", "{tmp}/x"], "does not exist"),
        (["download", "--tickers", "AAPL,NOPE", "--out", "{tmp}/x"], "unknown ticker(s) NOPE"),
        (["download", "--train", "2010-01-01:2015-12-31", "--out", "{tmp}/x"], "split dates are incomplete"),
        (
            ["download", "--train", "2010-01-01:2016-12-31", "--validation", "2016-06-01:2017-12-31", "--backtest", "2018-01-01:2019-12-31", "--out", "{tmp}/x"],
            "overlap",
        ),
        (["download", "--source", "synthetic", "--tickers", "AAPL", "--out", "{tmp}/x"], "--n-tickers"),
        (["download", "--source", "sample", "--regime", "alpha", "--out", "{tmp}/x"], "do not apply to the sample"),
        (["download", "--embargo", "-1", "--out", "{tmp}/x"], "embargo"),
        (["download", "--column", "oops", "--source", "files", "--path", ".", "--out", "{tmp}/x"], "VENDOR=canonical"),
    ],
)
def test_bad_input_in_process(tmp_path, capsys, args, message):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exc:
        main([a.format(tmp=tmp_path) for a in args])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error:") and message in err
    assert not (tmp_path / "x").exists()


def test_download_synthetic_then_info(tmp_path):
    out = tmp_path / "syn"
    res = _run("download", "--source", "synthetic", "--n-tickers", "3", "--regime", "alpha", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "manifest.json").exists()
    info = _run("info", str(out))
    assert info.returncode == 0 and "alpha_signal" in info.stdout and "validation" in info.stdout


def test_help_on_every_data_command():
    for cmd in ("download", "info"):
        res = _run(cmd, "--help")
        assert res.returncode == 0 and "Usage" in res.stdout
