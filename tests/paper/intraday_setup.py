"""The intraday paper-trading tests' market and run: seeded 5-minute bars of two tickers
over 16 sessions, the tiny strategy (a decision every third bar, every 15 minutes) trained
on the first 14, and the clock a test sets to play a bar's end.

Test files import these by name from here; the fixture that trains the run lives in this
folder's ``conftest.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from replay import TZ, alpaca_bars, long_table
from tiny_strategy import tiny_agent

from finpod.data.calendar import sessions

SYMBOLS = ("AAA", "BBB")
DAYS = sessions("2023-03-01", "2023-03-31")[:16]
TRAIN_DAYS = 14
BARS_PER_DAY = 78
#: The first bar of the first session the run never saw.
FIRST = TRAIN_DAYS * BARS_PER_DAY
CASH = 1_000_000.0
#: Minutes between two decisions of the strategy (5-minute bars, every third).
DECISION_MIN = 15
STRATEGY = tiny_agent(
    env={
        "action_mode": "active",
        "cost_rate": 0.0,
        "no_trade_band": 0.005,
        "decision_interval": 3,
        "dtype": "float64",
    },
    train={"seed": 5},
)


def _starts() -> pd.DatetimeIndex:
    out = []
    for d in DAYS:
        open_ = pd.Timestamp(d).tz_localize(TZ) + pd.Timedelta(hours=9, minutes=30)
        out += [open_ + pd.Timedelta(minutes=5 * i) for i in range(BARS_PER_DAY)]
    return pd.DatetimeIndex(out)


STARTS = _starts()


def _bars(seed: int = 3) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = {}
    for k, sym in enumerate(SYMBOLS):
        close = np.round(
            (50.0 + 20 * k) * np.exp(np.cumsum(0.002 * rng.standard_normal(len(STARTS)))), 2
        )
        out[sym] = alpaca_bars(STARTS, close, rng, 0.001, (1000, 9000), (10, 90))
    return out


BARS = _bars()


def long_bars(upto: int) -> pd.DataFrame:
    """The first ``upto`` bars of every ticker as the files source's long table."""
    return long_table(BARS, upto)


def train_intraday(root: Path) -> tuple[Path, Path]:
    """(run, dataset) of :data:`STRATEGY` trained on the first :data:`TRAIN_DAYS` sessions."""
    from finpod.data import build_dataset
    from finpod.pipeline import train_agent

    frame = long_bars(FIRST)
    frame["timestamp"] = frame["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S")
    frame.to_csv(root / "bars.csv", index=False)
    data = build_dataset("files", root / "data", path=root / "bars.csv", bar="5min")
    (root / "s.toml").write_text(STRATEGY)
    run = train_agent(root / "s.toml", data, root / "runs", progress=False, run_id="r5")
    return Path(run), Path(data)


def bar_done(t: int, delay_min: float = 0.0) -> str:
    """The clock (New York, naive) 20 s after bar ``t`` ended, plus ``delay_min`` minutes:
    when a plan that serves bars that late first has it."""
    end = STARTS[t] + pd.Timedelta(minutes=5 + delay_min, seconds=20)
    return str(end.tz_localize(None))
