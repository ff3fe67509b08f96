"""Deterministic single-account rollout over a whole split, as pandas, and its score."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from finpod.data.market import MarketData, periods_per_year
from finpod.env.config import EnvConfig
from finpod.env.vec_env import VecTradingEnv
from finpod.errors import FinpodError
from finpod.scores import DEFAULT_SCORE, SCORES, score_returns, scored_series

Policy = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Rollout:
    """One account traded over a whole split; every object is indexed by bar timestamps.

    Attributes:
        account_value: (T,) dollars at each bar's close; bar 0 is the initial capital (all
            cash, or invested at the reference with ``EnvConfig.start = "reference"``).
        returns: (T − 1,) simple return of each bar after the first (index: timestamps[1:]).
        cash: (T,) dollars.
        positions: (T, N + 1) dollar value of each ticker at the bar's mark price, plus a
            ``cash`` column (pyfolio's ``positions`` layout).
        holdings: (T, N) shares.
        transactions: one row per executed (bar, ticker) trade, index ``timestamp`` (the fill
            bar); columns ``ticker``, ``shares`` (signed, + buy), ``price`` (executed price
            incl. slippage, dollars), ``cost`` (dollars: what the env charged this fill, fee
            plus impact, :func:`finpod.env.impact.fill_costs`), ``impact`` (dollars: its
            market-impact part, 0 with linear costs), ``reason`` (``"policy"``; or the
            env's own orders: ``"flat_at_close"``, ``"delisted"``: a delisted position sold
            at its last valid close).
        costs: (T,) transaction costs the env took from the cash at each bar, dollars
            (fees + impact).
        impact: (T,) the market-impact part of ``costs``, dollars.
        turnover: (T,) traded notional / account value before the trade.
        config: the env settings the rollout ran with.
        bar: bar size of the market.
        annualization: bars per year of the market (``MarketData.annualization``).
        reference_returns: (T − 1,) simple returns of the zero-tilt reference account (the
            reference weights traded through the same controls, fills and costs) with an
            active reward; None otherwise.
    """

    account_value: pd.Series
    returns: pd.Series
    cash: pd.Series
    positions: pd.DataFrame
    holdings: pd.DataFrame
    transactions: pd.DataFrame
    costs: pd.Series
    turnover: pd.Series
    config: EnvConfig
    bar: str
    annualization: float = 0.0
    reference_returns: pd.Series | None = None
    impact: pd.Series | None = None


@torch.no_grad()
def rollout(
    policy: Policy,
    market: MarketData,
    config: EnvConfig | None = None,
    device: torch.device | str | None = None,
) -> Rollout:
    """Trade ``market`` from bar 0 to its last bar with ``policy``, deterministically.

    ``policy`` maps obs (1, obs_dim) float32 to actions (1, num_stocks) in [-1, 1] and is
    called once per bar 0..T−2 (the order fills at the next bar). The episode covers the
    whole split whatever ``config.episode_length`` says, and accounting runs in float64.
    With a decision schedule (``decision_interval``, ``decision_times``, ``flat_at_close``)
    the policy is still called every bar and its action on a non-decision bar is ignored,
    so every bar's return, holdings and costs are recorded.
    """
    config = replace(config if config is not None else EnvConfig(), episode_length=None)
    config = replace(config, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, seed=0, random_start=False, device=device)
    n = env.num_stocks
    steps = env.episode_length
    obs = env.reset()
    start = env.state  # bar 0: all cash, or invested at the reference (EnvConfig.start)
    values, cash, holdings, trades, prices, costs, turnover = [], [], [], [], [], [], []
    fill_costs, fill_impacts = [], []
    ref_values: list[torch.Tensor] = []
    for _ in range(steps):
        action = policy(obs)
        if not isinstance(action, torch.Tensor):
            action = torch.as_tensor(np.asarray(action), dtype=torch.float32)
        action = action.reshape(1, n).to(env.device, torch.float32)
        obs, _, _, _, info = env.step(action)
        values.append(info["account_value"])
        cash.append(info["cash"])
        holdings.append(info["holdings"][0])
        trades.append(info["trade"][0])
        prices.append(info["fill_price"][0])
        costs.append(info["cost"])
        fill_costs.append(info["fill_cost"][0])
        fill_impacts.append(info["fill_impact"][0] if "fill_impact" in info else fill_costs[-1] * 0)
        turnover.append(info["turnover"])
        if "reference_value" in info:
            ref_values.append(info["reference_value"])

    ts = market.timestamps
    tickers = list(market.tickers)
    v = np.concatenate([start.value.cpu().numpy(), torch.cat(values).cpu().numpy()])
    c = np.concatenate([start.cash.cpu().numpy(), torch.cat(cash).cpu().numpy()])
    h = np.concatenate([start.holdings.cpu().numpy(), torch.stack(holdings).cpu().numpy()])
    tr = torch.stack(trades).cpu().numpy()
    px = torch.stack(prices).cpu().numpy()
    cost_steps = np.concatenate([[0.0], torch.cat(costs).cpu().numpy()])
    turn = np.concatenate([[0.0], torch.cat(turnover).cpu().numpy()])
    mark = env.tables.step[:, n : 2 * n].cpu().numpy().astype(np.float64)

    account_value = pd.Series(v, index=ts, name="account_value")
    holdings_df = pd.DataFrame(h, index=ts, columns=tickers)
    positions = pd.DataFrame(h * mark, index=ts, columns=tickers)
    positions["cash"] = c
    bars, cols = np.nonzero(tr)
    shares = tr[bars, cols]
    slip = 1.0 + np.sign(shares) * config.slippage
    exec_price = px[bars, cols] * slip
    # What the env charged each fill (the column adds up to ``costs``).
    fill_cost = torch.stack(fill_costs).cpu().numpy()[bars, cols]
    fill_impact = torch.stack(fill_impacts).cpu().numpy()
    impact_steps = np.concatenate([[0.0], fill_impact.sum(1)])
    reason = np.full(len(bars), "policy", dtype=object)
    if env.tables.schedule is not None:
        flat = env.tables.schedule[:, 1].cpu().numpy() > 0  # by decision bar
        reason[flat[bars]] = "flat_at_close"
    if env.tables.delist is not None:
        gone = env.tables.delist.cpu().numpy() > 0  # by fill bar
        reason[gone[bars + 1, cols]] = "delisted"
    transactions = pd.DataFrame(
        {
            "ticker": [tickers[j] for j in cols],
            "shares": shares,
            "price": exec_price,
            "cost": fill_cost,
            "impact": fill_impact[bars, cols],
            "reason": reason,
        },
        index=pd.DatetimeIndex(ts[bars + 1], name="timestamp"),
    )
    reference_returns = None
    if ref_values:
        ref = np.concatenate([start.ref_value.cpu().numpy(), torch.cat(ref_values).cpu().numpy()])
        reference_returns = pd.Series(ref, index=ts).pct_change().iloc[1:].rename("reference")
    return Rollout(
        account_value=account_value,
        returns=account_value.pct_change().iloc[1:].rename("returns"),
        cash=pd.Series(c, index=ts, name="cash"),
        positions=positions,
        holdings=holdings_df,
        transactions=transactions,
        costs=pd.Series(cost_steps, index=ts, name="costs"),
        turnover=pd.Series(turn, index=ts, name="turnover"),
        config=config,
        bar=market.bar,
        annualization=market.annualization,
        reference_returns=reference_returns,
        impact=pd.Series(impact_steps, index=ts, name="impact"),
    )


def trading_activity(
    turnover: np.ndarray, costs: np.ndarray, initial_cash: float, bars_per_year: float
) -> tuple[np.ndarray, np.ndarray]:
    """(annual turnover, costs paid) of accounts traded over a split, each ``(...)``.

    ``turnover`` ``(..., bars)``: traded notional / account value before each bar's trade;
    ``costs`` ``(..., bars)``: dollars paid at each bar. Annual turnover is the sum of the
    per-bar turnover per year of bars (1.0: the whole account traded once a year, buys and
    sells each counted); costs paid are their sum over the split / ``initial_cash``.
    """
    turnover = np.asarray(turnover, dtype=np.float64)
    costs = np.asarray(costs, dtype=np.float64)
    years = turnover.shape[-1] / float(bars_per_year) if turnover.shape[-1] else math.nan
    return turnover.sum(-1) / years, costs.sum(-1) / float(initial_cash)


def activity(result: Rollout) -> dict[str, float]:
    """``{"turnover", "costs"}`` of a rollout (see :func:`trading_activity`), annualized
    as :func:`score` does."""
    ann = float(result.annualization) or periods_per_year(result.bar)
    turnover, costs = trading_activity(
        result.turnover.to_numpy()[1:],
        result.costs.to_numpy()[1:],
        float(result.config.initial_cash),
        ann,
    )
    return {"turnover": float(turnover), "costs": float(costs)}


def score(result: Rollout, name: str = DEFAULT_SCORE, bar: str | None = None) -> float:
    """Annualized score of a rollout's returns: ``sharpe``, ``sortino``, ``calmar``,
    ``return``, or ``information_ratio`` (of the returns over the zero-tilt reference's,
    see :func:`finpod.scores.scored_series`).

    Empyrical-reloaded's definitions with risk-free rate 0, annualized with the market's
    own bars per year (``MarketData.annualization``: the dataset's calendar count when it
    recorded one), or ``periods_per_year(bar)`` when ``bar`` is given. ``return`` is the
    annualized (compound) return. Undefined values (no variance, no drawdown) score 0.0;
    infinite ones are clipped to ±SCORE_LIMIT (see :mod:`finpod.scores`).
    """
    if name not in SCORES:
        raise FinpodError(f"unknown score {name!r}", f"use one of {', '.join(SCORES)}")
    if bar is not None or not result.annualization:
        ann = periods_per_year(bar or result.bar)
    else:
        ann = float(result.annualization)
    r = scored_series(result.returns, result.reference_returns, name)
    if isinstance(r.index, pd.DatetimeIndex) and r.index.tz is not None:
        # empyrical reads .values of the index; tz-naive UTC avoids pandas' deprecation path.
        r = r.set_axis(r.index.tz_convert(None))
    return score_returns(r, name, ann)
