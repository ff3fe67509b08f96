"""Rollouts rebuild the account as pandas; scores annualize its returns."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.env import EnvConfig, Rollout, rollout, score
from finpod.errors import FinpodError
from finpod.scores import SCORE_LIMIT

from .markets import make_market


def random_policy(seed: int):
    gen = torch.Generator().manual_seed(seed)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return torch.rand(obs.shape[0], 3, generator=gen) * 2 - 1

    return policy


@pytest.fixture
def result() -> tuple[Rollout, object]:
    market = make_market(40, 3, listing=[0, 10, 0], untradable=0.1, seed=4)
    config = EnvConfig(initial_cash=50_000.0, cost_rate=0.001, slippage=0.0005)
    return rollout(random_policy(0), market, config), market


def test_rollout_objects_share_the_market_timestamps(result):
    res, market = result
    for obj in (res.account_value, res.cash, res.positions, res.holdings, res.costs, res.turnover):
        assert obj.index.equals(market.timestamps)
    assert res.returns.index.equals(market.timestamps[1:])
    assert list(res.holdings.columns) == market.tickers
    assert list(res.positions.columns) == [*market.tickers, "cash"]


def test_positions_and_cash_add_up_to_the_account_value(result):
    res, _ = result
    np.testing.assert_allclose(res.positions.sum(axis=1), res.account_value, rtol=1e-12)
    assert res.account_value.iloc[0] == 50_000.0
    np.testing.assert_allclose(res.returns, res.account_value.pct_change().iloc[1:])


def test_transactions_rebuild_holdings_and_costs(result):
    res, market = result
    assert len(res.transactions) > 0
    per_bar = res.transactions.pivot_table(
        index="timestamp", columns="ticker", values="shares", aggfunc="sum"
    )
    rebuilt = per_bar.reindex(index=market.timestamps, columns=market.tickers).fillna(0.0).cumsum()
    np.testing.assert_allclose(rebuilt.to_numpy(), res.holdings.to_numpy())
    costs = res.transactions.groupby(level="timestamp")["cost"].sum()
    np.testing.assert_allclose(costs.reindex(market.timestamps).fillna(0.0), res.costs, atol=1e-8)
    # Fills are at the next bar: never on bar 0, never on a non-tradable (bar, ticker).
    assert (res.transactions.index > market.timestamps[0]).all()
    rows = market.timestamps.get_indexer(res.transactions.index)
    cols = [market.tickers.index(t) for t in res.transactions["ticker"]]
    assert market.tradable.numpy()[rows, cols].all()
    # Executed price = the bar's open moved against the trader by the slippage.
    opens = market.open.double().numpy()[rows, cols]
    side = np.sign(res.transactions["shares"].to_numpy())
    np.testing.assert_allclose(res.transactions["price"], opens * (1 + side * 0.0005), rtol=1e-6)


def test_rollout_is_deterministic_and_ignores_episode_length():
    market = make_market(30, 3, seed=9)
    config = EnvConfig(episode_length=5)
    a = rollout(random_policy(1), market, config)
    b = rollout(random_policy(1), market, config)
    pd.testing.assert_series_equal(a.account_value, b.account_value)
    assert len(a.account_value) == 30


def test_idle_policy_keeps_its_cash_and_scores_zero():
    market = make_market(20, 3)
    res = rollout(lambda obs: torch.zeros(obs.shape[0], 3), market, EnvConfig())
    assert (res.account_value == 1_000_000.0).all()
    assert res.transactions.empty
    assert score(res, "sharpe") == 0.0


def test_sharpe_score_annualizes_by_bar_size(result):
    res, _ = result
    r = res.returns
    manual = r.mean() / r.std(ddof=1) * math.sqrt(252)
    assert score(res, "sharpe") == pytest.approx(manual, rel=1e-9)
    assert score(res, "sharpe", bar="1min") == pytest.approx(manual * math.sqrt(390), rel=1e-9)
    total = res.account_value.iloc[-1] / res.account_value.iloc[0]
    assert score(res, "return") == pytest.approx(total ** (252 / len(r)) - 1, rel=1e-9)
    for name in ("sortino", "calmar"):
        assert math.isfinite(score(res, name))
    with pytest.raises(FinpodError, match="unknown score"):
        score(res, "alpha")


def test_sortino_and_calmar_scores_match_hand_computed_answers(result):
    # Five daily returns, worked by hand (risk-free rate 0, 252 bars a year):
    # Sortino = mean · 252 / (√(mean(min(r, 0)²)) · √252) = 0.006 · 252 / (0.01 · √252);
    # Calmar = annual compound return / max drawdown, the drawdown 1.01 → 0.9898 = 2 %.
    from dataclasses import replace

    res, _ = result
    r = [0.01, -0.02, 0.03, -0.01, 0.02]
    known = replace(res, returns=pd.Series(r, index=res.returns.index[:5]), annualization=252.0)
    sortino = 0.006 * 252 / (0.01 * math.sqrt(252))
    assert sortino == pytest.approx(9.524704719832526, rel=1e-12)
    assert score(known, "sortino") == pytest.approx(sortino, rel=1e-9)
    growth = 1.01 * 0.98 * 1.03 * 0.99 * 1.02
    calmar = (growth ** (252 / 5) - 1) / 0.02
    assert score(known, "calmar") == pytest.approx(calmar, rel=1e-9)
    # With 390 × 252 bars a year the Sortino scales by √390.
    assert score(known, "sortino", bar="1min") == pytest.approx(sortino * math.sqrt(390), rel=1e-9)
    # No losing bar: an infinite Sortino is clipped to SCORE_LIMIT, an undefined Calmar
    # (no drawdown) scores 0.0.
    up = replace(known, returns=known.returns.abs())
    assert score(up, "sortino") == SCORE_LIMIT and score(up, "calmar") == 0.0
