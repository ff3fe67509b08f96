"""The capacity line and the split of costs into fees and impact in a backtest."""

from __future__ import annotations

import pytest
import torch

from finpod.backtest import BacktestResult
from finpod.backtest.capacity import capacity_line
from finpod.backtest.runner import backtest_market
from finpod.data.synthetic_market import make_synthetic
from finpod.env import EnvConfig

SIZES = (1e6, 1e8, 1e9)


@pytest.fixture(scope="module")
def market():
    return make_synthetic(4, 160, seed=2)


def hold_equal(obs: torch.Tensor) -> torch.Tensor:
    return torch.full((obs.shape[0], 4), 0.25)


def test_square_root_costs_grow_with_the_account_and_linear_costs_do_not(market):
    sqrt = EnvConfig(action_mode="weights", cost_model="sqrt", cost_rate=0.001)
    line = capacity_line(market, lambda: hold_equal, sqrt, SIZES)
    assert list(line["strategy"].unique()) == [
        "agent",
        "equal_weight_daily",
        "equal_weight_buy_hold",
    ]
    for _, rows in line.groupby("strategy"):
        impact = rows["impact_pct_capital"].to_numpy()
        assert impact[0] > 0 and impact[0] < impact[1] < impact[2]
        assert rows["annual_return"].is_monotonic_decreasing
        # Fees are a rate on what is traded: about the same share of capital at any size.
        fees = rows["fees_pct_capital"].to_numpy()
        assert fees.max() < 1.5 * fees.min()
    flat = capacity_line(market, None, EnvConfig(action_mode="weights", cost_rate=0.001), SIZES)
    assert (flat["impact_pct_capital"] == 0.0).all()
    returns = flat.groupby("strategy")["annual_return"]
    assert (returns.max() - returns.min()).max() < 2e-3  # whole shares only


def test_backtest_reports_fees_and_impact_apart_and_keeps_them(market, tmp_path):
    config = EnvConfig(action_mode="weights", cost_model="sqrt", cost_rate=0.001)
    result = backtest_market(market, hold_equal, config, capacity=SIZES, capacity_policy=None)
    col = result.metrics
    # Every line that trades pays impact under the same model.
    for name in col.columns:
        assert col.loc["impact_paid", name] > 0
        assert col.loc["fees_paid", name] + col.loc["impact_paid", name] == pytest.approx(
            col.loc["costs_paid", name]
        )
    assert {r["strategy"] for r in result.info["capacity"]} == {
        "equal_weight_daily",
        "equal_weight_buy_hold",
    }
    html = result.to_html(tmp_path / "t.html").read_text()
    assert "Capacity" in html and "$1,000,000,000" in html and "square-root impact" in html
    again = BacktestResult.load(result.save(tmp_path / "saved"))
    assert again.metrics.loc["impact_paid", "agent"] == pytest.approx(
        col.loc["impact_paid", "agent"]
    )


def swing(obs: torch.Tensor) -> torch.Tensor:
    """Weights that move with the observation: the account trades every bar."""
    return torch.softmax(obs[:, -4:] * 20.0, dim=-1)


@pytest.mark.parametrize("size", [1e6, 1e9])
def test_capacity_turnover_is_the_backtests_own_turnover_at_the_same_size(market, size):
    config = EnvConfig(action_mode="weights", cost_model="sqrt", cost_rate=0.001)
    sized = EnvConfig(**{**config.__dict__, "initial_cash": size})
    result = backtest_market(market, swing, sized, capacity=(size,), capacity_policy=lambda: swing)
    rows = {r["strategy"]: r for r in result.info["capacity"]}
    for name in ("agent", "equal_weight_daily", "equal_weight_buy_hold"):
        want = result.metrics.loc["annual_turnover", name]
        assert want > 0.1, name  # it trades, so the account value it is measured on matters
        assert rows[name]["annual_turnover"] == pytest.approx(want, rel=1e-9), name
