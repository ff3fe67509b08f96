"""A tiny walk-forward run for the page tests: 3 synthetic tickers, 2 folds of 400 train,
200 validation and 200 backtest sessions, one seed of a 16-unit PPO, no Ray."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tiny_strategy import tiny_agent

from finpod.data import build_dataset
from finpod.walkforward import FoldSpec, run_walkforward


def page_strategy(**env) -> str:
    """The page's strategy: the tiny agent at 512 env steps, its ``[env]`` updated with
    ``env``."""
    return tiny_agent(env=env, train={"total_steps": 512})


STRATEGY = page_strategy()


def run_tiny_walkforward(
    root: Path,
    steps: int,
    log: Callable[[str], None] | None = None,
    strategy: str = STRATEGY,
):
    """The run under ``root`` (``strategy``, dataset and output there), ``steps`` env
    steps a fold; returns :func:`~finpod.walkforward.run_walkforward`'s result."""
    (root / "tiny.toml").write_text(strategy)
    data = build_dataset(
        "synthetic", root / "syn", n_tickers=3, n_bars=1100, seed=0, start="2000-01-03"
    )
    return run_walkforward(
        data,
        root / "tiny.toml",
        root / "wf",
        spec=FoldSpec(train="400", validation="200", backtest="200", folds=2),
        seeds=1,
        steps=steps,
        use_ray=False,
        log=log,
    )
