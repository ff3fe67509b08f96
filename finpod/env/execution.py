"""Orders and fills: how a decision at bar t becomes trades at bar t + 1 (pure tensors).

The per-step code of :func:`finpod.env.core.transition` sizes an order with these
functions and fills it; like the rest of the step they never loop over envs or stocks in
Python nor branch on tensor values, only on the (static) :class:`EnvConfig`.

Execution controls (:class:`EnvConfig`), applied in this order to the order decided at
bar t: target (weights or shares) → no-trade band (weights: the gap to the target shrunk
by the band, ``softshrink``, or zeroed inside it; shares: a dead zone on the action) →
partial adjustment → (``"active"`` mode) the active-risk budget on the weights the
account will hold, so a band never holds it outside the budget → flat-at-close override (sell everything) → point-in-time rules at the
fill bar t + 1 (not ``buyable``: the order may sell or cover but not add to a long
position; ``delisted``: the env sells the whole position at the last valid close, with the
usual cost and slippage, reported as an ordinary sell) → fill mask (bar t + 1 tradable and
bar t a decision bar, or a delisting sale; see :class:`~finpod.env.tables.Tables`).

Fill price: the bar's open or close where ``tradable`` is True and the price is valid,
else 0, which blocks the trade. Sells fill before buys; buys are scaled down together to
the cash left (unless borrowing is allowed). What each fill costs (fee, and square-root
impact with ``cost_model = "sqrt"``): :mod:`finpod.env.impact`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from finpod.env.config import EnvConfig
from finpod.env.impact import fill_costs, impact_costs

#: Floor of the account value, as a fraction of initial cash, wherever it divides (keeps
#: the log and the weights finite when an account with shorting or borrowing goes bankrupt).
VALUE_FLOOR = 1e-9
#: Fraction of a cash-limited buy left unspent, per accounting dtype, so that rounding in
#: the notional sums never overdraws the account: well above the dtype's rounding of a sum
#: over a few hundred names, and small enough not to show as a cash position.
CASH_HAIR = {torch.float32: 1e-6, torch.float64: 1e-12}


def active_targets(
    action: torch.Tensor, ref: torch.Tensor, eligible: torch.Tensor, config: EnvConfig
) -> torch.Tensor:
    """(E, N) target weights of ``"active"`` mode (the recipe is on ``EnvConfig.action_mode``).

    ``action`` (E, N) in [-1, 1] (consumed: may be written in place), ``ref`` (E, N)
    reference weights, ``eligible`` (E, N) 1.0 where a name may be tilted. Zero action
    returns ``ref`` exactly. Pure tensor ops (no branch on values).
    """
    m = float(config.max_active_weight)
    count = eligible.sum(1, keepdim=True).clamp(min=1.0)
    common = (action * eligible).sum(1, keepdim=True) / count
    tilt = (action - common).clamp_(-1.0, 1.0).mul_(eligible * m)
    if not config.allow_short:
        tilt = torch.maximum(tilt, -ref)  # long only: never below a weight of 0
    up = tilt.clamp(min=0.0)
    down = tilt.clamp(max=0.0)
    up_sum = up.sum(1, keepdim=True)
    down_sum = -down.sum(1, keepdim=True)
    # Self-financing: the larger side is scaled down to the smaller one (bounds kept).
    both = torch.minimum(up_sum, down_sum)
    tilt = up * (both / up_sum.clamp(min=1e-12)) + down * (both / down_sum.clamp(min=1e-12))
    stock = ref.sum(1, keepdim=True)
    cash_tilt = float(config.max_cash_weight) * (-common).clamp(0.0, 1.0)
    active = (ref + tilt) * (1.0 - cash_tilt) - ref
    share = 0.5 * (active.abs().sum(1, keepdim=True) + cash_tilt * stock)
    scale = (float(config.active_budget) / share.clamp(min=1e-12)).clamp(max=1.0)
    return ref + active * scale


def within_budget(w: torch.Tensor, ref: torch.Tensor, budget: float) -> torch.Tensor:
    """(E, N) weights ``w`` with their active part ``w − ref`` scaled down, row by row, to an
    active share of at most ``budget``: ½(Σ|w_i − r_i| + |Σw − Σr|), cash counted as one
    more position (the share :func:`active_targets` bounds). Rows inside it are unchanged;
    scaling toward the reference keeps every per-name bound the row already met."""
    active = w - ref
    share = 0.5 * (active.abs().sum(1, keepdim=True) + active.sum(1, keepdim=True).abs())
    scale = (budget / share.clamp(min=1e-12)).clamp(max=1.0)
    return ref + active * scale


def weights_order(
    w: torch.Tensor,
    holdings: torch.Tensor,
    position: torch.Tensor,
    value: torch.Tensor,
    mark: torch.Tensor,
    flat: torch.Tensor | None,
    config: EnvConfig,
    ref: torch.Tensor | None = None,
) -> torch.Tensor:
    """(E, N) signed share order moving an account toward target weights ``w`` (consumed).

    Sized with what is known at the decision bar: ``value`` (E,) and ``mark`` (E, N) at its
    close; band, partial adjustment and flat-at-close applied (module docstring). With
    ``ref`` (E, N), the reference weights of ``"active"`` mode, the weights the order leads
    to are kept inside ``config.active_budget`` (:func:`within_budget`)."""
    dtype = value.dtype
    band = float(config.no_trade_band)
    part = float(config.partial_adjustment)
    v = value.unsqueeze(1)
    # Tickers without a price at t keep their holdings (mask arithmetic instead of where).
    priced = (mark > 0).to(dtype)
    if band > 0.0 or part < 1.0:
        # Order in weight units: gap = target − current weight (position / value at
        # t). Inside the band the gap is exactly 0, so those tickers never trade.
        inv = v.clamp(min=float(config.initial_cash) * VALUE_FLOOR).reciprocal()
        held = position * inv
        gap = w.sub_(held)
        if band > 0.0 and config.band_target == "edge":
            gap = torch.nn.functional.softshrink(gap, band)  # to the band's nearest edge
        elif band > 0.0:
            gap.mul_(gap.abs() > band)  # outside the band: all the way to the target
        if ref is not None:
            # Names left inside the band keep weights up to a band away from the target,
            # which can add up to more active risk than the budget allows: the weights the
            # account is left with are brought back inside it (a no-op when they are).
            gap = within_budget(held + gap * part, ref, float(config.active_budget)).sub_(held)
            part = 1.0
        delta = gap.mul_(v * part).div_(mark + (1.0 - priced))
        if config.integer_shares:
            delta.trunc_()
        delta.mul_(priced)
        if flat is not None:  # flat bars: sell everything, whatever band or f say
            delta.mul_(1.0 - flat).addcmul_(holdings, flat, value=-1.0)
    else:
        if flat is not None:
            w = w * (1.0 - flat)
        delta = w.mul_(v).div_(mark + (1.0 - priced))
        if config.integer_shares:
            delta.trunc_()
        delta.sub_(holdings).mul_(priced)
    return delta


class Fill(NamedTuple):
    """What :func:`execute` did, batched over envs; the account is marked at the fill bar.

    Attributes:
        cash: (E,) dollars after the fill.
        holdings: (E, N) shares after the fill.
        position: (E, N) holdings · mark, dollars.
        value: (E,) cash + Σ position, dollars.
        trade: (E, N) executed shares, signed (+ buy, − sell).
        notional: (E,) Σ |trade| · executed price, dollars.
        cost: (E,) dollars of costs taken from the cash (fees + impact).
        impact: (E,) the impact part of ``cost``, dollars (0 with the linear model).
        fill_cost: (E, N) each ticker's share of ``cost``: the figure every per-fill report
            of costs reads (:func:`finpod.env.impact.fill_costs`).
        fill_impact: (E, N) each ticker's share of ``impact``; None with the linear model.
    """

    cash: torch.Tensor
    holdings: torch.Tensor
    position: torch.Tensor
    value: torch.Tensor
    trade: torch.Tensor
    notional: torch.Tensor
    cost: torch.Tensor
    impact: torch.Tensor
    fill_cost: torch.Tensor
    fill_impact: torch.Tensor | None


def execute(
    delta: torch.Tensor,
    cash: torch.Tensor,
    holdings: torch.Tensor,
    row: torch.Tensor,
    block: torch.Tensor | None,
    gone: torch.Tensor | None,
    config: EnvConfig,
    k: torch.Tensor | None = None,
) -> Fill:
    """Fill the order ``delta`` (E, N) shares (consumed) at the fill bar's ``row`` (E, 3N).

    ``k`` (E, N): the fill bar's row of :func:`finpod.env.impact.impact_table` (None: the
    linear cost model). Costs come from :func:`finpod.env.impact.fill_costs`. Point-in-time
    rules, then sells before buys (module docstring); buys are scaled down to the cash
    left, with the impact of the full order counted in what they need (impact grows
    faster than the order, so the scaled order's costs fit too).
    """
    n = holdings.shape[1]
    dtype = cash.dtype
    rate = float(config.cost_rate)
    price = row[:, :n]
    mark = row[:, n : 2 * n]
    can_fill = row[:, 2 * n :]
    if block is not None:
        # Not buyable at the fill bar: an order may sell (or cover a short) but not add to
        # a long position.
        if config.allow_short:
            excess = (delta + holdings.clamp(max=0.0)).clamp_(min=0.0)
        else:
            excess = delta.clamp(min=0.0)
        delta.sub_(excess.mul_(block))
    if gone is not None:
        delta.mul_(1.0 - gone).addcmul_(holdings, gone, value=-1.0)
    delta.mul_(can_fill)
    sell = delta.neg().clamp_(min=0.0)
    if not config.allow_short:
        torch.minimum(sell, holdings, out=sell)
    sell_price = price * (1.0 - config.slippage) if config.slippage else price
    buy_price = price * (1.0 + config.slippage) if config.slippage else price
    sold = torch.mul(sell, sell_price)
    sell_cost, sell_impact = fill_costs(sold, k, config)
    cash = cash + sold.sum(1) - sell_cost.sum(1)

    buy = delta.clamp_(min=0.0)
    bought = torch.mul(buy, buy_price)
    if not config.allow_negative_cash:
        need = bought.sum(1) * (1.0 + rate)
        if k is not None:
            need = need + impact_costs(bought, k).sum(1)
        # Fraction of the buy orders the cash pays for (1 when it is enough).
        free = cash.clamp(min=0.0)
        frac = free / torch.maximum(need, free).clamp(min=1e-30)
        if not config.integer_shares:
            # Leave a hair of cash so rounding never overdraws the account.
            frac = frac * (1.0 - CASH_HAIR.get(dtype, 1e-6) * (frac < 1.0).to(dtype))
        buy.mul_(frac.unsqueeze(1))
        if config.integer_shares:
            buy.floor_()
        torch.mul(buy, buy_price, out=bought)
    buy_cost, buy_impact = fill_costs(bought, k, config)
    cash = cash - bought.sum(1) - buy_cost.sum(1)
    if not config.allow_negative_cash:
        cash = cash.clamp(min=0.0)
    # A ticker either sells or buys at a bar: the two sides add up per ticker.
    fill_cost = sell_cost.add_(buy_cost)
    cost = fill_cost.sum(1)
    notional = sold.add_(bought).sum(1)
    fill_impact = None if sell_impact is None else sell_impact.add_(buy_impact)
    impact = torch.zeros_like(cost) if fill_impact is None else fill_impact.sum(1)

    trade = buy.sub_(sell)
    holdings = holdings + trade
    position = holdings * mark
    value = cash + position.sum(1)
    return Fill(
        cash, holdings, position, value, trade, notional, cost, impact, fill_cost, fill_impact
    )
