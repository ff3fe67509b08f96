"""Fixtures of the paper-trading tests: seeded daily bars of three tickers, a tiny run
trained on the first 300 sessions (files source, PPO, active tilts around equal weight with a no-trade
band), and a loopback Alpaca server that replays the later sessions."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from replay import TZ, AlpacaPaper, alpaca_bars, long_table  # noqa: E402

from finpod.data.calendar import sessions  # noqa: E402

SYMBOLS = ("AAA", "BBB", "CCC")
DAYS = sessions("2021-01-04", "2022-06-30")[:330]
#: Sessions the run is trained on (the dataset); the later ones are only served live.
TRAIN_SESSIONS = 300
START_CASH = 1_000_000.0
STRATEGY = """
[agent]
algorithm = "ppo"
[agent.hparams]
horizon = 8
minibatch_size = 64
update_epochs = 1
actor_hidden = [16]
critic_hidden = [16]
[env]
action_mode = "active"
episode_length = 40
cost_rate = 0.0
no_trade_band = 0.01
dtype = "float64"
[train]
num_envs = 8
total_steps = 256
eval_every = 128
seed = 3
device = "cpu"
"""


def make_bars(seed: int = 11) -> dict[str, pd.DataFrame]:
    """Alpaca's daily bar fields (``t`` at midnight New York, in UTC), each open the
    previous close: the env's fill price (the next open) and the price the trader sizes
    its orders with are one."""
    rng = np.random.default_rng(seed)
    starts = pd.DatetimeIndex(DAYS).tz_localize(TZ)
    out = {}
    for k, sym in enumerate(SYMBOLS):
        r = 0.0003 * (k - 1) + 0.015 * rng.standard_normal(len(DAYS))
        close = np.round((40.0 + 30 * k) * np.exp(np.cumsum(r)), 2)
        out[sym] = alpaca_bars(starts, close, rng, 0.004, (100_000, 900_000), (100, 900))
    return out


BARS = make_bars()


def long_frame(upto: int, bars: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """The bars (default :data:`BARS`) of the first ``upto`` sessions as the long table the
    files source reads."""
    return long_table(BARS if bars is None else bars, upto)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def train_tiny(root: Path, frame: pd.DataFrame, run_id: str, **dataset_opts) -> tuple[Path, Path]:
    """(run, dataset) of the tiny strategy trained on the long table ``frame`` (files
    source, daily bars; ``dataset_opts`` e.g. ``feature_columns``)."""
    from finpod.data import build_dataset
    from finpod.pipeline import train_agent

    frame = frame.assign(timestamp=frame["timestamp"].dt.strftime("%Y-%m-%d"))
    frame.to_csv(root / "bars.csv", index=False)
    dataset = build_dataset(
        "files", root / "data", path=root / "bars.csv", bar="1d", **dataset_opts
    )
    (root / "s.toml").write_text(STRATEGY)
    run = train_agent(root / "s.toml", dataset, root / "runs", progress=False, run_id=run_id)
    return Path(run), Path(dataset)


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """(run directory, dataset directory) of a tiny run trained on the first 300 sessions."""
    return train_tiny(tmp_path_factory.mktemp("paper-run"), long_frame(TRAIN_SESSIONS), "r1")


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
        t = PaperTrader(run_dir, data_dir=trained[1], lookback_sessions=400, log=lines.append, **kw)
        t.lines = lines
        t.start()
        return t

    return make


def after_close(k: int) -> str:
    """16:30 New York on session ``k``: its daily bar is complete, the market closed."""
    return f"{DAYS[k]:%Y-%m-%d} 16:30"


def play(trader, server, k: int, part: dict[str, float] | None = None) -> str:
    """Decide after the close of session ``k``, then fill the orders at session k+1's open."""
    server.set_clock(after_close(k))
    what = trader.step()
    server.fill_open_orders(f"{DAYS[k + 1]:%Y-%m-%d}", part)
    return what
