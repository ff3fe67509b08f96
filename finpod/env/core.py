"""The trading MDP as pure functions over ``(num_envs, num_stocks)`` tensors.

Nothing here loops over envs or stocks in Python, calls ``.item()``/``.cpu()`` or branches
on tensor values: the only Python branches are on the (static) :class:`EnvConfig`. The
same code runs on CPU and CUDA.

Timing convention. An env whose pointer is ``t`` has seen bars ``0..t`` (its observation
is built from bar ``t``). An action taken there is an order that fills at bar ``t + 1``'s
open or close (``EnvConfig.fill_price``); after the step the pointer is ``t + 1`` and the
account is marked at bar ``t + 1``'s close. Nothing of bar ``t + 2`` or later is read.

Observation (float32, ``(num_envs, obs_dim)``), in this order (see :class:`ObsLayout`):

=============  =====  ==================================================================
slice          width  value
=============  =====  ==================================================================
``value``      1      ``log(V / initial_cash)``: account value V relative to the start
``cash``       1      ``cash / V``: cash weight of the portfolio
``holdings``   N      ``holdings · mark_price / V``: portfolio weight of each ticker
``prices``     N      ``log(mark_price / reference_price)``; reference = the ticker's
                      first valid close in the split (0 before a listing)
``features``   N·F    ``MarketData.features[t]`` flattened ticker-major (already O(1))
=============  =====  ==================================================================

All of them are O(1) without tuned constants: weights are in [0, 1] (long-only), the log
terms move by ~0.5 per doubling. ``V`` is floored at :data:`VALUE_FLOOR` × initial cash
so a bankrupt account still gives finite numbers.

Mark price: the last close at or before the bar that was tradable and valid (> 0,
finite); a price on a non-tradable bar is never used, for fills or for valuation. Fill price: the bar's open
or close where ``tradable`` is True and the price is valid, else 0, which blocks the trade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig

#: Floor of the account value in the observation, as a fraction of initial cash (keeps the
#: log and the weights finite when an account with shorting or borrowing goes bankrupt).
VALUE_FLOOR = 1e-9
#: Small variance floor of the differential Sharpe ratio's denominator (returns² units):
#: with bar returns of ~1 % the variance is ~1e-4, so this only matters in the first bars.
SHARPE_VAR_FLOOR = 1e-6


@dataclass(frozen=True)
class ObsLayout:
    """Named slices of the observation vector (see the module docstring)."""

    num_stocks: int
    num_features: int

    @property
    def value(self) -> slice:
        return slice(0, 1)

    @property
    def cash(self) -> slice:
        return slice(1, 2)

    @property
    def holdings(self) -> slice:
        return slice(2, 2 + self.num_stocks)

    @property
    def prices(self) -> slice:
        return slice(2 + self.num_stocks, 2 + 2 * self.num_stocks)

    @property
    def features(self) -> slice:
        start = 2 + 2 * self.num_stocks
        return slice(start, start + self.num_stocks * self.num_features)

    @property
    def obs_dim(self) -> int:
        return 2 + self.num_stocks * (2 + self.num_features)


class Tables(NamedTuple):
    """Per-bar lookup tables built once per (market, config, device).

    Attributes:
        step: (T, 3N) accounting dtype; ``[:, :N]`` fill price of the bar (0 = no fill),
            ``[:, N:2N]`` mark price of the bar (0 before a listing), ``[:, 2N:]`` 1.0 where
            the bar can fill an order else 0.0 (a float mask: multiplying is much cheaper
            than ``torch.where`` on CPU).
        static_obs: (T, N + N·F) float32; the ``prices`` and ``features`` slices of the
            observation, which depend on the bar only.
    """

    step: torch.Tensor
    static_obs: torch.Tensor


class State(NamedTuple):
    """Per-env account state, every field batched over envs.

    Attributes:
        t: (E,) int64 bar pointer (the last bar the env has seen).
        steps: (E,) int64 decision steps taken in the current episode.
        cash: (E,) dollars.
        holdings: (E, N) shares.
        mark: (E, N) mark price at bar t, dollars.
        position: (E, N) holdings · mark, dollars.
        value: (E,) cash + Σ position, dollars.
        sharpe_a: (E,) EMA of bar returns (differential Sharpe reward).
        sharpe_b: (E,) EMA of squared bar returns (differential Sharpe reward).
        peak: (E,) running peak of the account value (drawdown reward), dollars.
    """

    t: torch.Tensor
    steps: torch.Tensor
    cash: torch.Tensor
    holdings: torch.Tensor
    mark: torch.Tensor
    position: torch.Tensor
    value: torch.Tensor
    sharpe_a: torch.Tensor
    sharpe_b: torch.Tensor
    peak: torch.Tensor


class StepOut(NamedTuple):
    """What one transition produced besides the new state (all batched over envs).

    Attributes:
        reward: (E,) float32 scaled reward.
        trade: (E, N) executed shares, signed (+ buy, − sell).
        fill_price: (E, N) price the trade filled at (before slippage; 0 = no fill possible).
        cost: (E,) transaction costs paid this step, dollars.
        notional: (E,) traded notional Σ |trade| · executed price, dollars.
        turnover: (E,) notional / account value before the trade.
    """

    reward: torch.Tensor
    trade: torch.Tensor
    fill_price: torch.Tensor
    cost: torch.Tensor
    notional: torch.Tensor
    turnover: torch.Tensor


def _valid(price: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(price) & (price > 0)


def mark_prices(close: torch.Tensor, tradable: torch.Tensor) -> torch.Tensor:
    """(T, N) last tradable, valid close at or before each bar (0 where none exists yet)."""
    valid = _valid(close) & tradable
    rows = torch.arange(close.shape[0], device=close.device).unsqueeze(1).expand_as(close)
    last = torch.where(valid, rows, torch.full_like(rows, -1)).cummax(dim=0).values
    marked = torch.gather(torch.nan_to_num(close, nan=0.0), 0, last.clamp(min=0))
    return torch.where(last >= 0, marked, torch.zeros_like(marked))


def build_tables(market: MarketData, config: EnvConfig, device: torch.device) -> Tables:
    """Lookup tables of ``market`` on ``device`` (see :class:`Tables`)."""
    dtype = config.torch_dtype
    close = market.close.to(device=device, dtype=torch.float64)
    base = market.open if config.fill_price == "open" else market.close
    base = base.to(device=device, dtype=torch.float64)
    tradable = market.tradable.to(device=device, dtype=torch.bool)
    fill = torch.where(tradable & _valid(base), base, torch.zeros_like(base))
    mark = mark_prices(close, tradable)
    step = torch.cat([fill, mark, (fill > 0).to(fill.dtype)], dim=1).to(dtype).contiguous()

    # Reference price per ticker: its first valid mark in the split (causal at every bar
    # where the ticker has a price; before that the prices slice is 0).
    listed = mark > 0
    first = torch.where(
        listed.any(0), listed.to(torch.int8).argmax(0), torch.zeros(mark.shape[1], device=device)
    ).long()
    ref = mark.gather(0, first.unsqueeze(0)).squeeze(0)
    ref = torch.where(ref > 0, ref, torch.ones_like(ref))
    price_obs = torch.where(listed, torch.log(torch.where(listed, mark, ref) / ref), 0.0)
    feats = market.features.to(device=device, dtype=torch.float32)
    feats = torch.nan_to_num(feats, nan=0.0, posinf=0.0, neginf=0.0).flatten(1)
    static_obs = torch.cat([price_obs.to(torch.float32), feats], dim=1).contiguous()
    return Tables(step=step, static_obs=static_obs)


def initial_state(start: torch.Tensor, tables: Tables, config: EnvConfig, num_stocks: int) -> State:
    """Fresh accounts (all cash) at bar pointers ``start`` (E,) int64."""
    dtype = config.torch_dtype
    e = start.shape[0]
    dev = start.device
    cash = torch.full((e,), float(config.initial_cash), dtype=dtype, device=dev)
    zeros_en = torch.zeros((e, num_stocks), dtype=dtype, device=dev)
    zeros_e = torch.zeros((e,), dtype=dtype, device=dev)
    mark = tables.step.index_select(0, start)[:, num_stocks : 2 * num_stocks]
    return State(
        t=start,
        steps=torch.zeros_like(start),
        cash=cash,
        holdings=zeros_en,
        mark=mark,
        position=zeros_en,
        value=cash.clone(),
        sharpe_a=zeros_e,
        sharpe_b=zeros_e,
        peak=cash.clone(),
    )


def reset_where(done: torch.Tensor, state: State, fresh: State) -> State:
    """Per-env reset: rows where ``done`` (E,) bool come from ``fresh``."""
    d1 = done.unsqueeze(1)
    return State(
        *[
            torch.where(d1 if old.dim() == 2 else done, new, old)
            for old, new in zip(state, fresh, strict=True)
        ]
    )


def observe(
    state: State, tables: Tables, config: EnvConfig, out: torch.Tensor | None = None
) -> torch.Tensor:
    """(E, obs_dim) float32 observation of ``state`` (layout in the module docstring).

    Written into ``out`` when given (e.g. a slot of an agent's rollout storage), else into
    a fresh tensor. Each slice is written in place: no concatenation copy.
    """
    n = state.holdings.shape[1]
    init = float(config.initial_cash)
    if out is None:
        out = torch.empty(
            (state.t.shape[0], 2 + n + tables.static_obs.shape[1]),
            dtype=torch.float32,
            device=state.t.device,
        )
    v = state.value.clamp(min=init * VALUE_FLOOR)
    inv = v.reciprocal()
    out[:, 0] = torch.log(v * (1.0 / init))
    out[:, 1] = state.cash * inv
    out[:, 2 : 2 + n] = state.position * inv.unsqueeze(1)
    torch.index_select(tables.static_obs, 0, state.t, out=out[:, 2 + n :])
    return out


def observe_functional(state: State, tables: Tables, config: EnvConfig) -> torch.Tensor:
    """:func:`observe` without in-place writes (for ``torch.compile``, which fuses the cat)."""
    init = float(config.initial_cash)
    v = state.value.clamp(min=init * VALUE_FLOOR)
    inv = v.reciprocal()
    head = torch.stack([torch.log(v * (1.0 / init)), state.cash * inv], dim=1)
    weights = state.position * inv.unsqueeze(1)
    static = tables.static_obs.index_select(0, state.t)
    return torch.cat([head.float(), weights.float(), static], dim=1)


def transition(
    state: State, action: torch.Tensor, tables: Tables, config: EnvConfig
) -> tuple[State, StepOut]:
    """Execute ``action`` (E, N) in [-1, 1] decided at bar ``state.t``; fill at ``t + 1``.

    Order of execution: sells (capped at holdings unless shorting is allowed), their
    proceeds less costs credited; then buys, scaled down together so that notional plus
    costs fits in the cash (unless borrowing is allowed). Tickers without a valid fill
    price at ``t + 1`` (not tradable) do not trade.
    """
    n = state.holdings.shape[1]
    dtype = state.cash.dtype
    rate = float(config.cost_rate)
    t1 = state.t + 1
    row = tables.step.index_select(0, t1)
    price = row[:, :n]
    mark = row[:, n : 2 * n]
    can_fill = row[:, 2 * n :]
    # In-place ops below only touch temporaries created here (never the inputs): on CPU
    # every fresh (E, N) tensor costs an allocation and page faults.
    # A NaN action (a diverged policy) trades nothing instead of poisoning the account.
    a = action.to(dtype).clamp(-1.0, 1.0).nan_to_num_(0.0)

    if config.action_mode == "weights":
        if config.allow_short:
            w = a / a.abs().sum(1, keepdim=True).clamp(min=1.0)
        else:
            w = a.clamp_(min=0.0)
            w = w / w.sum(1, keepdim=True).clamp(min=1.0)
        # Sized with what is known at bar t: value and mark price at t's close. Tickers
        # without a price at t keep their holdings (mask arithmetic instead of where).
        priced = (state.mark > 0).to(dtype)
        delta = w.mul_(state.value.unsqueeze(1)).div_(state.mark + (1.0 - priced))
        if config.integer_shares:
            delta.trunc_()
        delta.sub_(state.holdings).mul_(priced)
    else:
        delta = a.mul_(float(config.max_shares))
        if config.integer_shares:
            delta.trunc_()
    delta.mul_(can_fill)

    sell = delta.neg().clamp_(min=0.0)
    if not config.allow_short:
        torch.minimum(sell, state.holdings, out=sell)
    sell_price = price * (1.0 - config.slippage) if config.slippage else price
    buy_price = price * (1.0 + config.slippage) if config.slippage else price
    scratch = torch.mul(sell, sell_price)
    sell_notional = scratch.sum(1)
    cash = state.cash + sell_notional * (1.0 - rate)

    buy = delta.clamp_(min=0.0)
    if not config.allow_negative_cash:
        need = torch.mul(buy, buy_price, out=scratch).sum(1) * (1.0 + rate)
        # Fraction of the buy orders the cash pays for (1 when it is enough).
        free = cash.clamp(min=0.0)
        frac = free / torch.maximum(need, free).clamp(min=1e-30)
        if not config.integer_shares:
            # Leave a hair of cash so rounding never overdraws the account.
            frac = frac * (1.0 - 1e-6 * (frac < 1.0).to(dtype))
        buy.mul_(frac.unsqueeze(1))
        if config.integer_shares:
            buy.floor_()
    buy_notional = torch.mul(buy, buy_price, out=scratch).sum(1)
    cash = cash - buy_notional * (1.0 + rate)
    if not config.allow_negative_cash:
        cash = cash.clamp(min=0.0)

    trade = buy.sub_(sell)
    holdings = state.holdings + trade
    position = torch.mul(holdings, mark, out=scratch)
    value = cash + position.sum(1)
    notional = sell_notional + buy_notional
    cost = notional * rate

    v0 = state.value
    init = float(config.initial_cash)
    sharpe_a, sharpe_b, peak = state.sharpe_a, state.sharpe_b, state.peak
    if config.reward == "value_change":
        reward = (value - v0) * (1.0 / init)
    elif config.reward == "log_return":
        floor = init * VALUE_FLOOR
        reward = torch.log(value.clamp(min=floor) / v0.clamp(min=floor))
    elif config.reward == "differential_sharpe":
        ret = value / v0.clamp(min=init * VALUE_FLOOR) - 1.0
        da = ret - sharpe_a
        db = ret * ret - sharpe_b
        var = (sharpe_b - sharpe_a * sharpe_a).clamp(min=0.0) + SHARPE_VAR_FLOOR
        reward = (sharpe_b * da - 0.5 * sharpe_a * db) / var.pow(1.5)
        sharpe_a = sharpe_a + config.sharpe_decay * da
        sharpe_b = sharpe_b + config.sharpe_decay * db
    else:  # drawdown_penalty
        new_peak = torch.maximum(peak, value)
        dd0 = 1.0 - v0 / peak
        dd1 = 1.0 - value / new_peak
        reward = (value - v0) * (1.0 / init) - config.drawdown_weight * (dd1 - dd0).clamp(min=0.0)
        peak = new_peak
    reward = (reward * float(config.reward_scale)).float()

    new_state = State(
        t=t1,
        steps=state.steps + 1,
        cash=cash,
        holdings=holdings,
        mark=mark,
        position=position,
        value=value,
        sharpe_a=sharpe_a,
        sharpe_b=sharpe_b,
        peak=peak,
    )
    turnover = notional / v0.clamp(min=init * VALUE_FLOOR)
    return new_state, StepOut(reward, trade, price, cost, notional, turnover)
