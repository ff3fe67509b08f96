"""One vocabulary: an option's name means one thing in every command and in the Python
API, at every layer; there are no hidden old spellings or renamed keywords (the package
was never released, so nothing needs them); help reads cleanly at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_no_command_has_a_hidden_option():
    import typer.main

    from finpod.cli import app

    for name, command in typer.main.get_command(app).commands.items():
        hidden = [p.opts for p in command.params if getattr(p, "hidden", False)]
        assert hidden == [], (name, hidden)


def test_no_old_spelling_or_keyword_shim_is_left_in_the_source():
    shims = ("hidden=True", "renamed_keywords")
    found = [
        f"{path.relative_to(ROOT)}: {shim}"
        for path in sorted((ROOT / "finpod").rglob("*.py"))
        for shim in shims
        if shim in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_every_layer_takes_the_cli_words():
    import inspect

    from finpod.agent_run import train_single_agent
    from finpod.backtest import run_backtest
    from finpod.paper.decide import load_run_agent
    from finpod.paper.trader import PaperTrader
    from finpod.pipeline import backtest_and_report, run_all, train, train_agent
    from finpod.tournament import run_tournament

    old = {"out", "data_dir", "dataset_dir"}
    for fn, words in (
        (train, {"data", "runs"}),
        (train_agent, {"data", "runs"}),
        (run_all, {"data", "runs", "reports"}),
        (backtest_and_report, {"run", "data", "runs", "reports"}),
        (run_tournament, {"data", "runs"}),
        (train_single_agent, {"data", "runs"}),
        (run_backtest, {"data"}),
        (load_run_agent, {"data"}),
        (PaperTrader, {"data"}),
    ):
        names = set(inspect.signature(fn).parameters)
        assert words <= names and not names & old, (fn.__qualname__, sorted(names))


def test_an_old_keyword_is_an_error(tmp_path):
    from finpod.pipeline import train

    with pytest.raises(TypeError, match="out"):
        train(None, None, out=tmp_path / "runs")
