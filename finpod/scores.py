"""Selection scores: the one definition of what a validation score is.

A score ranks checkpoints and pods on the validation split (higher is better). It is
empyrical-reloaded's metric of the same name on the per-bar simple returns, risk-free
rate 0, annualized with the split's bars per year — the same functions the backtest's
metrics table uses — with two rules that keep a ranking total and every file finite: an
undefined value (no variance, no drawdown, no bar) scores 0.0, an infinite one is clipped
to ±:data:`SCORE_LIMIT`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from finpod.errors import FinpodError

if TYPE_CHECKING:  # in annotations only: a strategy's score names load neither
    import numpy as np
    import pandas as pd

#: Names a strategy's ``train.score`` and ``tournament.score`` may take.
SCORES = ("sharpe", "sortino", "calmar", "return", "information_ratio")
#: The score a strategy, a run or a leaderboard ranks by when it names none.
DEFAULT_SCORE = "sharpe"
#: Scores of *active* performance: computed on the per-bar returns over the zero-tilt
#: reference account (the reference weights traded through the same controls, fills and
#: costs), so they need a benchmark-relative env with an active reward.
ACTIVE_SCORES = ("information_ratio",)
#: Scores are clipped to ±SCORE_LIMIT so leaderboards and JSON files stay finite.
SCORE_LIMIT = 1e9


def score_returns(returns: pd.Series, name: str, annualization: float) -> float:
    """Score ``name`` of ``returns`` ((T,) per-bar simple returns) with ``annualization``
    bars per year: annualized Sharpe, Sortino, Calmar, or compound annual ``return``;
    ``information_ratio`` expects the active series of :func:`scored_series`.

    Raises ``ValueError`` for an unknown name (callers say which setting was wrong).
    """
    # lazy: the env and the agents load no empyrical until a score is computed
    # (a seconds-long import: tests/test_boundaries.py)
    import empyrical

    metrics = {
        "sharpe": empyrical.sharpe_ratio,
        # Of the active series (see scored_series): mean / std of the active return,
        # annualized, i.e. the information ratio after both accounts' costs.
        "information_ratio": empyrical.sharpe_ratio,
        "sortino": empyrical.sortino_ratio,
        "calmar": empyrical.calmar_ratio,
        "return": empyrical.annual_return,
    }
    if name not in metrics:
        raise ValueError(f"unknown score {name!r}; use one of {', '.join(SCORES)}")
    if len(returns) == 0:
        return 0.0
    value = float(metrics[name](returns, annualization=annualization))
    if math.isnan(value):
        return 0.0
    return float(min(max(value, -SCORE_LIMIT), SCORE_LIMIT))


def scored_series(
    returns: pd.Series | np.ndarray,
    reference: pd.Series | np.ndarray | None,
    name: str,
) -> Any:
    """The per-bar series a score ranks: ``returns`` itself, or for an active score
    (:data:`ACTIVE_SCORES`) the active returns ``returns − reference``.

    The same series is what a run records as a candidate's validation returns, so the
    Deflated Sharpe and the PBO of the selection measure the score it was made on.
    ``FinpodError`` when an active score has no reference to be measured against.
    """
    if name not in ACTIVE_SCORES:
        return returns
    if reference is None:
        raise FinpodError(
            f"score {name!r} measures returns over the reference, and this env has none",
            'use it with action_mode = "active" and reward = "active_log_return" '
            '(or "active_differential_sharpe"), or score = "sharpe"',
        )
    return returns - reference
