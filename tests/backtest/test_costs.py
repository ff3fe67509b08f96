"""The costs a backtest reports are the costs the env took from the account's cash."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest.runner import backtest_market
from finpod.env import EnvConfig

from .fakes import make_market


def cash_taken_by_costs(cash: pd.Series, transactions: pd.DataFrame) -> pd.Series:
    """(T,) dollars the account's cash lost at each bar beyond what its trades paid and
    earned at their executed prices: ``cash[t − 1] − cash[t] − Σ shares · price``."""
    spent = (transactions["shares"] * transactions["price"]).groupby(level="timestamp").sum()
    spent = spent.reindex(cash.index, fill_value=0.0)
    taken = (cash.shift(1) - cash - spent).fillna(0.0)
    return taken.rename("costs")


def churning_policy(n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return lambda obs: torch.rand(obs.shape[0], n, generator=gen) * 2 - 1


@pytest.mark.parametrize(
    "env",
    [
        {"cost_rate": 0.004, "slippage": 0.001},
        {"cost_rate": 0.002, "action_mode": "active", "start": "reference"},
        {"cost_rate": 0.003, "integer_shares": False, "partial_adjustment": 0.5},
    ],
    ids=["weights", "active", "fractional-partial"],
)
def test_reported_costs_are_the_cash_the_env_took_bar_by_bar(env):
    market = make_market(num_bars=60, num_stocks=4, seed=2)
    config = EnvConfig(**env)
    result = backtest_market(market, churning_policy(4), config, with_benchmarks=False)
    taken = cash_taken_by_costs(result.positions["cash"], result.transactions)
    assert taken.sum() > 100.0  # the policy traded and paid for it
    # The cost series and the transactions' cost column, bar by bar.
    np.testing.assert_allclose(result.costs, taken, rtol=0, atol=1e-6)
    column = result.transactions["cost"].groupby(level="timestamp").sum()
    np.testing.assert_allclose(column.reindex(taken.index, fill_value=0.0), taken, atol=1e-6)
    # Each fill's cost is its share of the bar's: proportional to its notional.
    notional = result.transactions["shares"].abs() * result.transactions["price"]
    per_bar = notional.groupby(level="timestamp").transform("sum")
    bar_cost = column.reindex(result.transactions.index)
    np.testing.assert_allclose(
        result.transactions["cost"], bar_cost * notional / per_bar, rtol=1e-9, atol=1e-9
    )
    paid = result.compute_metrics().loc["costs_paid"].iloc[0]  # the agent's column
    assert paid == pytest.approx(taken.sum(), rel=1e-9)
