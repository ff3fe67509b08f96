"""Rule-based benchmarks, run as policies through the same env as the agent.

Each benchmark is a target-weights policy for ``EnvConfig(action_mode="weights")``: it
gets the same initial capital, costs, slippage and next-bar fills as the agent, so the
comparison is like for like. A benchmark decides at bar ``t`` with bars ``≤ t`` only.

The env calls a policy once per decision bar, in order (bar 0, 1, ..., T − 2), with the
observation of that bar; the policies keep a bar counter and read the market's prices up
to that bar. To hold (not rebalance) they return the current portfolio weights from the
observation's ``holdings`` slice, nudged up by :data:`HOLD_NUDGE` so that the env's
whole-share truncation of ``weight · value / price`` lands back on the shares already held
instead of one share below (which would trade a share every bar).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.tables import ObsLayout

#: Relative upward nudge of held weights, large against float32 rounding of the
#: observation (~1e-7) and small enough that it never adds a share below 100,000 held.
HOLD_NUDGE = 1e-5

#: Benchmark names, in the order the tearsheet shows them.
BENCHMARKS = ("equal_weight_buy_hold", "equal_weight_daily", "momentum")
#: Rollouts of one backtest with its benchmarks, in the order they run (the index is a
#: price series, not a rollout): what a progress bar over them counts.
ROLLOUTS = ("agent", "reference", *BENCHMARKS)


def _holdings_slice(market: MarketData) -> slice:
    # Mirrors finpod.env.tables.ObsLayout: [value, cash, holdings (N), prices (N), features].
    return ObsLayout(market.num_stocks, market.num_features).holdings


def _equal_weights(valid: torch.Tensor) -> torch.Tensor:
    """(N,) 1/n on the ``n`` valid tickers, 0 elsewhere."""
    w = valid.to(torch.float32)
    return w / w.sum().clamp(min=1.0)


@dataclass
class WeightsPolicy:
    """Target-weights policy driven by a bar counter; subclasses define :meth:`weights`."""

    market: MarketData
    """The split being traded (prices up to the decision bar are read)."""

    def __post_init__(self) -> None:
        self.bar = 0
        self._hold = _holdings_slice(self.market)
        # Host copies, read a row at a time: the rules are cheap and run once per bar.
        self._close = self.market.close.detach().cpu()
        self._valid = ((self.market.close > 0) & self.market.tradable).cpu()

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, obs_dim) observation of bar ``self.bar`` → (B, N) target weights in [0, 1]."""
        held = obs[:, self._hold].to(torch.float32)
        w = self.weights(self.bar, held)
        self.bar += 1
        return w.to(obs.device)

    def due(self, t: int, every: int | str) -> bool:
        """Whether bar t starts a rebalancing period: every N bars, or the first bar of each
        ``"session"`` or ``"month"`` (by the bar timestamps, so intraday data rebalances at
        the open of a session whatever the split's first bar)."""
        if isinstance(every, int):
            return t % every == 0
        if t == 0:
            return True
        now, before = self.market.timestamps[t], self.market.timestamps[t - 1]
        if every == "session":
            return now.date() != before.date()
        if every == "month":
            return (now.year, now.month) != (before.year, before.month)
        raise ValueError(f"unknown rebalancing period {every!r}")

    def hold(self, held: torch.Tensor) -> torch.Tensor:
        return held.clamp(min=0.0) * (1.0 + HOLD_NUDGE)

    def weights(self, t: int, held: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@dataclass
class EqualWeightBuyHold(WeightsPolicy):
    """Buy every ticker that can be traded at bar 0 in equal dollar amounts, then hold."""

    def weights(self, t: int, held: torch.Tensor) -> torch.Tensor:
        if t == 0:
            w = _equal_weights(self._valid[0])
            return w.to(held.device).expand_as(held)
        return self.hold(held)


@dataclass
class EqualWeightRebalanced(WeightsPolicy):
    """Equal weight across the tradable tickers, restored at the start of each period."""

    every: int | str = "session"
    """Rebalance period: a number of bars, ``"session"`` (daily) or ``"month"``."""

    def weights(self, t: int, held: torch.Tensor) -> torch.Tensor:
        if self.due(t, self.every):
            w = _equal_weights(self._valid[t])
            return w.to(held.device).expand_as(held)
        return self.hold(held)


@dataclass
class CrossSectionalMomentum(WeightsPolicy):
    """Equal weight in the top ``top_fraction`` of tickers by trailing return, rebalanced
    at the start of each period (monthly by default) and held in between.

    The trailing return at bar t is close[t] / close[t − L] − 1 with L = ``lookback`` bars;
    in the first bars of the split (t < L) it uses the history available, close[0]; at t = 0
    there is no history and the rule holds all tickers equally. Only bars ≤ t are read.
    """

    lookback: int = 63
    """Trailing window in bars."""
    every: int | str = "month"
    """Rebalance period: a number of bars, ``"session"`` or ``"month"``."""
    top_fraction: float = 0.2
    """Share of the valid tickers held (at least one)."""

    def weights(self, t: int, held: torch.Tensor) -> torch.Tensor:
        if not self.due(t, self.every):
            return self.hold(held)
        close, valid = self._close, self._valid
        if t == 0:
            return _equal_weights(valid[0]).to(held.device).expand_as(held)
        start = max(0, t - self.lookback)
        ok = valid[t] & valid[start]
        if not bool(ok.any()):
            ok = valid[t]
        base = torch.where(ok, close[start], 1.0)
        score = torch.where(ok, close[t] / base - 1.0, float("-inf"))
        k = max(1, int(round(self.top_fraction * int(ok.sum()))))
        top = torch.topk(score, k).indices
        chosen = torch.zeros_like(ok)
        chosen[top] = True
        w = _equal_weights(chosen & ok)
        return w.to(held.device).expand_as(held)


def benchmark_policies(market: MarketData) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Fresh policies of :data:`BENCHMARKS` for one rollout over ``market``.

    Equal weight is restored at each session's first bar; momentum ranks on a quarter-year
    lookback (in bars of the data) and rebalances at each month's first bar.
    """
    ppy = market.annualization
    return {
        "equal_weight_buy_hold": EqualWeightBuyHold(market),
        "equal_weight_daily": EqualWeightRebalanced(market, every="session"),
        "momentum": CrossSectionalMomentum(
            market, lookback=max(2, int(round(ppy / 4))), every="month"
        ),
    }


def benchmark_config(config: EnvConfig) -> EnvConfig:
    """The agent's env settings (capital, costs, fills, and how the account starts: in cash
    or invested at the reference, ``EnvConfig.start``) in target-weights mode, long only,
    without the agent's execution controls (:meth:`EnvConfig.without_controls`): a
    benchmark is its own rule (buy and hold holds; "daily" rebalances daily)."""
    return replace(
        config.without_controls(),
        action_mode="weights",
        allow_short=False,
        allow_negative_cash=False,
        reward="log_return",  # rewards do not trade; skip the reference account
    )


def reference_config(config: EnvConfig) -> EnvConfig:
    """Settings of the ``reference`` column: the agent's own (controls, costs, start) in
    ``"active"`` mode, traded with a zero action, i.e. the reference portfolio
    (``EnvConfig.reference``) as the agent would hold it by doing nothing."""
    return replace(
        config,
        action_mode="active",
        allow_short=False,
        allow_negative_cash=False,
        reward="log_return",
    )


def zero_policy(obs: torch.Tensor, num_stocks: int) -> torch.Tensor:
    """(B, N) zero action: in ``"active"`` mode, hold the reference."""
    return torch.zeros(obs.shape[0], num_stocks, device=obs.device)
