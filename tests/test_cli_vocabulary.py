"""One vocabulary: an option's name means one thing in every command and in the Python
API; old spellings still work for a release with one warning line and are hidden from
``--help``; help reads cleanly at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("download", "info", "train", "backtest", "report", "run", "walkforward", "paper")


def _options() -> dict[str, dict[str, object]]:
    """{command: {each visible spelling: its click parameter}} of the typer app."""
    import typer.main

    from finpod.cli import app

    group = typer.main.get_command(app)
    out: dict[str, dict[str, object]] = {}
    for name, command in group.commands.items():
        out[name] = {
            flag: p
            for p in command.params
            if not getattr(p, "hidden", False)
            for flag in (*p.opts, *getattr(p, "secondary_opts", []))
        }
    return out


#: What each shared spelling names, wherever a command has it.
MEANINGS = {
    "-d": "--data",
    "-s": "--strategy",
    "-o": "--out",
}


def test_a_short_flag_means_the_same_long_option_in_every_command():
    for command, flags in _options().items():
        for short, long in MEANINGS.items():
            if short in flags:
                assert long in flags[short].opts, (command, short, flags[short].opts)


def test_out_is_only_where_a_command_makes_one_thing():
    having = {command for command, flags in _options().items() if "--out" in flags}
    assert having == {"download", "walkforward"}


def test_runs_and_reports_name_the_same_folders_everywhere():
    options = _options()
    for command in ("train", "run", "backtest", "report", "paper"):
        assert options[command]["--runs"].default == Path("runs"), command
    for command in ("run", "backtest", "report"):
        assert options[command]["--reports"].default == Path("reports"), command


def test_every_device_option_has_the_same_default_and_help():
    devices = [flags["--device"] for flags in _options().values() if "--device" in flags]
    assert len(devices) >= 4
    assert {p.default for p in devices} == {None}  # the strategy's train.device, or auto
    assert len({p.help.split(" Inside")[0] for p in devices}) == 1


def _help(command: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-m", "finpod", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns_fits_and_shows_no_type_of_a_flag(command):
    text = _help(command)
    assert "<bool>" not in text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "--out" not in text or command in ("download", "walkforward"), text


@pytest.mark.parametrize("command", COMMANDS)
def test_help_prose_wraps_at_word_ends_not_where_the_source_broke(command):
    # Before "Options:", each paragraph line but its last is filled: the next word would
    # not have fit on it.
    head = _help(command).split("Options:")[0].split("Arguments:")[0]
    prose = head.split("\n\n")[1:]
    for paragraph in prose:
        lines = paragraph.splitlines()
        for line, following in zip(lines, lines[1:], strict=False):
            assert len(line) + 1 + len(following.split()[0]) > 78, (line, following)


def test_old_spellings_are_hidden_from_help():
    assert "-o, --out" not in _help("train") and "--runs" in _help("train")
    assert "--out" not in _help("backtest") and "--reports" in _help("backtest")
    assert "--out" not in _help("report")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


def test_an_old_spelling_still_works_with_one_warning_line(finpod_cli, tmp_path, dataset):
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    (tmp_path / "afile").write_text("x")
    old = tmp_path / "afile" / "runs"  # unwritable: the value given by the old name is used
    out = finpod_cli("train", "-s", str(strategy), "-d", str(dataset), "-o", str(old))
    line = one_error_line(out, "cannot create the run directory", str(old), alone=False)
    others = [x for x in out.stderr.splitlines() if x.strip() and x != line]
    assert others == [
        "warning: --out is deprecated here and will be removed in the next release; use --runs"
    ]


def test_the_python_api_takes_the_cli_words_and_warns_on_the_old_ones(tmp_path):
    from finpod.errors import FinpodError
    from finpod.pipeline import backtest_and_report, run_all, train

    (tmp_path / "afile").write_text("x")
    old = pytest.warns(DeprecationWarning, match=r"train\(out=\) is deprecated; use runs=")
    with old, pytest.raises(FinpodError, match="cannot create the run directory"):
        train(None, None, out=tmp_path / "afile" / "runs")
    old = pytest.warns(DeprecationWarning, match=r"run_dir=\) is deprecated; use run=")
    with old, pytest.raises(FinpodError, match="not found"):
        backtest_and_report(run_dir=tmp_path / "nope")
    old = pytest.warns(DeprecationWarning, match=r"dataset_dir=\) is deprecated; use data=")
    with old, pytest.raises(FinpodError, match="is not a finpod dataset"):
        run_all(dataset_dir=tmp_path / "typo", runs=tmp_path / "r", reports=tmp_path / "p")
