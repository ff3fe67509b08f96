"""What a fill costs: the fee, and (``EnvConfig.cost_model = "sqrt"``) square-root impact.

The cost of every fill is computed here once, per (env, ticker), by :func:`fill_costs`;
the env takes its sum from the cash and reports it, and the rollout's transactions table
reads the same per-ticker figures. Slippage is not a cost here: it moves the executed
price (:mod:`finpod.env.execution`), so it is already in the traded value.

Square-root law. A fill of Q dollars (shares × executed price) in ticker i costs, on top
of the fee ``cost_rate`` · Q,

    impact = min(Y · σ_i · √(Q / ADV_i), MAX_IMPACT_FRACTION) · Q

with Y = ``EnvConfig.impact_coefficient``, σ_i the ticker's daily volatility and ADV_i its
average daily traded value in dollars (:mod:`finpod.data.liquidity`), both taken at the
decision bar t for a fill at bar t + 1: bars ≤ t only, so the fill bar's own volume (not
known when the order is sent) never prices it. A ticker with no traded value in the
window has ADV floored at :data:`ADV_FLOOR_DOLLARS`, so any order there pays the cap.
Impact is paid like the fee (from the cash); it does not move the price the account is
marked at afterwards (temporary impact).
"""

from __future__ import annotations

import math

import torch

from finpod.data.liquidity import daily_liquidity
from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.errors import FinpodError

#: Largest impact as a fraction of the order's value. The square-root law is measured on
#: orders of up to a few % of ADV; far past that it no longer describes a fill, and the
#: cap keeps a sell's proceeds net of costs positive.
MAX_IMPACT_FRACTION = 0.5
#: Floor of the average daily traded value, dollars (a ticker that never traded).
ADV_FLOOR_DOLLARS = 1.0
#: Centre and span of :func:`impact_feature`, log10 units: f = 0.1 % (σ = 1 %/day, ADV
#: 100× the account) reads 0; each factor 10 in f moves it by 2/3.
IMPACT_FEATURE_CENTER, IMPACT_FEATURE_SPAN = 3.0, 1.5
#: Change of :func:`impact_feature` per unit of ``log(V / initial_cash)``: ½ · log10(e) / span
#: (impact ∝ √V).
IMPACT_PER_LOG_VALUE = 0.5 / (math.log(10.0) * IMPACT_FEATURE_SPAN)


def impact_rate(market: MarketData, config: EnvConfig, device: torch.device) -> torch.Tensor | None:
    """(T, N) float64 ``Y · σ[t] / √ADV[t]`` from the bars ≤ t (None with the linear model):
    what an order sent at bar t pays per dollar per √dollar.

    Raises :class:`FinpodError` when the square-root model is asked of a market without
    volume."""
    if config.cost_model != "sqrt":
        return None
    if market.liquidity is not None:
        liq = market.liquidity.to(device=device, dtype=torch.float64)
        sigma, adv = liq[..., 0], liq[..., 1]
    elif market.volume is not None:
        sigma, adv = daily_liquidity(market.close.to(device), market.volume.to(device), market.bar)
    else:
        raise FinpodError(
            'env.cost_model = "sqrt" needs the volume of every bar; this market has none',
            'rebuild the dataset with this version of finpod, or use cost_model = "linear"',
        )
    return float(config.impact_coefficient) * sigma / adv.clamp(min=ADV_FLOOR_DOLLARS).sqrt()


def impact_table(
    market: MarketData, config: EnvConfig, device: torch.device, rate: torch.Tensor | None = None
) -> torch.Tensor | None:
    """(T, N) accounting dtype ``k`` with impact = min(k · √Q, cap) · Q for a fill at bar t:
    ``k[t]`` = :func:`impact_rate` at t − 1 (row 0, where nothing fills, repeats row 1's
    inputs). None with the linear cost model. ``rate``: :func:`impact_rate`, if at hand."""
    k = impact_rate(market, config, device) if rate is None else rate
    if k is None:
        return None
    out = torch.empty_like(k)
    out[1:] = k[:-1]
    out[:1] = k[:1]
    return out.to(config.torch_dtype).contiguous()


def impact_level(rate: torch.Tensor, config: EnvConfig) -> torch.Tensor:
    """(T, N) float32 :func:`impact_feature` of an account worth ``config.initial_cash``,
    before the clip: ``(log10(rate · √initial_cash) + IMPACT_FEATURE_CENTER) /
    IMPACT_FEATURE_SPAN``, ``rate`` (T, N) :func:`impact_rate`. The env keeps it per bar and
    shifts it by each account's value at observation time."""
    f = (rate * float(config.initial_cash) ** 0.5).clamp(min=1e-12)
    return ((torch.log10(f) + IMPACT_FEATURE_CENTER) / IMPACT_FEATURE_SPAN).to(torch.float32)


def impact_feature(level: torch.Tensor, log_value: torch.Tensor) -> torch.Tensor:
    """(E, N) float32 observation of what trading costs in each name for each account, so
    an agent under square-root costs can tell thin names from liquid ones and sees that its
    own size makes them dearer: with f = :func:`impact_rate` · √V (the impact, as a
    fraction, of trading the whole account in the name in one order), V the account's
    current value, the feature is
    ``clip((log10 f + IMPACT_FEATURE_CENTER) / IMPACT_FEATURE_SPAN, −2, 2)``: 0 for a name
    of σ = 1 %/day whose ADV is 100× the account, +1/3 for each 10× less ADV or 100× more
    account value.

    ``level`` (E, N) float32 rows of :func:`impact_level` at each account's bar t (bars ≤ t
    only), overwritten with the result (pass a fresh gather of the table, not a view of
    it); ``log_value`` (E, 1) ``log(V / initial_cash)`` of the accounts, V marked at bar t.
    As log10(rate · √V) = log10(rate · √V0) + ½ · log10(V / V0), the account's size is a
    shift of its whole row before the clip."""
    return level.add_(log_value, alpha=IMPACT_PER_LOG_VALUE).clamp_(-2.0, 2.0)


def impact_costs(traded: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(E, N) dollars of square-root impact of fills worth ``traded`` (E, N) dollars (≥ 0),
    ``k`` (E, N) the fill bar's row of :func:`impact_table`. Zero where nothing trades."""
    return (k * traded.sqrt()).clamp_(max=MAX_IMPACT_FRACTION).mul_(traded)


def fill_costs(
    traded: torch.Tensor, k: torch.Tensor | None, config: EnvConfig
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(cost, impact)`` of fills worth ``traded`` (E, N) dollars at their executed prices:
    ``cost`` (E, N) fee + impact, dollars, the one figure every report of costs reads;
    ``impact`` (E, N) its impact part (None with the linear model, where it is 0)."""
    fee = traded * float(config.cost_rate)
    if k is None:
        return fee, None
    impact = impact_costs(traded, k)
    return fee.add_(impact), impact
