"""How a metric is named and formatted for a reader: one definition for the tearsheet,
the CLI's table and notebooks."""

from __future__ import annotations

import math

#: Metrics shown as percentages; the others are plain ratios or dollars.
PERCENT = frozenset(
    {
        "cumulative_return",
        "annual_return",
        "annual_volatility",
        "max_drawdown",
        "alpha",
        "active_return",
        "tracking_error",
        "mean_exposure",
    }
)
#: Metrics in dollars.
DOLLARS = frozenset({"costs_paid", "fees_paid", "impact_paid"})
#: A reader's name of each metric of :data:`finpod.backtest.metrics.METRIC_NAMES`.
METRIC_LABELS = {
    "cumulative_return": "Cumulative return",
    "annual_return": "Annual return",
    "annual_volatility": "Annual volatility",
    "sharpe": "Sharpe ratio",
    "sortino": "Sortino ratio",
    "max_drawdown": "Max drawdown",
    "calmar": "Calmar ratio",
    "alpha": "Alpha (annual, vs index)",
    "beta": "Beta (vs index)",
    "annual_turnover": "Turnover (× capital / year)",
    "costs_paid": "Costs paid ($)",
    "costs_pct_capital": "Costs / initial capital",
    "fees_paid": "Fees paid ($, of the costs)",
    "impact_paid": "Market impact paid ($, of the costs)",
    "psr": "PSR (P[true Sharpe > 0] on this backtest)",
    "annual_turnover_ex_initial": "Turnover ex initial purchase (× capital / year)",
    "mean_exposure": "Mean exposure (stocks / account value)",
    "active_return": "Active return vs reference (annual, arithmetic)",
    "tracking_error": "Tracking error vs reference (annual)",
    "information_ratio": "Information ratio vs reference",
    "ir_t_stat": "t-statistic of the active return",
}


def metric_label(name: str) -> str:
    """The reader's name of metric ``name`` (the name itself if it has none)."""
    return METRIC_LABELS.get(name, name)


def format_metric(name: str, value: float | None) -> str:
    """``value`` of metric ``name`` as text: ``12.34 %``, ``1,234``, ``0.56``; ``–`` if not finite."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    if name in PERCENT:
        return f"{value * 100:.2f} %"
    if name == "costs_pct_capital":
        return f"{value * 100:.3f} %"
    if name in DOLLARS:
        return f"{value:,.0f}"
    return f"{value:.2f}"
