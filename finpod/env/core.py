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
``prices``     N      causal z-score of the price against its trailing mean:
                      ``(log m_t − mean(log m over the last W bars)) / (ρ · √W)`` with
                      ρ the RMS 1-bar log return over those bars (W =
                      ``EnvConfig.price_window``); clipped to ±:data:`PRICE_Z_CLIP`;
                      0 before a listing
``features``   N·F    ``MarketData.features[t]`` flattened ticker-major (already O(1))
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
finite); a price on a non-tradable bar is never used, for fills or for valuation. Fill
price: the bar's open or close where ``tradable`` is True and the price is valid, else 0,
which blocks the trade.

Execution controls (:class:`EnvConfig`), applied in this order to the order decided at
bar t: target (weights or shares) → no-trade band (weights: the gap to the target shrunk
by the band, ``softshrink``, or zeroed inside it; shares: a dead zone on the action) →
partial adjustment → flat-at-close override (sell everything) → point-in-time rules at the
fill bar t + 1 (not ``buyable``: the order may sell or cover but not add to a long
position; ``delisted``: the env sells the whole position at the last valid close, with the
usual cost and slippage, reported as an ordinary sell) → fill mask (bar t + 1 tradable and
bar t a decision bar, or a delisting sale; see :class:`Tables`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from finpod.data.market import MarketData
from finpod.env.config import ACTIVE_REWARDS, EnvConfig
from finpod.env.prices import mark_prices, valid_prices
from finpod.errors import FinpodError

#: Floor of the account value in the observation, as a fraction of initial cash (keeps the
#: log and the weights finite when an account with shorting or borrowing goes bankrupt).
VALUE_FLOOR = 1e-9
#: Small variance floor of the differential Sharpe ratio's denominator (returns² units):
#: with bar returns of ~1 % the variance is ~1e-4, so this only matters in the first bars.
SHARPE_VAR_FLOOR = 1e-6
#: The price z-score of the observation is clipped to ±PRICE_Z_CLIP (a split or a data
#: error makes one huge move; the policy should see "far from the mean", not 10³).
PRICE_Z_CLIP = 10.0
#: Floor of the RMS 1-bar log return in the price z-score (log units per bar): keeps a
#: price that never moved (filled bars, a halted stock) at z = 0 instead of 0 / 0.
PRICE_VOL_FLOOR = 1e-6
#: Width of the ``calendar`` observation slice.
CALENDAR_WIDTH = 3


@dataclass(frozen=True)
class ObsLayout:
    """Named slices of the observation vector (see the module docstring).

    ``calendar`` and ``schedule`` are the widths of the optional trailing slices (0 when
    off); :meth:`for_env` sets them from a market and config.
    """

    num_stocks: int
    num_features: int
    calendar: int = 0
    schedule: int = 0

    @classmethod
    def for_env(cls, market: MarketData, config: EnvConfig) -> ObsLayout:
        """The layout of a :class:`~finpod.env.VecTradingEnv` on ``market`` with ``config``."""
        return cls(
            market.num_stocks,
            market.num_features,
            CALENDAR_WIDTH if use_calendar(market, config) else 0,
            1 if config.has_schedule else 0,
        )

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
    def calendar_slice(self) -> slice:
        """Time of day, bars left in the session, first-bar flag (width 0 when off)."""
        start = self.features.stop
        return slice(start, start + self.calendar)

    @property
    def schedule_slice(self) -> slice:
        """1.0 where an order given at the bar is executed (width 0 when off)."""
        start = self.calendar_slice.stop
        return slice(start, start + self.schedule)

    @property
    def obs_dim(self) -> int:
        return 2 + self.num_stocks * (2 + self.num_features) + self.calendar + self.schedule


class Tables(NamedTuple):
    """Per-bar lookup tables built once per (market, config, device).

    Attributes:
        step: (T, 3N) accounting dtype; ``[:, :N]`` fill price of the bar (0 = no fill),
            ``[:, N:2N]`` mark price of the bar (0 before a listing), ``[:, 2N:]`` 1.0 where
            the bar fills the order decided at the bar before, else 0.0 (not tradable, or
            the bar before is not a decision bar; a float mask: multiplying is much cheaper
            than ``torch.where`` on CPU). A delisted (bar, ticker) fills at its mark, the
            last valid close, whatever the schedule.
        static_obs: (T, N + N·F [+ 3] [+ 1]) float32; the ``prices``, ``features`` and
            optional ``calendar`` and ``schedule`` slices of the observation, which depend
            on the bar only.
        schedule: (T, 2) accounting dtype or None (no schedule); ``[:, 0]`` 1.0 where an
            order decided at the bar is executed (a decision bar or a flat-at-close bar),
            ``[:, 1]`` 1.0 where the env orders everything to cash (flat-at-close).
        buy_block: (T, N) accounting dtype or None; 1.0 where a fill at the bar may not
            add to a long position (``MarketData.buyable`` False).
        delist: (T, N) accounting dtype or None; 1.0 where the ticker is delisted at the
            bar (the env sells any position there).
        reference: (T, 2N) accounting dtype or None (``EnvConfig.uses_reference``);
            ``[:, :N]`` the reference portfolio's target weights at the bar,
            ``[:, N:]`` 1.0 where a name is eligible for a tilt (tradable, priced and
            buyable at the bar), see :mod:`finpod.env.reference`.
    """

    step: torch.Tensor
    static_obs: torch.Tensor
    schedule: torch.Tensor | None = None
    buy_block: torch.Tensor | None = None
    delist: torch.Tensor | None = None
    reference: torch.Tensor | None = None


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
    """

    reward: torch.Tensor
    trade: torch.Tensor
    fill_price: torch.Tensor
    cost: torch.Tensor
    notional: torch.Tensor
    turnover: torch.Tensor


def price_zscore(mark: torch.Tensor, window: int) -> torch.Tensor:
    """(T, N) float32 causal z-score of the mark against its trailing mean (see module doc).

    ``mark`` (T, N) float64 (0 = no price yet). Bar t uses bars ``t − W + 1 .. t`` only;
    early in the split (or after a listing) the window holds the bars available.
    """
    valid = (mark > 0).to(torch.float64)
    logm = torch.log(torch.where(mark > 0, mark, torch.ones_like(mark)))
    ret = torch.zeros_like(logm)
    ret[1:] = (logm[1:] - logm[:-1]) * valid[1:] * valid[:-1]
    has_ret = torch.zeros_like(valid)
    has_ret[1:] = valid[1:] * valid[:-1]

    def trailing_sum(x: torch.Tensor) -> torch.Tensor:
        c = torch.cumsum(x, dim=0)
        out = c.clone()
        out[window:] -= c[:-window]
        return out

    count = trailing_sum(valid).clamp(min=1.0)
    mean = trailing_sum(logm * valid) / count
    rms = (trailing_sum(ret * ret) / trailing_sum(has_ret).clamp(min=1.0)).sqrt()
    z = (logm - mean) / (rms.clamp(min=PRICE_VOL_FLOOR) * (window**0.5))
    return (z * valid).clamp(-PRICE_Z_CLIP, PRICE_Z_CLIP).to(torch.float32)


def use_calendar(market: MarketData, config: EnvConfig) -> bool:
    """Whether the observation carries the ``calendar`` slice (see ``calendar_features``)."""
    from finpod.data.calendar import bar_minutes

    intraday = bar_minutes(market.bar) is not None
    if config.calendar_features is None:
        return intraday
    return bool(config.calendar_features)


def session_clock(market: MarketData) -> dict[str, torch.Tensor]:
    """Per-bar session facts from the exchange calendar, (T,) each (host tensors).

    Keys: ``index`` bar's position in its session (0 = first bar, from the exchange open);
    ``left`` bars after it in the session; ``end`` minutes after midnight (New York) at the
    bar's end; ``full`` bars of a full 390-minute session. Intraday bars only; a date not
    on the XNYS calendar is taken as a 09:30–16:00 session. Nothing here reads prices: the
    session schedule is known in advance.
    """
    import numpy as np
    import pandas as pd

    from finpod.data.calendar import TZ, bar_minutes, get_calendar
    from finpod.env.config import SESSION_CLOSE_MIN, SESSION_OPEN_MIN

    length = bar_minutes(market.bar)
    if length is None:
        raise ValueError("session_clock needs intraday bars")
    ts = pd.DatetimeIndex(market.timestamps).tz_convert(TZ)
    start_min = (ts.hour * 60 + ts.minute).to_numpy(np.int64)
    dates = ts.tz_localize(None).normalize()
    open_min = np.full(len(ts), SESSION_OPEN_MIN, dtype=np.int64)
    close_min = np.full(len(ts), SESSION_CLOSE_MIN, dtype=np.int64)
    sched = get_calendar("XNYS").schedule
    known = dates.isin(sched.index)
    if known.any():
        rows = sched.loc[dates[known]]
        for col, target in (("open", open_min), ("close", close_min)):
            local = pd.DatetimeIndex(rows[col]).tz_convert(TZ)
            target[known] = local.hour * 60 + local.minute
    index = (start_min - open_min) // length
    end = np.minimum(start_min + length, close_min)
    left = np.maximum(0, -(-(close_min - end) // length))
    full = -(-(SESSION_CLOSE_MIN - SESSION_OPEN_MIN) // length)
    return {
        "index": torch.as_tensor(index),
        "left": torch.as_tensor(left),
        "end": torch.as_tensor(end),
        "full": torch.tensor(full),
        "open": torch.as_tensor(open_min),
    }


def decision_schedule(market: MarketData, config: EnvConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(T,) bool ``execute`` and ``flat`` of each bar (host tensors; see :class:`Tables`)."""
    from finpod.data.calendar import bar_minutes
    from finpod.env.config import decision_minutes

    t = market.num_bars
    intraday = bar_minutes(market.bar) is not None
    if not intraday and (config.decision_times or config.flat_at_close):
        key = "decision_times" if config.decision_times else "flat_at_close"
        raise FinpodError(
            f"env.{key} needs intraday bars; this market has {market.bar} bars",
            "remove it, or use decision_interval for daily bars",
        )
    k = int(config.decision_interval)
    if not intraday:
        decide = torch.arange(t) % k == 0
        return decide, torch.zeros(t, dtype=torch.bool)
    clock = session_clock(market)
    length = bar_minutes(market.bar)
    if config.decision_times:
        decide = torch.zeros(t, dtype=torch.bool)
        for minute in decision_minutes(config.decision_times):
            # The first bar whose end is at or after the time (bars are contiguous).
            decide |= (clock["end"] >= minute) & (clock["end"] - length < minute)
    else:
        decide = clock["index"] % k == 0
    flat = (clock["left"] <= 1) if config.flat_at_close else torch.zeros(t, dtype=torch.bool)
    return decide | flat, flat


def calendar_obs(market: MarketData) -> torch.Tensor:
    """(T, 3) float32 ``calendar`` slice: time of day, bars left / full session, first bar."""
    from finpod.env.config import SESSION_CLOSE_MIN, SESSION_OPEN_MIN

    clock = session_clock(market)
    span = float(SESSION_CLOSE_MIN - SESSION_OPEN_MIN)
    tod = (clock["end"] - SESSION_OPEN_MIN).double() / span
    left = clock["left"].double() / clock["full"].double()
    first = (clock["index"] <= 0).double()
    return torch.stack([tod, left, first], dim=1).float()


def build_tables(market: MarketData, config: EnvConfig, device: torch.device) -> Tables:
    """Lookup tables of ``market`` on ``device`` (see :class:`Tables`).

    Raises :class:`FinpodError` when a control needs intraday bars and the market is daily.
    """
    dtype = config.torch_dtype
    close = market.close.to(device=device, dtype=torch.float64)
    base = market.open if config.fill_price == "open" else market.close
    base = base.to(device=device, dtype=torch.float64)
    tradable = market.tradable.to(device=device, dtype=torch.bool)
    fill = torch.where(tradable & valid_prices(base), base, torch.zeros_like(base))
    mark = mark_prices(close, tradable)
    delist = None
    if market.delisted is not None:
        gone = market.delisted.to(device=device, dtype=torch.bool) & (mark > 0)
        # A delisted position is sold at its last valid close (the mark), see module doc.
        fill = torch.where(gone, mark, fill)
        delist = gone.to(dtype).contiguous()
    buy_block = None
    if market.buyable is not None:
        buy_block = (~market.buyable.to(device=device, dtype=torch.bool)).to(dtype).contiguous()
    can_fill = (fill > 0).to(fill.dtype)
    schedule = None
    if config.has_schedule:
        execute, flat = decision_schedule(market, config)
        schedule = torch.stack([execute, flat], dim=1).to(device=device, dtype=dtype)
        # The schedule of decision bar t is folded into the fill mask of bar t + 1 (a step
        # always fills at its decision bar + 1), so skipping an order costs no extra op; a
        # delisting sale goes through whatever the schedule says.
        ran = torch.zeros_like(can_fill[:, 0])
        ran[1:] = execute[:-1].to(device=device, dtype=ran.dtype)
        forced = delist if delist is not None else torch.zeros_like(can_fill)
        can_fill = can_fill * torch.maximum(ran.unsqueeze(1), forced.to(can_fill.dtype))
    step = torch.cat([fill, mark, can_fill], dim=1).to(dtype).contiguous()

    parts = [price_zscore(mark, int(config.price_window))]
    feats = market.features.to(device=device, dtype=torch.float32)
    parts.append(torch.nan_to_num(feats, nan=0.0, posinf=0.0, neginf=0.0).flatten(1))
    if use_calendar(market, config):
        from finpod.data.calendar import bar_minutes

        if bar_minutes(market.bar) is None:
            raise FinpodError(
                f"env.calendar_features needs intraday bars; this market has {market.bar} bars",
                "remove calendar_features (it is on for intraday bars by default)",
            )
        parts.append(calendar_obs(market).to(device))
    if config.has_schedule:
        parts.append((execute & ~flat).float().unsqueeze(1).to(device))
    static_obs = torch.cat(parts, dim=1).contiguous()
    reference = None
    if config.uses_reference:
        from finpod.env.reference import eligible_names, reference_weights

        ref = reference_weights(market, config)
        ok = eligible_names(market).to(torch.float64)
        reference = torch.cat([ref, ok], dim=1).to(device=device, dtype=dtype).contiguous()
    return Tables(
        step=step,
        static_obs=static_obs,
        schedule=schedule,
        buy_block=buy_block,
        delist=delist,
        reference=reference,
    )


def initial_state(start: torch.Tensor, tables: Tables, config: EnvConfig, num_stocks: int) -> State:
    """Fresh accounts at bar pointers ``start`` (E,) int64: all cash, or (``EnvConfig.start``
    = ``"reference"``) endowed with the reference portfolio at the start bar's marks
    (shares w · initial_cash / mark, whole shares when ``integer_shares``; no cost)."""
    dtype = config.torch_dtype
    e = start.shape[0]
    dev = start.device
    init = float(config.initial_cash)
    cash = torch.full((e,), init, dtype=dtype, device=dev)
    zeros_en = torch.zeros((e, num_stocks), dtype=dtype, device=dev)
    zeros_e = torch.zeros((e,), dtype=dtype, device=dev)
    mark = tables.step.index_select(0, start)[:, num_stocks : 2 * num_stocks]
    holdings, position = zeros_en, zeros_en
    if config.start == "reference":
        w = tables.reference.index_select(0, start)[:, :num_stocks]
        priced = (mark > 0).to(dtype)
        holdings = w * init / (mark + (1.0 - priced)) * priced
        if config.integer_shares:
            holdings = holdings.trunc()
        position = holdings * mark
        cash = cash - position.sum(1)
    value = cash + position.sum(1)
    return State(
        t=start,
        steps=torch.zeros_like(start),
        cash=cash,
        holdings=holdings,
        mark=mark,
        position=position,
        value=value,
        sharpe_a=zeros_e,
        sharpe_b=zeros_e,
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


def _weights_order(
    w: torch.Tensor,
    holdings: torch.Tensor,
    position: torch.Tensor,
    value: torch.Tensor,
    mark: torch.Tensor,
    flat: torch.Tensor | None,
    config: EnvConfig,
) -> torch.Tensor:
    """(E, N) signed share order moving an account toward target weights ``w`` (consumed).

    Sized with what is known at the decision bar: ``value`` (E,) and ``mark`` (E, N) at its
    close; band, partial adjustment and flat-at-close applied (module docstring)."""
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
        gap = w.sub_(position * inv)
        if band > 0.0 and config.band_target == "edge":
            gap = torch.nn.functional.softshrink(gap, band)  # to the band's nearest edge
        elif band > 0.0:
            gap.mul_(gap.abs() > band)  # outside the band: all the way to the target
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


def _execute(
    delta: torch.Tensor,
    cash: torch.Tensor,
    holdings: torch.Tensor,
    row: torch.Tensor,
    block: torch.Tensor | None,
    gone: torch.Tensor | None,
    config: EnvConfig,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fill the order ``delta`` (E, N) shares (consumed) at the fill bar's ``row`` (E, 3N).

    Returns ``(cash, holdings, position, value, trade, notional)`` after the fill, marked
    at the fill bar. Point-in-time rules, then sells before buys (module docstring).
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
    scratch = torch.mul(sell, sell_price)
    sell_notional = scratch.sum(1)
    cash = cash + sell_notional * (1.0 - rate)

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
    holdings = holdings + trade
    position = torch.mul(holdings, mark, out=scratch)
    value = cash + position.sum(1)
    return cash, holdings, position, value, trade, sell_notional + buy_notional


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
    rate = float(config.cost_rate)
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
    if tables.reference is not None:
        ref_row = tables.reference.index_select(0, state.t)

    if config.action_mode == "weights":
        if config.allow_short:
            w = a / a.abs().sum(1, keepdim=True).clamp(min=1.0)
        else:
            w = a.clamp_(min=0.0)
            w = w / w.sum(1, keepdim=True).clamp(min=1.0)
        delta = _weights_order(
            w, state.holdings, state.position, state.value, state.mark, flat, config
        )
    elif config.action_mode == "active":
        w = active_targets(a, ref_row[:, :n], ref_row[:, n:], config)
        delta = _weights_order(
            w, state.holdings, state.position, state.value, state.mark, flat, config
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
    cash, holdings, position, value, trade, notional = _execute(
        delta, state.cash, state.holdings, row, block, gone, config
    )
    cost = notional * rate

    ref_cash, ref_holdings, ref_value = state.ref_cash, state.ref_holdings, state.ref_value
    v0 = state.value
    init = float(config.initial_cash)
    floor = init * VALUE_FLOOR
    if config.reward in ACTIVE_REWARDS:
        # The reference account: a zero action's target (the reference weights), traded
        # through the same controls, fills and costs.
        ref_position = ref_holdings * state.mark
        ref_delta = _weights_order(
            ref_row[:, :n].clone(), ref_holdings, ref_position, ref_value, state.mark, flat, config
        )
        ref_cash, ref_holdings, _, ref_value, _, _ = _execute(
            ref_delta, ref_cash, ref_holdings, row, block, gone, config
        )
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
    return new_state, StepOut(reward, trade, price, cost, notional, turnover)
