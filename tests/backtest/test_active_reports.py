"""Active-manager reports: the reference column, IR/TE/t-stat, starts, the ensemble."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest import metrics as m
from finpod.backtest import run_backtest
from finpod.backtest.runner import backtest_market
from finpod.env import EnvConfig

from .fakes import FakeDataset, make_market, make_run_dir


def test_active_statistics_are_the_hand_computed_ones():
    idx = pd.date_range("2021-01-04", periods=250, freq="B", tz="America/New_York")
    rng = np.random.default_rng(0)
    ref = pd.Series(rng.normal(0.0005, 0.01, 250), index=idx)
    agent = ref + rng.normal(0.0002, 0.002, 250)
    got = m.active_statistics(agent, ref, 252.0)
    active = (agent - ref).to_numpy()
    mean, sd = active.mean(), active.std(ddof=1)
    assert got["active_return"] == pytest.approx(mean * 252)
    assert got["tracking_error"] == pytest.approx(sd * math.sqrt(252))
    assert got["information_ratio"] == pytest.approx(mean / sd * math.sqrt(252))
    assert got["ir_t_stat"] == pytest.approx(mean / (sd / math.sqrt(250)))


@pytest.mark.parametrize("start", ["cash", "reference"])
def test_zero_action_agent_has_no_active_return_and_benchmarks_start_like_it(start):
    market = make_market(num_bars=60, seed=3)
    n = market.num_stocks
    config = EnvConfig(action_mode="active", start=start, cost_rate=0.002)
    result = backtest_market(market, lambda obs: torch.zeros(1, n), config)
    agent = result.metrics["agent"]
    assert agent["active_return"] == 0.0 and agent["tracking_error"] == 0.0
    assert agent["mean_exposure"] > 0.95
    first_costs = result.benchmark_costs.iloc[1]
    cap = config.initial_cash
    if start == "reference":  # invested at bar 0: no initial purchase for anyone
        assert (first_costs < 0.1 * cap * config.cost_rate).all(), first_costs
        assert "start invested" in result.disclosures["start"]
        assert agent["annual_turnover_ex_initial"] == agent["annual_turnover"]
    else:
        assert (first_costs > 0.9 * cap * config.cost_rate).all(), first_costs
        assert agent["annual_turnover_ex_initial"] < agent["annual_turnover"]
    assert result.info["largest_tilts"][0]["mean_active_weight"] == pytest.approx(0.0, abs=1e-9)


def test_ensemble_agent_trades_the_mean_target_weights_of_the_top_entries(tmp_path, monkeypatch):
    whole = make_market(num_bars=300, seed=5)
    splits = {
        "train": whole.slice(0, 150),
        "validation": whole.slice(150, 200),
        "backtest": whole.slice(200, 300),
    }
    (tmp_path / "dataset").mkdir()
    env = {"action_mode": "active", "start": "reference", "max_active_weight": 0.1}
    run_dir = make_run_dir(
        tmp_path, splits["backtest"], dataset_path=str(tmp_path / "dataset"), env=env
    )
    FakeDataset(splits).install(monkeypatch)
    result = run_backtest(run_dir, agent="ensemble-2")
    assert "mean target weights" in result.info["agent"]
    assert result.info["pod_ids"] == ["pod000", "pod001"]
    assert np.isfinite(result.metrics.loc["information_ratio", "agent"])
    assert result.metrics.loc["mean_exposure", "agent"] > 0.9


def test_worst_drawdowns_table_has_peak_valley_recovery_and_length():
    idx = pd.date_range("2021-01-04 10:00", periods=8, freq="5min", tz="America/New_York")
    r = pd.Series([0.1, -0.1, -0.1, 0.3, 0.0, -0.05, 0.0, 0.0], index=idx)
    table = m.worst_drawdowns(r, top=5)
    first = table.iloc[0]
    assert first["drawdown"] == pytest.approx(0.19)
    assert (first["peak"], first["valley"], first["recovery"]) == (idx[0], idx[2], idx[3])
    assert first["length"] == 3
    second = table.iloc[1]
    assert second["peak"] == idx[4] and pd.isna(second["recovery"]) and second["length"] == 3
