"""The env's host-side tables, built once per (market, config, device) before any step.

:func:`build_tables` turns a :class:`~finpod.data.market.MarketData` and an
:class:`~finpod.env.config.EnvConfig` into :class:`Tables`: fill and mark prices with the
fill mask, the static observation slices (causal price z-scores, features, the intraday
calendar, the decision-schedule flag), the decision schedule, point-in-time buy blocks and
delistings, and the reference portfolio. :class:`ObsLayout` names the observation's slices.
The per-step tensor code that reads these tables is :mod:`finpod.env.core`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from finpod.data.calendar import TZ, bar_minutes, get_calendar
from finpod.data.market import MarketData
from finpod.env.config import SESSION_CLOSE_MIN, SESSION_OPEN_MIN, EnvConfig, decision_minutes
from finpod.env.cross_features import cross_feature_names, cross_features
from finpod.env.impact import impact_feature, impact_level, impact_rate, impact_table
from finpod.env.observed import observed_feature_names, observed_market
from finpod.env.prices import mark_prices, valid_prices
from finpod.env.reference import eligible_names, reference_weights
from finpod.errors import FinpodError

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
    """Named slices of the observation vector (see :mod:`finpod.env.core`).

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
        return cls.for_universe(market.num_stocks, market.feature_names, market.bar, config)

    @classmethod
    def for_universe(
        cls, num_stocks: int, feature_names: Sequence[str], bar: str, config: EnvConfig
    ) -> ObsLayout:
        """The layout of the env with ``config`` over ``num_stocks`` tickers of a dataset
        whose features are ``feature_names`` and whose bars are ``bar`` long (``"1d"``,
        ``"5min"``): what a manifest says, before any market is loaded."""
        observed = observed_feature_names(feature_names, config.user_features)
        extra = extra_feature_names(config, observed)
        return cls(
            int(num_stocks),
            len(observed) + len(extra),
            CALENDAR_WIDTH if use_calendar(bar, config) else 0,
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
        static_obs: (T, N + N·(F + X) [+ 3] [+ 1]) float32 (X cross-sectional features); the ``prices``, ``features`` and
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
        impact: (T, N) accounting dtype or None (linear costs); the square-root impact
            coefficient of a fill at the bar, see :func:`finpod.env.impact.impact_table`.
        impact_level: (T, N) float32 or None (linear costs); the ``impact`` observation
            of an account worth ``initial_cash`` before its clip
            (:func:`finpod.env.impact.impact_level`); ``static_obs`` holds it clipped, and
            :func:`finpod.env.core.observe` rewrites it for each account's current value.
        impact_columns: slice or None; the observation columns of ``impact``, one
            per ticker (a strided slice, so writing them is one copy).
    """

    step: torch.Tensor
    static_obs: torch.Tensor
    schedule: torch.Tensor | None = None
    buy_block: torch.Tensor | None = None
    delist: torch.Tensor | None = None
    reference: torch.Tensor | None = None
    impact: torch.Tensor | None = None
    impact_level: torch.Tensor | None = None
    impact_columns: slice | None = None


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


def use_calendar(bar: str, config: EnvConfig) -> bool:
    """Whether the observation over ``bar``-long bars carries the ``calendar`` slice (see
    ``calendar_features``)."""
    intraday = bar_minutes(bar) is not None
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
    clock = session_clock(market)
    span = float(SESSION_CLOSE_MIN - SESSION_OPEN_MIN)
    tod = (clock["end"] - SESSION_OPEN_MIN).double() / span
    left = clock["left"].double() / clock["full"].double()
    first = (clock["index"] <= 0).double()
    return torch.stack([tod, left, first], dim=1).float()


def extra_feature_names(config: EnvConfig, observed: list[str]) -> list[str]:
    """Names of the per-ticker columns appended after the ``observed`` features: the
    cross-sectional ones (:mod:`finpod.env.cross_features`), then, under square-root
    costs, ``impact`` (:func:`finpod.env.impact.impact_feature`)."""
    names = cross_feature_names(config.cross_features, observed)
    return names + (["impact"] if config.cost_model == "sqrt" else [])


def build_tables(market: MarketData, config: EnvConfig, device: torch.device) -> Tables:
    """Lookup tables of ``market`` on ``device`` (see :class:`Tables`).

    Raises :class:`FinpodError` when a control needs intraday bars and the market is daily,
    or when ``config.user_features`` names a column the market lacks.
    """
    market = observed_market(market, config.user_features)
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
    feats = torch.nan_to_num(feats, nan=0.0, posinf=0.0, neginf=0.0)
    if config.cross_features:
        # Appended per ticker (ticker-major), so the features slice stays (N, F + X).
        listed = (mark > 0) if delist is None else (mark > 0) & (delist == 0)
        extra = cross_features(config.cross_features, mark, feats, listed)
        feats = torch.cat([feats, extra], dim=2)
    rate = impact_rate(market, config, device)
    level = columns = None
    if rate is not None:
        # Under square-root costs every ticker's token says what trading it costs; here for
        # an account at its starting value, observe() shifts it to each account's value.
        level = impact_level(rate, config).contiguous()
        start = torch.zeros((level.shape[0], 1), dtype=torch.float32, device=device)
        feats = torch.cat([feats, impact_feature(level.clone(), start).unsqueeze(-1)], dim=2)
        n, f = feats.shape[1], feats.shape[2]
        # Features are ticker-major, impact last in each ticker's.
        first = ObsLayout(n, f).features.start + f - 1
        columns = slice(first, first + f * (n - 1) + 1, f)
    parts.append(feats.flatten(1))
    if use_calendar(market.bar, config):
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
        impact=impact_table(market, config, device, rate),
        impact_level=level,
        impact_columns=columns,
    )
