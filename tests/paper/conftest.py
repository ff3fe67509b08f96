"""Fixtures of the paper-trading tests: a tiny run trained on the first 300 sessions of
:data:`paper_setup.BARS`, a copy of it per test, a 5-minute run (:mod:`intraday_setup`),
and a loopback Alpaca server on the free data plan that replays the later sessions
(:mod:`replay`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from paper_setup import BARS, START_CASH, TRAIN_SESSIONS, long_frame, train_tiny  # noqa: E402
from replay import AlpacaPaper  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """(run directory, dataset directory) of a tiny run trained on the first 300 sessions."""
    return train_tiny(tmp_path_factory.mktemp("paper-run"), long_frame(TRAIN_SESSIONS), "r1")


@pytest.fixture(scope="session")
def intraday_run(tmp_path_factory):
    """(run directory, dataset directory) of the 5-minute run of :mod:`intraday_setup`."""
    from intraday_setup import train_intraday

    return train_intraday(tmp_path_factory.mktemp("paper-5min"))


@pytest.fixture
def run_dir(trained, tmp_path) -> Path:
    """A copy of the trained run (its ``paper/`` folder is this test's own)."""
    return Path(shutil.copytree(trained[0], tmp_path / "runs" / trained[0].name))


@pytest.fixture
def server(monkeypatch):
    """The replay server with the account's cash, and the environment that points at it."""
    srv = AlpacaPaper(BARS, cash=START_CASH)
    monkeypatch.setenv("APCA_API_KEY_ID", "test-key")
    monkeypatch.setenv("APCA_API_SECRET_KEY", "test-secret")
    monkeypatch.setenv("FINPOD_ALPACA_BACKOFF_S", "0.01")
    monkeypatch.setenv("FINPOD_ALPACA_DATA_URL", srv.url)
    monkeypatch.setenv("FINPOD_ALPACA_TRADING_URL", srv.url)
    yield srv
    srv.close()


@pytest.fixture
def trader(run_dir, trained, server):
    """``make(**kw)`` → a started PaperTrader on the copied run; its log lines in ``.lines``."""
    from finpod.paper.trader import PaperTrader

    def make(**kw):
        lines: list[str] = []
        t = PaperTrader(run_dir, data=trained[1], lookback_sessions=400, log=lines.append, **kw)
        t.lines = lines
        t.start()
        return t

    return make
