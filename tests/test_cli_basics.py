"""The CLI's contract: --version, --help everywhere, one red line and exit 1 on errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from finpod import __version__


def _finpod(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "finpod", *args], capture_output=True, text=True, timeout=120
    )


def test_version_prints_package_version():
    out = _finpod("--version")
    assert out.returncode == 0
    assert __version__ in out.stdout


def _one_red_line(out: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (exit 1, no box, no traceback)."""
    assert out.returncode == 1, (out.returncode, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in out.stderr and "╭" not in out.stderr and "Usage:" not in out.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "says", "help_of"),
    [
        (["no-such-command"], "No such command 'no-such-command'", "finpod --help"),
        (["backtest", "some-run", "--bogus", "1"], "No such option: --bogus", "finpod backtest"),
        (["backtest"], "Missing argument", "finpod backtest --help"),
        (["train", "--steps", "many"], "Invalid value for '--steps'", "finpod train --help"),
    ],
)
def test_usage_errors_are_one_red_line_with_a_hint_and_exit_1(args, says, help_of):
    line = _one_red_line(_finpod(*args))
    assert says in line and help_of in line


def test_finpod_alone_prints_the_help():
    out = _finpod()
    assert out.returncode == 0 and "Usage" in out.stdout and "backtest" in out.stdout


def test_train_without_strategy_or_resume_is_one_red_line_and_exit_1():
    out = _finpod("train")
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--strategy" in lines[0] and "Traceback" not in out.stderr


def test_every_command_has_help():
    for command in ("download", "info", "train", "backtest", "report", "run"):
        out = _finpod(command, "--help")
        assert out.returncode == 0, command
        assert "Usage" in out.stdout, command


def test_ctrl_c_names_the_noted_run_and_the_resume_once_it_has_a_checkpoint(tmp_path):
    from finpod.cli.interrupted import interrupted_line, note_run_dir, noted_run_dir
    from finpod.runs import RunDir

    note_run_dir(tmp_path)
    assert noted_run_dir() == tmp_path
    assert "nothing can be resumed yet" in interrupted_line(noted_run_dir())
    last = RunDir(tmp_path).checkpoint("last")
    last.parent.mkdir(parents=True)
    last.write_bytes(b"")
    assert f"finpod train --resume {tmp_path}" in interrupted_line(noted_run_dir())
    assert interrupted_line(None) == "[bold red]interrupted[/]"
    note_run_dir(None)
