"""The ceiling beside an agent: a scripted rule on an observed signal, under the agent's
own bounds and controls.

On a market with a planted signal (the synthetic ``alpha`` regime's ``alpha_signal``, or
any per-ticker feature a researcher names), :func:`signal_tilt_policy` tilts every name
toward its signal, ``action_i = clip(signal_i / scale, −1, 1)``, and trades through the
same env settings as the agent: its action mode, tilt bounds, active budget, decision
interval, no-trade band, partial adjustment, fills and costs. What it reaches is what
*those bounds* allow a simple reading of the signal, so a researcher can tell "my bounds
are too tight" (the rule reaches little) from "my agent learned nothing" (the rule reaches
much, the agent does not). It reads the signal from the observation at bar t only, so it
is causal by construction.

:func:`cost_aware_reference` is the unconstrained line beside it (weights mode, no tilt
bounds): the synthetic market's cost-aware target weights, traded under the agent's
account, fills and cost model only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from finpod.data.market import MarketData
from finpod.data.synthetic_market import (
    REFERENCE_ENTER,
    REFERENCE_EXIT,
    REFERENCE_SLOT_WEIGHT,
    TargetWeightsPolicy,
    cost_aware_weights,
)
from finpod.env.config import EnvConfig
from finpod.env.observed import observed_feature_names
from finpod.env.tables import ObsLayout
from finpod.errors import FinpodError

#: Signal units (standard deviations) that map to a full tilt: a signal of ±1 σ asks for
#: the whole ``max_active_weight``.
SIGNAL_SCALE = 1.0
#: The planted signal of the synthetic ``alpha`` regime (a per-ticker feature).
SIGNAL_FEATURE = "alpha_signal"
#: Benchmark-column names: the scripted ceiling under the agent's bounds, and the
#: unconstrained cost-aware reference (:func:`cost_aware_reference`).
SIGNAL_RULE = "signal_rule"
COST_AWARE = "cost_aware_reference"
#: The cost-aware reference's no-trade band (weight units, trade to the target): price
#: drift of a held position triggers no rebalance (chosen with ``bench/reference_alpha.py``
#: beside the signal thresholds of :mod:`finpod.data.synthetic_market`).
REFERENCE_BAND = 0.02
#: What the cost-aware reference takes from the env settings it is given: the account,
#: the fills and the cost model. Everything else (tilt bounds, decision times, bands,
#: partial adjustment, episode length, start) is the env's default, so the reference is
#: the same line beside any agent's controls: unconstrained, not the agent's rule.
REFERENCE_KEEPS = ("initial_cash", "fill_price", "cost_rate", "slippage", "cost_model")
REFERENCE_KEEPS += ("impact_coefficient", "integer_shares", "dtype")


def ceiling_shares(
    agent: dict[str, float], rule: dict[str, float], reference: dict[str, float] | None
) -> dict[str, float]:
    """The agent's share of what the scripted rule reaches under its bounds (information
    ratio and Sharpe), and of the unconstrained cost-aware reference's Sharpe.

    Each argument holds ``sharpe`` and ``information_ratio`` (annualized) of one line on the
    same split; a share is NaN when the line it divides by is not positive.
    """

    def share(a: float, b: float) -> float:
        return float(a / b) if b == b and b > 0 and a == a else float("nan")

    out = {
        "rule_sharpe": float(rule["sharpe"]),
        "rule_information_ratio": float(rule["information_ratio"]),
        "ir_share_of_rule": share(agent["information_ratio"], rule["information_ratio"]),
        "sharpe_share_of_rule": share(agent["sharpe"], rule["sharpe"]),
    }
    if reference is not None:
        out["cost_aware_sharpe"] = float(reference["sharpe"])
        out["sharpe_share_of_cost_aware"] = share(agent["sharpe"], reference["sharpe"])
    return out


def signal_tilt_policy(
    market: MarketData,
    config: EnvConfig,
    feature: str = "alpha_signal",
    scale: float = SIGNAL_SCALE,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``obs (B, obs_dim) -> action (B, N)``: ``clip(signal / scale, −1, 1)`` per ticker.

    ``feature`` names the per-ticker feature holding the signal (FinpodError when the
    market has none). In ``active`` mode the action is a tilt around the reference; in
    ``weights`` mode it is mapped to long-only target weights by the env as any action.
    """
    names = observed_feature_names(market.feature_names, config.user_features)
    if feature not in names:
        raise FinpodError(
            f"this market has no {feature!r} feature to script a ceiling from",
            "use a synthetic alpha market, or name a per-ticker feature that holds the signal",
        )
    if not scale > 0:
        raise FinpodError(f"scale must be > 0, got {scale}", "e.g. scale = 1.0")
    layout = ObsLayout.for_env(market, config)
    j = names.index(feature)
    n, f = layout.num_stocks, layout.num_features
    start = layout.features.start

    def policy(obs: torch.Tensor) -> torch.Tensor:
        feats = obs[:, start : start + n * f].reshape(obs.shape[0], n, f)
        return (feats[:, :, j] / scale).clamp(-1.0, 1.0)

    return policy


def cost_aware_reference(
    market: MarketData,
    env_config: EnvConfig,
    enter: float = REFERENCE_ENTER,
    exit: float = REFERENCE_EXIT,
    slot_weight: float = REFERENCE_SLOT_WEIGHT,
    band: float = REFERENCE_BAND,
) -> tuple[TargetWeightsPolicy, EnvConfig]:
    """The cost-aware reference policy of the ``alpha`` regime, and the env settings to run it.

    Its thresholds suit a persistent signal (``signal_persistence = 0.99``, as
    ``finpod download --source synthetic --regime alpha --signal-persistence 0.99`` builds):
    with the default 0.9 on 1-minute bars the signal decays within a few bars, no rule
    earns its 0.2 % round trips back, and this reference loses (Sharpe about −40).

    Under proportional costs the optimal rule is a no-trade region: trade only when the
    expected gain of the change exceeds its cost. The reference applies that twice: a band
    in signal space (:func:`~finpod.data.synthetic_market.cost_aware_weights`: enter above ``enter``, leave below
    ``exit``) and the env's no-trade band in weight space (``band``, trading all the way to
    the target), so that price drift of a held position triggers no trade. The returned
    config is a fresh :class:`~finpod.env.EnvConfig` with ``env_config``'s account, fills
    and cost model (:data:`REFERENCE_KEEPS`), ``action_mode="weights"``,
    ``no_trade_band=band`` and ``band_target="target"``; the agent's tilt bounds and
    execution controls are not applied. Evaluate it with the env's own accounting::

        policy, config = cost_aware_reference(market, EnvConfig(cost_rate=0.002))
        sharpe = finpod.env.score(finpod.env.rollout(policy, market, config))

    The policy counts bars: use a fresh one per rollout. An agent is measured against this
    after-cost Sharpe, not against the cost-free oracle
    (:func:`~finpod.data.synthetic_market.oracle_policy`).
    """
    if not 0.0 <= band < 1.0:
        raise FinpodError(f"band must be in [0, 1), got {band}", "e.g. band = 0.02")
    kept = {name: getattr(env_config, name) for name in REFERENCE_KEEPS}
    config = EnvConfig(
        **kept, action_mode="weights", no_trade_band=float(band), band_target="target"
    )
    return TargetWeightsPolicy(cost_aware_weights(market, enter, exit, slot_weight)), config
