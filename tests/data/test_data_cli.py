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
        (["--start", "2015-13-01"], "month 13 does not exist"),
        (["--backtest", "09/01/2019:31/12/2019"], "not an ISO date"),
        (["--source", "sample", "--date-format", "%H:%M"], "cannot read a date back"),
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


def test_synthetic_signal_persistence_reaches_the_generator(tmp_path):
    import json

    import numpy as np
    import pandas as pd

    def lag1(persistence: str) -> float:
        out = tmp_path / f"syn{persistence}"
        res = _run(
            "download",
            "--source",
            "synthetic",
            "--n-tickers",
            "2",
            "--regime",
            "alpha",
            "--signal-persistence",
            persistence,
            "--out",
            str(out),
        )
        assert res.returncode == 0, res.stderr
        options = json.loads((out / "manifest.json").read_text())["source_options"]
        assert options["signal_persistence"] == float(persistence)
        bars = pd.read_parquet(out / "bars.parquet", columns=["tic", "alpha_signal"])
        signal = bars[bars["tic"] == bars["tic"].iloc[0]]["alpha_signal"].to_numpy()
        return float(np.corrcoef(signal[:-1], signal[1:])[0, 1])

    # The planted signal's lag-1 autocorrelation follows the option.
    assert lag1("0.99") > 0.95 > 0.5 > lag1("0.3")


def test_help_on_every_data_command(capsys):
    from finpod.cli import main

    for cmd in ("download", "info"):
        try:
            main([cmd, "--help"])
        except SystemExit as exc:  # help may end by exiting 0 or by returning
            assert exc.code in (0, None)
        out = capsys.readouterr().out
        assert "Usage" in out
        if cmd == "download":
            assert "--benchmark" in out and "--ticker-pattern" in out


def test_download_files_with_benchmark_end_to_end(tmp_path):
    """A long daily table plus an index file stamped at 16:00 New York, through the CLI."""
    import numpy as np
    import pandas as pd

    from finpod.data import load_manifest, load_split
    from finpod.data.sources import SAMPLE_DAILY, SAMPLE_DIR, SAMPLE_INDEX

    bars = pd.read_csv(SAMPLE_DIR / SAMPLE_DAILY).drop(columns=["adj_close"])
    bars[bars["tic"].isin(["AAPL", "MSFT", "NFLX", "AMZN", "INTC"])].to_csv(
        tmp_path / "long.csv", index=False
    )
    idx = pd.read_csv(SAMPLE_DIR / SAMPLE_INDEX)
    at_close = (pd.to_datetime(idx["Date"]) + pd.Timedelta(hours=16)).dt.tz_localize(
        "America/New_York"
    )
    levels = pd.DataFrame(
        {"Datetime": at_close.dt.strftime("%Y-%m-%d %H:%M:%S%z"), "Close": idx["Close"]}
    )
    levels.to_csv(tmp_path / "NDX.csv", index=False)
    out = tmp_path / "ds"
    res = _run(
        "download",
        "--source",
        "files",
        "--path",
        str(tmp_path / "long.csv"),
        "--benchmark",
        str(tmp_path / "NDX.csv"),
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    man = load_manifest(out)
    assert man["benchmark"]["name"] == "NDX" and man["benchmark"]["kind"] == "index level, no costs"
    m = load_split(out, "backtest")
    ndx = idx.set_index(pd.to_datetime(idx["Date"]))["Close"]
    np.testing.assert_allclose(
        m.benchmark.to_numpy(), ndx.loc[m.timestamps.tz_localize(None)].to_numpy()
    )
    info = _run("info", str(out))
    assert info.returncode == 0 and "index level, no costs" in info.stdout


def test_ticker_pattern_option(tmp_path, capsys):
    import pandas as pd

    from finpod.cli import main
    from finpod.data import load_manifest
    from finpod.data.sources import SAMPLE_DIR

    raw = pd.read_csv(SAMPLE_DIR / "minute_samples" / "AAPL_1min.csv")
    raw.to_csv(tmp_path / "aapl.us.csv", index=False)
    out = tmp_path / "ds"
    main_args = ["download", "--source", "files", "--path", str(tmp_path / "aapl.us.csv")]
    main([*main_args, "--ticker-pattern", r"^(.*)\.US$", "--out", str(out)])
    assert load_manifest(out)["tickers"] == ["AAPL"]
    capsys.readouterr()  # the first build's report (on stderr)
    with pytest.raises(SystemExit) as exc:
        main([*main_args, "--ticker-pattern", "(", "--out", str(tmp_path / "x")])
    assert exc.value.code != 0
    _one_red_line(capsys.readouterr().err, "not a regular expression")


def test_benchmark_option_does_not_apply_to_the_sample(tmp_path, capsys):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["download", "--benchmark", "x.csv", "--out", str(tmp_path / "x")])
    assert exc.value.code != 0
    _one_red_line(capsys.readouterr().err, "benchmark do not apply to the sample")
