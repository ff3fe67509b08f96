"""Validation scoring: K members traded on the validation split in one env of K accounts.

One scorer serves every learner: a single agent (K = 1, through :class:`TradingEval`), a
pod of fused learners (its learner 0, K = 1) and a population (K members at once).
:func:`account_rollout` trades the K accounts deterministically over the whole split and
reads each bar's accounting from the env itself (account value, reference value, turnover,
costs), in float64; :class:`ValidationScorer` turns those into each member's score, the
series the score ranks (its candidate record for the selection statistics) and the same
validation rows whichever learner asked:

- the score (``score_name``);
- ``return``: the annualized compound return of the account itself (never the active
  return, whatever the score);
- ``turnover`` and ``costs`` (see :func:`finpod.env.rollout.trading_activity`).

:func:`finpod.agents.train.train` calls an ``eval_fn`` after each segment; its answer is a
score, or a score with the per-bar validation returns. :class:`TradingEval` is that
function for the trading env.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.agents.loop import Validation
from finpod.data.market import MarketData, periods_per_year
from finpod.env.config import EnvConfig
from finpod.env.rollout import trading_activity
from finpod.env.vec_env import VecTradingEnv
from finpod.scores import DEFAULT_SCORE, score_returns, scored_series

#: What ``eval_fn`` returns: a score, or (score, (T_val,) per-bar validation returns).
Evaluation = float | tuple[float, np.ndarray]
#: ``obs (K, obs_dim) -> actions (K, num_stocks)``: row k is member k's deterministic action.
Act = Callable[[torch.Tensor], torch.Tensor]


def evaluate(eval_fn: Callable[[Any], Evaluation], agent: Any) -> tuple[float, np.ndarray | None]:
    """(score, per-bar validation returns or None) from either form of ``eval_fn``."""
    out = eval_fn(agent)
    if isinstance(out, tuple):
        score, returns = out
        return float(score), np.asarray(returns, dtype=np.float64).reshape(-1)
    return float(out), None


@dataclass(frozen=True)
class Accounts:
    """K accounts traded over a whole split: per-bar arrays ``(K, T − 1) float64``, bar t
    the bar the fills of decision t − 1 land on."""

    returns: np.ndarray
    """Simple return of each account at each bar."""
    reference_returns: np.ndarray | None
    """Simple return of each account's zero-tilt reference (active reward), else None."""
    turnover: np.ndarray
    """Traded notional / account value before the bar's trade."""
    costs: np.ndarray
    """Dollars of costs (fees + impact) the env took at the bar."""


def scoring_env(
    market: MarketData, config: EnvConfig, members: int = 1, device: Any = None
) -> VecTradingEnv:
    """The env :func:`account_rollout` trades: ``members`` accounts over the whole of
    ``market`` from bar 0, float64 accounting, ``config``'s controls, fills and costs."""
    config = replace(config, episode_length=None, dtype="float64")
    return VecTradingEnv(
        market, config, num_envs=members, seed=0, random_start=False, device=device
    )


@torch.no_grad()
def account_rollout(act: Act, env: VecTradingEnv) -> Accounts:
    """Trade each of ``env``'s accounts deterministically over its whole split, ``act``
    deciding for all of them at once; what each bar earned is the env's own accounting
    (``info``), so account k's returns equal a one-account
    :func:`finpod.env.rollout` of member k's policy."""
    obs = env.reset()
    start = env.state
    values, refs, turnover, costs = [start.value], [start.ref_value], [], []
    for _ in range(env.episode_length):
        action = act(obs).to(env.device, torch.float32).reshape(env.num_envs, env.num_stocks)
        obs, _, _, _, info = env.step(action)
        values.append(info["account_value"])
        refs.append(info.get("reference_value"))
        turnover.append(info["turnover"])
        costs.append(info["cost"])

    def per_bar(rows: list[torch.Tensor]) -> np.ndarray:
        return torch.stack(rows, dim=1).to("cpu", torch.float64).numpy()

    v = per_bar(values)
    ref = None
    if refs[-1] is not None:
        rv = per_bar(refs)
        ref = rv[:, 1:] / rv[:, :-1] - 1.0
    return Accounts(v[:, 1:] / v[:, :-1] - 1.0, ref, per_bar(turnover), per_bar(costs))


class ValidationScorer:
    """Scores K members on ``market`` (the validation split) with ``config`` (the env
    settings they trained with, execution controls included), in one env of K accounts
    built once. :meth:`score` is the one validation scorer of every learner."""

    def __init__(
        self,
        market: MarketData,
        config: EnvConfig,
        score_name: str = DEFAULT_SCORE,
        members: int = 1,
        device: Any = None,
    ) -> None:
        self.market, self.config, self.score_name = market, config, score_name
        self.env = scoring_env(market, config, members, device)
        self.device = self.env.device
        self.annualization = float(market.annualization) or periods_per_year(market.bar)
        index = pd.DatetimeIndex(market.timestamps[1:])
        # empyrical reads the index's values: tz-naive UTC avoids pandas' deprecation path.
        self.index = index.tz_convert(None) if index.tz is not None else index

    def _annual(self, returns: np.ndarray, name: str) -> float:
        return score_returns(pd.Series(returns, index=self.index), name, self.annualization)

    def score(self, act: Act, alive: np.ndarray | None = None) -> Validation:
        """Every member marked in ``alive`` ``(K,) bool`` (default: all) scored: its score
        ``(K,) float64`` (NaN when not scored), the series the score ranks ``(T − 1,)
        float64`` (the active returns for an active score) and its validation rows. A
        member whose series or score is not finite gets no rows (the loop fails it)."""
        k_members = self.env.num_envs
        alive = np.ones(k_members, bool) if alive is None else np.asarray(alive, bool)
        acc = account_rollout(act, self.env)
        turnover, costs = trading_activity(
            acc.turnover, acc.costs, float(self.config.initial_cash), self.annualization
        )
        out = Validation(np.full(k_members, math.nan), [None] * k_members, [{}] * k_members)
        for k in np.flatnonzero(alive):
            reference = None if acc.reference_returns is None else acc.reference_returns[k]
            series = np.asarray(
                scored_series(acc.returns[k], reference, self.score_name), dtype=np.float64
            )
            value = self._annual(series, self.score_name)
            out.scores[k], out.returns[k] = value, series
            if not bool(np.isfinite(series).all()) or not math.isfinite(value):
                continue
            rows = {self.score_name: value}
            if self.score_name != "return":
                rows["return"] = self._annual(acc.returns[k], "return")
            out.rows[k] = {**rows, "turnover": float(turnover[k]), "costs": float(costs[k])}
        return out

    def scorer(self, act: Act) -> Callable[[np.ndarray], Validation]:
        """``alive -> Validation`` of ``act``'s members (a :class:`~finpod.agents.loop.Scorer`)."""
        return functools.partial(self.score, act)


def agent_act(agent: Any, device: Any) -> Act:
    """``agent``'s deterministic policy as an :data:`Act` on ``device``'s tensors."""

    def act(obs: torch.Tensor) -> torch.Tensor:
        return agent.act(obs.to(agent.device), deterministic=True).to(device)

    return act


class TradingEval:
    """``agent -> (score, returns)``: a single agent (K = 1) scored by
    :class:`ValidationScorer` over the whole ``market`` split.

    ``market`` is the validation split: checkpoints are selected on it, never on the
    backtest split. ``config`` is the env settings of the run (execution controls
    included), the same the backtest replays. ``returns`` is the (T − 1,) float64 series
    the score ranks, the candidate's record for the selection statistics. :attr:`activity`
    holds the last call's other validation rows (``return``, ``turnover``, ``costs``),
    which :func:`~finpod.agents.train.train` logs with the score.
    """

    def __init__(
        self, market: MarketData, config: EnvConfig, score_name: str = DEFAULT_SCORE
    ) -> None:
        self.market, self.config, self.score_name = market, config, score_name
        self.activity: dict[str, float] = {}
        self._scorer: ValidationScorer | None = None

    def __call__(self, agent: Any) -> tuple[float, np.ndarray]:
        device = torch.device(agent.device)
        if self._scorer is None or self._scorer.device != device:
            self._scorer = ValidationScorer(self.market, self.config, self.score_name, 1, device)
        out = self._scorer.score(agent_act(agent, device))
        rows = dict(out.rows[0])
        rows.pop(self.score_name, None)
        self.activity = rows
        returns = out.returns[0]
        return float(out.scores[0]), np.asarray(returns, dtype=np.float64)


def make_trading_eval(
    market: MarketData, config: EnvConfig, score_name: str = DEFAULT_SCORE
) -> TradingEval:
    """The :class:`TradingEval` of ``market`` with ``config``, scoring ``score_name``."""
    return TradingEval(market, config, score_name)
