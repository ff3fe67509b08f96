"""Shared test setup: CPU, deterministic threads, per-session Ray temp dir."""

from __future__ import annotations

import os

import pytest
from cli_runner import run_finpod

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


#: Seconds a test may run before pytest-timeout stops it (pyproject's ``timeout``, 300 s,
#: is for everything else): tests that start a local Ray cluster, or run the whole loop
#: or a notebook, get this more generous limit. A hung test fails instead of hanging CI.
SLOW_TEST_TIMEOUT_S = 900
SLOW_TEST_FILES = ("tests/tournament/", "tests/test_notebooks.py", "tests/test_run_command.py")


def pytest_collection_modifyitems(config, items):
    """Give Ray, notebook and whole-loop tests :data:`SLOW_TEST_TIMEOUT_S` (unless a test
    sets its own ``@pytest.mark.timeout``)."""
    import pytest

    root = str(config.rootpath)
    for item in items:
        path = str(item.path).replace(root + os.sep, "").replace(os.sep, "/")
        if path.startswith(SLOW_TEST_FILES) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))


@pytest.fixture
def finpod_cli(capsys, monkeypatch):
    """``run(*args, cwd=None, **env)``: ``finpod ARGS`` through the real entry point, in
    process (:func:`cli_runner.run_finpod`) → (args, returncode, stdout, stderr)."""
    return lambda *args, cwd=None, **env: run_finpod(capsys, monkeypatch, *args, cwd=cwd, **env)


@pytest.fixture
def patch_everywhere(monkeypatch):
    """``patch(owner, name, replacement)``: :func:`rebinding.patch_everywhere` with this
    test's monkeypatch."""
    from rebinding import patch_everywhere as patch

    return lambda owner, name, replacement: patch(monkeypatch, owner, name, replacement)
