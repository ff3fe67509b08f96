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

import pandas as pd

#: Names a strategy's ``train.score`` and ``tournament.score`` may take.
SCORES = ("sharpe", "sortino", "calmar", "return")
#: Scores are clipped to ±SCORE_LIMIT so leaderboards and JSON files stay finite.
SCORE_LIMIT = 1e9


def score_returns(returns: pd.Series, name: str, annualization: float) -> float:
    """Score ``name`` of ``returns`` ((T,) per-bar simple returns) with ``annualization``
    bars per year: annualized Sharpe, Sortino, Calmar, or compound annual ``return``.

    Raises ``ValueError`` for an unknown name (callers say which setting was wrong).
    """
    import empyrical

    metrics = {
        "sharpe": empyrical.sharpe_ratio,
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
