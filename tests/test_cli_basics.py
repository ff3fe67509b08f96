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
