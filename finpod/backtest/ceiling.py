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

The cost-aware reference of :func:`finpod.data.synthetic_market.cost_aware_reference` stays the
unconstrained line (weights mode, no tilt bounds).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from finpod.data.market import MarketData
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
#: unconstrained cost-aware reference of :mod:`finpod.data.synthetic_market`.
SIGNAL_RULE = "signal_rule"
COST_AWARE = "cost_aware_reference"


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
