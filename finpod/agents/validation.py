"""Validation scoring of a training run: what ``eval_fn`` returns, and the trading one.

:func:`finpod.agents.train.train` calls an ``eval_fn`` after each segment; its answer is
a score, or a score with the per-bar validation returns that make the checkpoint a
candidate of the selection statistics. :func:`make_trading_eval` is that function for
the trading env: a deterministic rollout over the validation split.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from finpod.env.rollout import activity
from finpod.scores import scored_series

#: What ``eval_fn`` returns: a score, or (score, (T_val,) per-bar validation returns).
Evaluation = float | tuple[float, np.ndarray]


def evaluate(eval_fn: Callable[[Any], Evaluation], agent: Any) -> tuple[float, np.ndarray | None]:
    """(score, per-bar validation returns or None) from either form of ``eval_fn``."""
    out = eval_fn(agent)
    if isinstance(out, tuple):
        score, returns = out
        return float(score), np.asarray(returns, dtype=np.float64).reshape(-1)
    return float(out), None


def make_trading_eval(
    market: Any, config: Any, score_name: str = "sharpe"
) -> Callable[[Any], tuple[float, np.ndarray]]:
    """``agent -> (score, returns)``: deterministic rollout over the whole ``market`` split.

    ``market`` is the validation split: checkpoints are selected on it, never on the
    backtest split. ``config`` is the env settings of the run (execution controls
    included), the same the backtest replays. ``returns`` is the (T − 1,) float64 per-bar
    simple returns of the rollout (over the reference's, for an active score: the series
    the score ranks), the candidate's record for the selection statistics.
    Its ``activity`` attribute holds the last call's validation ``return`` (annualized)
    and ``turnover`` and ``costs`` (see :func:`finpod.env.rollout.activity`), which
    :func:`~finpod.agents.train.train` logs with the score.
    """
    # lazy: importing finpod.agents loads neither finpod.env nor pandas (finpod.scores)
    from finpod.env import rollout, score

    def eval_fn(agent: Any) -> tuple[float, np.ndarray]:
        result = rollout(
            lambda obs: agent.act(obs, deterministic=True), market, config, device=agent.device
        )
        # The annualized return and the trading beside the score, as a tournament pod logs.
        annual = {} if score_name == "return" else {"return": score(result, "return")}
        eval_fn.activity = {**annual, **activity(result)}
        series = scored_series(result.returns, result.reference_returns, score_name)
        return score(result, score_name), series.to_numpy(dtype=np.float64)

    eval_fn.activity = {}
    return eval_fn
