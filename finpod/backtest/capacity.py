"""The capacity line: one policy backtested at several account sizes.

With square-root impact (``EnvConfig.cost_model = "sqrt"``) a trade's cost per dollar grows
with its size against the volume traded, so the same policy earns less on a larger
account. :func:`capacity_line` rolls the agent and the equal-weight benchmarks over the
same split at each size, with everything else (costs, fills, controls) as the backtest
ran, and reports per size: annual return, fees and impact (each as a fraction of the
initial capital, over the split) and annual turnover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd
import torch

from finpod.backtest import metrics as m
from finpod.backtest.benchmarks import (
    EqualWeightBuyHold,
    EqualWeightRebalanced,
    benchmark_config,
)
from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.rollout import Rollout, rollout

#: Account sizes of the capacity line, dollars.
ACCOUNT_SIZES = (1e6, 1e8, 1e9)
#: Columns of :func:`capacity_line`, in order.
CAPACITY_COLUMNS = (
    "strategy",
    "account_size",
    "annual_return",
    "fees_pct_capital",
    "impact_pct_capital",
    "annual_turnover",
)

Policy = Callable[[torch.Tensor], torch.Tensor]


def rollout_row(name: str, size: float, result: Rollout, bars_per_year: float) -> dict:
    """One row of the capacity line from a rollout at account size ``size``."""
    costs = float(result.costs.sum())
    impact = float(result.impact.sum()) if result.impact is not None else 0.0
    # Dollars traded at each fill bar: the env's turnover is of the value before the trade.
    traded = result.turnover.iloc[1:] * result.account_value.shift(1).iloc[1:]
    return {
        "strategy": name,
        "account_size": float(size),
        "annual_return": m.annual_return(result.returns, bars_per_year),
        "fees_pct_capital": (costs - impact) / size,
        "impact_pct_capital": impact / size,
        # Of the mean account value over the whole split, as the backtest's metrics table.
        "annual_turnover": m.annual_turnover(traded, result.account_value, bars_per_year),
    }


def capacity_line(
    market: MarketData,
    policy: Callable[[], Policy] | None,
    config: EnvConfig,
    sizes: tuple[float, ...] = ACCOUNT_SIZES,
    on_rollout: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Rows of :data:`CAPACITY_COLUMNS`: the agent (``policy()`` makes a fresh policy, None
    leaves it out) and the equal-weight benchmarks, each at every size in ``sizes``
    (dollars), trading ``market`` with ``config`` (``initial_cash`` replaced by the size;
    the benchmarks through :func:`~finpod.backtest.benchmarks.benchmark_config`)."""
    bars = float(market.annualization)
    lines: dict[str, tuple[Callable[[], Policy], EnvConfig]] = {}
    if policy is not None:
        lines["agent"] = (policy, config)
    bench = benchmark_config(config)
    lines["equal_weight_daily"] = (lambda: EqualWeightRebalanced(market, every="session"), bench)
    lines["equal_weight_buy_hold"] = (lambda: EqualWeightBuyHold(market), bench)
    rows = []
    for name, (make, cfg) in lines.items():
        for size in sizes:
            result = rollout(make(), market, replace(cfg, initial_cash=float(size)))
            rows.append(rollout_row(name, size, result, bars))
            if on_rollout is not None:
                on_rollout(f"{name} at ${size:,.0f}")
    return pd.DataFrame(rows, columns=list(CAPACITY_COLUMNS))


def capacity_text(records: list[dict]) -> pd.DataFrame:
    """The capacity line (``info["capacity"]`` records) as text for a reader: account size
    in dollars, returns and costs in % (fees and impact: of the initial capital, over the
    backtest), turnover in × capital per year."""

    def pct(x: float) -> str:
        return f"{100 * x:.2f} %" if x == x else "–"

    return pd.DataFrame(
        {
            "strategy": r["strategy"],
            "account": f"${r['account_size']:,.0f}",
            "annual return": pct(r["annual_return"]),
            "fees / capital": pct(r["fees_pct_capital"]),
            "impact / capital": pct(r["impact_pct_capital"]),
            "turnover / year": f"{r['annual_turnover']:.2f}",
        }
        for r in records
    )
