"""The leaderboard ensemble: the mean of its members' target weights, as one policy.

Each member is a policy (obs → action in [-1, 1]) with the env settings it was trained and
scored with. At every bar each member sees its own observation (its own price window,
calendar and schedule slices, built from its own settings) of the one shared account, and
its action becomes target weights under its own action mode and tilt bounds (``"weights"``
or ``"active"``: ``max_active_weight``, ``active_budget``, ``max_cash_weight``, its
``reference``). On a bar that is not one of the member's decision bars
(``decision_interval``, ``decision_times``) the member keeps its last target. The ensemble's
target is the plain mean of the members' targets; it is traded in ``"weights"`` mode.

When members' settings differ. Order-level settings act on the one account, so they can
only be one member's: the ensemble's account takes the **first member's** (the leaderboard's
best) capital, costs, fills, start, no-trade band, partial adjustment, turnover penalty,
flat-at-close and decision schedule (:func:`ensemble_config`). What shapes a member's
target (action mode, tilt bounds, reference, decision bars, observation) stays the member's
own. Shares-mode and short-selling members cannot be averaged as weights and are refused.

Layer: env (imports nothing above it), so the tournament can score an ensemble on the
validation split and the backtest can trade it on the backtest split with the same code
(:func:`score_ensemble`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from finpod.data.market import MarketData
from finpod.env.config import EnvConfig
from finpod.env.execution import active_targets
from finpod.env.impact import impact_feature
from finpod.env.rollout import rollout, score
from finpod.env.tables import Tables, build_tables
from finpod.errors import FinpodError
from finpod.scores import DEFAULT_SCORE

Policy = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Member:
    """One ensemble member: a deterministic policy and the env settings it was trained with."""

    policy: Policy
    """Observation (B, obs_dim of ``config``) float32 → action (B, N) in [-1, 1]."""
    config: EnvConfig
    """The member's recorded env settings (action mode, tilt bounds, controls, ...)."""
    name: str = ""
    """Label for messages and reports (e.g. the pod id)."""


def ensemble_config(members: Sequence[Member]) -> EnvConfig:
    """The settings the ensemble's account trades with: the first member's, in long-only
    ``"weights"`` mode (the ensemble's action *is* a target portfolio)."""
    if not members:
        raise FinpodError("an ensemble needs at least one member", "pass the top-k entries")
    return replace(
        members[0].config, action_mode="weights", allow_short=False, allow_negative_cash=False
    )


class EnsemblePolicy:
    """Weights-mode policy: the mean of ``members``' target weights (module docstring).

    Called once per bar, in order from bar 0 (as :func:`finpod.env.rollout` does), with
    the observation of the ensemble's env (:func:`ensemble_config`); it keeps a bar counter.
    :meth:`member_targets` gives the members' targets of the last call, (k, B, N).
    """

    def __init__(
        self,
        members: Sequence[Member],
        market: MarketData,
        device: torch.device | str | None = None,
    ) -> None:
        self.members = list(members)
        self.config = ensemble_config(self.members)
        self.device = torch.device(device) if device is not None else market.device
        self.num_stocks = market.num_stocks
        dtype = torch.float64
        self._tables: list[Tables] = []
        for i, member in enumerate(self.members):
            cfg = member.config
            label = member.name or f"member {i + 1}"
            if cfg.action_mode not in ("weights", "active") or cfg.allow_short:
                raise FinpodError(
                    f"ensemble member {label} trades in {cfg.action_mode!r} mode"
                    + (" with shorting" if cfg.allow_short else ""),
                    "average members that trade long-only target weights or active tilts "
                    "(or use --agent top-k, the mean action)",
                )
            self._tables.append(build_tables(market, replace(cfg, dtype="float64"), self.device))
        self._dtype = dtype
        self.bar = 0
        self._last: list[torch.Tensor | None] = [None] * len(self.members)
        self.last_targets: torch.Tensor | None = None

    def member_targets(self, obs: torch.Tensor) -> torch.Tensor:
        """(k, B, N) float64 target weights of each member at the current bar (advances
        nothing; :meth:`__call__` advances the bar)."""
        n = self.num_stocks
        t = self.bar
        head = obs[:, : 2 + n]
        held = head[:, 2:].to(self._dtype).clamp(min=0.0)
        out = []
        for i, (member, tables) in enumerate(zip(self.members, self._tables, strict=True)):
            cfg = member.config
            decides = tables.schedule is None or bool(tables.schedule[t, 0] > 0)
            if not decides and self._last[i] is not None:
                out.append(self._last[i])
                continue
            if not decides:
                out.append(held)  # before the member's first decision bar: hold
                continue
            member_obs = torch.cat(
                [head.float(), tables.static_obs[t].expand(obs.shape[0], -1)], dim=1
            )
            if tables.impact_level is not None:
                # Impact priced for the shared account's value: V / V0 of the member's own
                # starting cash, the head's log value being the ensemble account's.
                log_v = head[:, :1].double() + math.log(
                    float(self.config.initial_cash) / float(cfg.initial_cash)
                )
                level = tables.impact_level[t].expand(obs.shape[0], -1).clone()
                member_obs[:, tables.impact_columns] = impact_feature(level, log_v)
            action = member.policy(member_obs)
            if not isinstance(action, torch.Tensor):
                action = torch.as_tensor(action)
            a = action.reshape(obs.shape[0], n).to(self.device, self._dtype)
            a = a.clamp(-1.0, 1.0).nan_to_num(0.0)
            if cfg.action_mode == "active":
                row = tables.reference[t].expand(obs.shape[0], -1)
                w = active_targets(a, row[:, :n], row[:, n:], cfg)
            else:
                w = a.clamp(min=0.0)
                w = w / w.sum(1, keepdim=True).clamp(min=1.0)
            out.append(w)
        return torch.stack(out)

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, obs_dim) observation of the ensemble's env at bar ``self.bar`` → (B, N) mean
        target weights (long only, summing to ≤ 1)."""
        targets = self.member_targets(obs)
        self._last = list(targets.unbind(0))
        self.last_targets = targets
        self.bar += 1
        return targets.mean(0).to(obs.device, torch.float32)


def score_ensemble(
    members: Sequence[Member],
    market: MarketData,
    score_name: str = DEFAULT_SCORE,
    device: torch.device | str | None = None,
):
    """Trade the ensemble of ``members`` over the whole of ``market`` (any split) and score it.

    Returns ``(score, rollout)``: the annualized score (:func:`finpod.env.score`, e.g. the
    validation Sharpe for the tournament) and the :class:`~finpod.env.Rollout` (its
    ``returns`` are the candidate's returns for the DSR/PBO).
    """
    policy = EnsemblePolicy(members, market, device=device)
    out = rollout(policy, market, policy.config, device=device)
    return score(out, score_name), out
