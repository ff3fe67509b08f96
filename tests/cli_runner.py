"""``finpod`` through its real entry point, in process, and what a bad input must print."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def run_finpod(
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    cwd: Path | None = None,
    **env: str,
) -> subprocess.CompletedProcess:
    """``finpod ARGS`` in this process (``env``: variables set for the test, ``cwd``: its
    working directory) → (args, returncode, stdout, stderr)."""
    from finpod.cli import main  # the whole CLI: loaded by the tests that run it

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if cwd is not None:
        monkeypatch.chdir(cwd)
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    cap = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, cap.out, cap.err)


def one_error_line(out: subprocess.CompletedProcess, *words: str, alone: bool = True) -> str:
    """The one ``error: `` line of a failed command (exit 1, no traceback), holding every
    word of ``words``. ``alone``: nothing else on stderr either."""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    assert not alone or lines == errors, out.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]
