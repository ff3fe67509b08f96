"""The paper-trading tests' market and run: seeded daily bars of three tickers, the tiny
strategy trained on the first 300 sessions (files source, PPO, active tilts around equal
weight with a no-trade band), and the clock steps a test plays the replay server with.

Test files import these by name from here (never from ``conftest``, a name every test
folder has); the fixtures that use them live in this folder's ``conftest.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from replay import TZ, alpaca_bars, long_table
from tiny_strategy import tiny_agent

from finpod.data.calendar import sessions

SYMBOLS = ("AAA", "BBB", "CCC")
DAYS = sessions("2021-01-04", "2022-06-30")[:330]
#: Sessions the run is trained on (the dataset); the later ones are only served live.
TRAIN_SESSIONS = 300
START_CASH = 1_000_000.0
STRATEGY = tiny_agent(
    env={"action_mode": "active", "cost_rate": 0.0, "no_trade_band": 0.01, "dtype": "float64"}
)


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


def after_close(k: int) -> str:
    """16:30 New York on session ``k``: its daily bar is complete, the market closed."""
    return f"{DAYS[k]:%Y-%m-%d} 16:30"


def play(trader, server, k: int, part: dict[str, float] | None = None) -> str:
    """Decide after the close of session ``k``, then fill the orders at session k+1's open."""
    server.set_clock(after_close(k))
    what = trader.step()
    server.fill_open_orders(f"{DAYS[k + 1]:%Y-%m-%d}", part)
    return what
