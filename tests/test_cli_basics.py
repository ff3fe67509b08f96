"""The CLI's contract: --version, --help everywhere, one red line and exit 1 on errors."""

from __future__ import annotations

import subprocess
import sys

from finpod import __version__


def _finpod(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "finpod", *args], capture_output=True, text=True, timeout=120
    )


def test_version_prints_package_version():
    out = _finpod("--version")
    assert out.returncode == 0
    assert __version__ in out.stdout


def test_unknown_command_exits_nonzero():
    out = _finpod("no-such-command")
    assert out.returncode != 0


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
