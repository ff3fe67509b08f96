"""The trading MDP as pure functions over ``(num_envs, num_stocks)`` tensors.

Nothing here loops over envs or stocks in Python, calls ``.item()``/``.cpu()`` or branches
on tensor values: the only Python branches are on the (static) :class:`EnvConfig`. The
same code runs on CPU and CUDA.

Timing convention. An env whose pointer is ``t`` has seen bars ``0..t`` (its observation
is built from bar ``t``). An action taken there is an order that fills at bar ``t + 1``'s
open or close (``EnvConfig.fill_price``); after the step the pointer is ``t + 1`` and the
account is marked at bar ``t + 1``'s close. Nothing of bar ``t + 2`` or later is read.

Observation (float32, ``(num_envs, obs_dim)``), in this order (see :class:`~finpod.env.tables.ObsLayout`):

=============  =====  ==================================================================
slice          width  value
=============  =====  ==================================================================
``value``      1      ``log(V / initial_cash)``: account value V relative to the start
``cash``       1      ``cash / V``: cash weight of the portfolio
``holdings``   N      ``holdings · mark_price / V``: portfolio weight of each ticker
``prices``     N      causal z-score of the price against its trailing mean:
                      ``(log m_t − mean(log m over the last W bars)) / (ρ · √W)`` with
                      ρ the RMS 1-bar log return over those bars (W =
                      ``EnvConfig.price_window``); clipped to ±:data:`~finpod.env.tables.PRICE_Z_CLIP`;
                      0 before a listing
``features``   N·F    ``MarketData.features[t]`` flattened ticker-major (already O(1));
                      with ``EnvConfig.cross_features`` each ticker's X cross-sectional
                      features follow its own (N·(F + X), :mod:`finpod.env.cross_features`);
                      under square-root costs each ticker's last is ``impact``, the cost
                      of trading the account's current value V in the name
                      (:func:`~finpod.env.impact.impact_feature`)
``calendar``   3 / 0  intraday (``EnvConfig.calendar_features``): time of day of the
                      bar's end (0 at 09:30, 1 at 16:00), bars left in the session after
                      this one / bars of a full session, 1.0 on the first bar of a
                      session (after the overnight gap) else 0.0
``schedule``   1 / 0  with a decision schedule (``EnvConfig.has_schedule``): 1.0 when an
                      order given at this bar is executed, 0.0 when it is ignored
=============  =====  ==================================================================

All of them are O(1) without tuned constants: weights are in [0, 1] (long-only), the log
value moves by ~0.7 per doubling, the price z-score has a standard deviation ≈ 0.6 for a
random walk whatever the bar size. None is anchored to the split's first bar, so the
training, validation and backtest splits give the same distributions. ``V`` is floored at
:data:`VALUE_FLOOR` × initial cash so a bankrupt account still gives finite numbers.

Mark price: the last close at or before the bar that was tradable and valid (> 0,
finite); a price on a non-tradable bar is never used, for fills or for valuation. How an
order is sized, bounded and filled (fill prices, the execution controls in their order):
:mod:`finpod.env.execution`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from finpod.env.config import ACTIVE_REWARDS, EnvConfig
from finpod.env.execution import VALUE_FLOOR, active_targets, execute, weights_order
from finpod.env.impact import impact_feature
from finpod.env.tables import Tables

#: Small variance floor of the differential Sharpe ratio's denominator (returns² units):
#: with bar returns of ~1 % the variance is ~1e-4, so this only matters in the first bars.
SHARPE_VAR_FLOOR = 1e-6


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
        ref_cash: (E,) cash of the reference account (active rewards), dollars.
        ref_holdings: (E, N) shares of the reference account.
        ref_value: (E,) value of the reference account at bar t, dollars.

    The reference account is what a zero action in ``"active"`` mode holds: the reference
    portfolio traded through the same controls, fills and costs. It is stepped only when
    the reward needs it (``EnvConfig.reward`` in ``ACTIVE_REWARDS``), else carried as is.
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
    ref_cash: torch.Tensor
    ref_holdings: torch.Tensor
    ref_value: torch.Tensor


class StepOut(NamedTuple):
    """What one transition produced besides the new state (all batched over envs).

    Attributes:
        reward: (E,) float32 scaled reward.
        trade: (E, N) executed shares, signed (+ buy, − sell).
        fill_price: (E, N) price the trade filled at (before slippage; 0 = no fill possible).
        cost: (E,) transaction costs paid this step, dollars.
        notional: (E,) traded notional Σ |trade| · executed price, dollars.
        turnover: (E,) notional / account value before the trade.
        impact: (E,) the market-impact part of ``cost``, dollars (0 with linear costs).
        fill_cost: (E, N) each ticker's fill's share of ``cost``, dollars.
        fill_impact: (E, N) each ticker's share of ``impact``; None with linear costs.
    """

    reward: torch.Tensor
    trade: torch.Tensor
    fill_price: torch.Tensor
    cost: torch.Tensor
    notional: torch.Tensor
    turnover: torch.Tensor
    impact: torch.Tensor
    fill_cost: torch.Tensor
    fill_impact: torch.Tensor | None


def initial_state(start: torch.Tensor, tables: Tables, config: EnvConfig, num_stocks: int) -> State:
    """Fresh accounts at bar pointers ``start`` (E,) int64: all cash, or (``EnvConfig.start``
    = ``"reference"``) endowed with the reference portfolio at the start bar's marks
    (shares w · initial_cash / mark, whole shares when ``integer_shares``; no cost)."""
    dtype = config.torch_dtype
    e = start.shape[0]
    dev = start.device
    init = float(config.initial_cash)
    cash = torch.full((e,), init, dtype=dtype, device=dev)
    holdings = torch.zeros((e, num_stocks), dtype=dtype, device=dev)
    if config.start == "reference":
        mark = tables.step.index_select(0, start)[:, num_stocks : 2 * num_stocks]
        w = tables.reference.index_select(0, start)[:, :num_stocks]
        priced = (mark > 0).to(dtype)
        holdings = w * init / (mark + (1.0 - priced)) * priced
        if config.integer_shares:
            holdings = holdings.trunc()
        cash = cash - (holdings * mark).sum(1)
    return account_state(start, cash, holdings, tables)


def account_state(
    t: torch.Tensor, cash: torch.Tensor, holdings: torch.Tensor, tables: Tables
) -> State:
    """Accounts at bar pointers ``t`` (E,) int64 holding ``cash`` (E,) dollars and
    ``holdings`` (E, N) shares, marked at bar t, at the start of an episode (no step taken,
    the reward's running statistics fresh, the reference account the same as the account).
    What :func:`initial_state` starts from, and an account whose cash and shares come
    from elsewhere (a broker's) takes."""
    n = holdings.shape[1]
    mark = tables.step.index_select(0, t)[:, n : 2 * n]
    position = holdings * mark
    value = cash + position.sum(1)
    zeros = torch.zeros_like(cash)
    return State(
        t=t,
        steps=torch.zeros_like(t),
        cash=cash,
        holdings=holdings,
        mark=mark,
        position=position,
        value=value,
        sharpe_a=zeros,
        sharpe_b=zeros,
        peak=value.clone(),
        ref_cash=cash.clone(),
        ref_holdings=holdings.clone(),
        ref_value=value.clone(),
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
    a fresh tensor. Each slice is written in place: no concatenation copy. The ``impact``
    columns (square-root costs) are the one per-ticker feature that depends on the
    account: they are rewritten for each row's value.
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
    if tables.impact_level is not None:
        level = tables.impact_level.index_select(0, state.t)
        out[:, tables.impact_columns] = impact_feature(level, out[:, :1])
    return out


def observe_functional(state: State, tables: Tables, config: EnvConfig) -> torch.Tensor:
    """:func:`observe` without in-place writes (for ``torch.compile``, which fuses the cat)."""
    init = float(config.initial_cash)
    v = state.value.clamp(min=init * VALUE_FLOOR)
    inv = v.reciprocal()
    head = torch.stack([torch.log(v * (1.0 / init)), state.cash * inv], dim=1)
    weights = state.position * inv.unsqueeze(1)
    static = tables.static_obs.index_select(0, state.t)
    obs = torch.cat([head.float(), weights.float(), static], dim=1)
    if tables.impact_level is not None:
        level = tables.impact_level.index_select(0, state.t)
        cols = tables.impact_columns
        feature = impact_feature(level, obs[:, :1])
        obs = torch.slice_scatter(obs, feature, 1, cols.start, cols.stop, cols.step)
    return obs


def transition(
    state: State, action: torch.Tensor, tables: Tables, config: EnvConfig
) -> tuple[State, StepOut]:
    """Execute ``action`` (E, N) in [-1, 1] decided at bar ``state.t``; fill at ``t + 1``.

    Order of execution: sells (capped at holdings unless shorting is allowed), their
    proceeds less costs credited; then buys, scaled down together so that notional plus
    costs fits in the cash (unless borrowing is allowed). Tickers without a valid fill
    price at ``t + 1`` (not tradable) do not trade. With an active reward the reference
    account (:class:`State`) takes the same step with a zero action.
    """
    n = state.holdings.shape[1]
    t1 = state.t + 1
    row = tables.step.index_select(0, t1)
    price = row[:, :n]
    # In-place ops below only touch temporaries created here (never the inputs): on CPU
    # every fresh (E, N) tensor costs an allocation and page faults.
    # A NaN action (a diverged policy) trades nothing instead of poisoning the account.
    a = action.to(state.cash.dtype).clamp(-1.0, 1.0).nan_to_num_(0.0)

    flat = tables.schedule.index_select(0, state.t)[:, 1:2] if config.flat_at_close else None
    block = tables.buy_block.index_select(0, t1) if tables.buy_block is not None else None
    gone = tables.delist.index_select(0, t1) if tables.delist is not None else None
    k = tables.impact.index_select(0, t1) if tables.impact is not None else None
    if tables.reference is not None:
        ref_row = tables.reference.index_select(0, state.t)

    if config.action_mode == "weights":
        if config.allow_short:
            w = a / a.abs().sum(1, keepdim=True).clamp(min=1.0)
        else:
            w = a.clamp_(min=0.0)
            w = w / w.sum(1, keepdim=True).clamp(min=1.0)
        delta = weights_order(
            w, state.holdings, state.position, state.value, state.mark, flat, config
        )
    elif config.action_mode == "active":
        ref = ref_row[:, :n]
        w = active_targets(a, ref, ref_row[:, n:], config)
        delta = weights_order(
            w, state.holdings, state.position, state.value, state.mark, flat, config, ref
        )
    else:
        if config.no_trade_band > 0.0:
            # Dead zone on the action: |a| ≤ band (a fraction of max_shares) orders nothing.
            a = torch.nn.functional.hardshrink(a, float(config.no_trade_band))
        # Partial adjustment scales the order: trunc(a · max_shares · f).
        delta = a.mul_(float(config.max_shares) * float(config.partial_adjustment))
        if config.integer_shares:
            delta.trunc_()
        if flat is not None:
            delta.mul_(1.0 - flat).addcmul_(state.holdings, flat, value=-1.0)
    fill = execute(delta, state.cash, state.holdings, row, block, gone, config, k)
    cash, holdings, position, value, trade, notional = fill[:6]

    ref_cash, ref_holdings, ref_value = state.ref_cash, state.ref_holdings, state.ref_value
    v0 = state.value
    init = float(config.initial_cash)
    floor = init * VALUE_FLOOR
    if config.reward in ACTIVE_REWARDS:
        # The reference account: a zero action's target (the reference weights), traded
        # through the same controls, fills and costs.
        ref_position = ref_holdings * state.mark
        ref_delta = weights_order(
            ref_row[:, :n].clone(), ref_holdings, ref_position, ref_value, state.mark, flat, config
        )
        ref_fill = execute(ref_delta, ref_cash, ref_holdings, row, block, gone, config, k)
        ref_cash, ref_holdings, ref_value = ref_fill.cash, ref_fill.holdings, ref_fill.value
    sharpe_a, sharpe_b, peak = state.sharpe_a, state.sharpe_b, state.peak
    if config.reward == "value_change":
        reward = (value - v0) * (1.0 / init)
    elif config.reward == "log_return":
        reward = torch.log(value.clamp(min=floor) / v0.clamp(min=floor))
    elif config.reward == "active_log_return":
        reward = torch.log(value.clamp(min=floor) / v0.clamp(min=floor)) - torch.log(
            ref_value.clamp(min=floor) / state.ref_value.clamp(min=floor)
        )
    elif config.reward in ("differential_sharpe", "active_differential_sharpe"):
        ret = value / v0.clamp(min=floor) - 1.0
        if config.reward == "active_differential_sharpe":
            ret = ret - (ref_value / state.ref_value.clamp(min=floor) - 1.0)
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
    turnover = notional / v0.clamp(min=floor)
    if config.turnover_penalty > 0.0:
        reward = reward - float(config.turnover_penalty) * turnover
    reward = (reward * float(config.reward_scale)).float()

    new_state = State(
        t=t1,
        steps=state.steps + 1,
        cash=cash,
        holdings=holdings,
        mark=row[:, n : 2 * n],
        position=position,
        value=value,
        sharpe_a=sharpe_a,
        sharpe_b=sharpe_b,
        peak=peak,
        ref_cash=ref_cash,
        ref_holdings=ref_holdings,
        ref_value=ref_value,
    )
    out = StepOut(
        reward,
        trade,
        price,
        fill.cost,
        notional,
        turnover,
        fill.impact,
        fill.fill_cost,
        fill.fill_impact,
    )
    return new_state, out
