"""One train-and-score loop over a member axis: K members learn, then are scored on
validation, segment after segment.

A *learner* is what learns (:class:`Learner`): a single agent is one member, L fused
learners are one member, a population is K members. A *scorer* scores every member on
the validation split at once (:class:`Validation`). :func:`run_loop` alternates the two
and keeps, per member and in memory: the training stats and validation scores as metric
rows, the history of scores, the candidates of the best-on-validation selection, and the
best weights. What a run does besides (a progress bar, a run directory, TensorBoard, a
pod's live progress, a time budget) plugs in as :class:`Callback`\\ s.

Rows of a segment, per member: the learner's training stats, then ``sps`` (env steps per
second of learning), its step sizes and ``updates_per_env_step``; after validation the
scorer's rows, the score first.

With ``fail_non_finite`` a member whose losses, weights or validation returns are not
finite fails (its reason in :attr:`LoopResult.failures`) and gets no more rows; the others
go on, and the loop ends when every member has failed. Without it, a non-finite score is
logged but is never a candidate nor the best.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

__all__ = [
    "Callback",
    "Learner",
    "LoopResult",
    "Scorer",
    "Segment",
    "Validation",
    "run_loop",
    "update_ratio",
]

#: Training stats that are not losses: NaN by design when no episode finished.
NOT_LOSSES = ("episode_return", "episodes")

#: A metric row of a member: (env_steps, wall seconds, split, metric, value).
Row = tuple[int, float, str, str, float]


class Learner(Protocol):
    """What learns: K members trained together."""

    members: int

    def learn(self, steps: int) -> dict[str, np.ndarray]:
        """Train ``steps`` env steps per member; training stats ``(K,) float64`` each."""

    def env_steps(self) -> np.ndarray:
        """Env steps behind each member's weights ``(K,) int64``."""

    def updates(self) -> np.ndarray:
        """Gradient steps behind each member's weights ``(K,)``."""

    def weight_failures(self) -> list[str]:
        """Per member, ``""`` when every network weight is finite, else which is not."""

    def state(self, k: int) -> dict[str, torch.Tensor]:
        """Member ``k``'s state dict, copied to the host."""

    def step_sizes(self) -> dict[str, np.ndarray]:
        """Each optimizer's step size by hyperparameter name, ``(K,) float64`` each."""


@dataclass
class Validation:
    """Every member scored on the validation split."""

    scores: np.ndarray
    """``(K,) float64``; NaN for a member not scored."""
    returns: list[np.ndarray | None]
    """Per member, the per-bar validation returns the score ranks (or None)."""
    rows: list[dict[str, float]]
    """Per member, validation metric → value, the score first."""


class Scorer(Protocol):
    """Scores the members marked in ``alive`` ``(K,) bool`` on validation."""

    def __call__(self, alive: np.ndarray) -> Validation: ...


@dataclass
class LoopResult:
    """What :func:`run_loop` produced, per member (lists indexed by member)."""

    ids: list[str]
    """Name of each member (its pod id)."""
    history: list[list[dict[str, float]]]
    """``[{"env_steps", "score"}]`` per evaluation, after any history passed in."""
    metrics: list[list[Row]]
    """Metric rows of this call."""
    segments: list[list[dict[str, float]]] = field(default_factory=list)
    """``[{"env_steps", **train stats}]`` per segment."""
    candidates: list[list[tuple[str, float, np.ndarray]]] = field(default_factory=list)
    """``(id, score, per-bar validation returns)`` of every finite evaluation."""
    best_score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Best finite validation score (``-inf`` before any)."""
    best_env_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    best_updates: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    best_state: list[dict[str, torch.Tensor] | None] = field(default_factory=list)
    """Host state dict of each member at its best score (with ``keep_best``)."""
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Last validation score (NaN for a failed member)."""
    returns: list[np.ndarray | None] = field(default_factory=list)
    """Last per-bar validation returns (None for a failed member)."""
    scored: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Segments after which the member was scored with finite results."""
    failures: list[str] = field(default_factory=list)
    """Why each member failed (``"loss q = nan at epoch 2"``), ``""`` if it did not."""
    start_env_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Env steps of each member when the loop started."""

    @classmethod
    def empty(
        cls, ids: Sequence[str], history: Sequence[Sequence[dict[str, float]]] | None = None
    ) -> LoopResult:
        k = len(ids)
        hist = [[dict(h) for h in history[i]] for i in range(k)] if history else [[]] * k
        return cls(
            ids=list(ids),
            history=[list(h) for h in hist],
            metrics=[[] for _ in range(k)],
            segments=[[] for _ in range(k)],
            candidates=[[] for _ in range(k)],
            best_score=np.full(k, -math.inf),
            best_env_steps=np.zeros(k, np.int64),
            best_updates=np.zeros(k, np.int64),
            best_state=[None] * k,
            scores=np.full(k, math.nan),
            returns=[None] * k,
            scored=np.zeros(k, np.int64),
            failures=[""] * k,
            start_env_steps=np.zeros(k, np.int64),
        )


@dataclass
class Segment:
    """What callbacks see after a segment (arrays ``(K,)``)."""

    index: int
    """Segments done in this call (1-based)."""
    wall_s: float
    """Seconds since the loop's start, after validation."""
    env_steps: np.ndarray
    updates: np.ndarray
    stats: dict[str, np.ndarray]
    rows: list[list[Row]]
    """Metric rows this segment added, per member."""
    validated: np.ndarray
    """Scored on validation this segment (bool)."""
    candidate: np.ndarray
    """Its score and returns were finite: a candidate of the selection (bool)."""
    improved: np.ndarray
    """A new best score (bool)."""
    result: LoopResult


class Callback:
    """A hook of :func:`run_loop`: every method is optional."""

    def on_start(self, result: LoopResult) -> None:
        """Before the first segment (may seed ``result`` with an earlier run's best)."""

    def on_segment(self, segment: Segment) -> bool:
        """After each segment; ``True`` stops the loop after it."""
        return False

    def on_end(self, result: LoopResult) -> None:
        """After the last segment, when the loop ended without an error."""

    def close(self) -> None:
        """Always, last (release what the callback holds)."""


def run_loop(
    learner: Learner,
    scorer: Scorer | None,
    *,
    ids: Sequence[str],
    steps_per_segment: int,
    segments: int | None = None,
    total_steps: int | None = None,
    callbacks: Sequence[Callback] = (),
    history: Sequence[Sequence[dict[str, float]]] | None = None,
    fail_non_finite: bool = False,
    keep_best: bool = True,
    t0: float | None = None,
) -> LoopResult:
    """Train ``learner`` and score it with ``scorer`` after every segment.

    Args:
        ids: name of each of the learner's K members (candidate ids ``<id>@<env_steps>``).
        steps_per_segment: env steps each member learns per segment.
        segments: run exactly this many segments, or
        total_steps: train until member 0 has this many env steps (the last segment
            shorter to end there; a restored learner continues from its counter).
        callbacks: called in order after each segment (see :class:`Callback`).
        history: earlier ``{"env_steps", "score"}`` of each member, kept before this
            call's.
        fail_non_finite: a member whose losses, weights or validation returns are not
            finite fails (see the module doc).
        keep_best: keep the host state dict of each member's best (:attr:`best_state`).
        t0: ``time.perf_counter()`` the wall seconds of the rows count from.
    """
    if (segments is None) == (total_steps is None):
        raise ValueError("give one of segments and total_steps")
    t0 = time.perf_counter() if t0 is None else t0
    result = LoopResult.empty(ids, history)
    result.start_env_steps = np.asarray(learner.env_steps(), np.int64).copy()
    try:
        for cb in callbacks:
            cb.on_start(result)
        for index in itertools.count(1):
            done = int(learner.env_steps()[0])
            if segments is not None and index > segments:
                break
            if total_steps is not None and done >= total_steps:
                break
            # The last segment of a ``total_steps`` run ends at it.
            chunk = steps_per_segment
            if total_steps is not None:
                chunk = min(steps_per_segment, total_steps - done)
            segment = _segment(
                learner, scorer, result, index, chunk, t0, fail_non_finite, keep_best
            )
            stop = False
            for cb in callbacks:
                stop = bool(cb.on_segment(segment)) or stop
            if stop or (fail_non_finite and all(result.failures)):
                break
        for cb in callbacks:
            cb.on_end(result)
    finally:
        for cb in callbacks:
            cb.close()
    return result


def _segment(
    learner: Learner,
    scorer: Scorer | None,
    result: LoopResult,
    index: int,
    chunk: int,
    t0: float,
    fail_non_finite: bool,
    keep_best: bool,
) -> Segment:
    """One segment: learn, check, score, record (see :func:`run_loop`)."""
    k_members = learner.members
    before = np.asarray(learner.env_steps(), np.int64).copy()
    learn_t0 = time.perf_counter()
    stats = learner.learn(chunk)
    learn_s = max(time.perf_counter() - learn_t0, 1e-9)
    steps = np.asarray(learner.env_steps(), np.int64).copy()
    updates = np.asarray(learner.updates()).copy()
    wall = time.perf_counter() - t0
    charts = {
        "sps": (steps - before) / learn_s,
        **learner.step_sizes(),
        **update_ratio(updates, steps),
    }
    failures = result.failures
    alive = np.array([not f for f in failures])
    rows: list[list[Row]] = [[] for _ in range(k_members)]
    for k in np.flatnonzero(alive):
        result.segments[k].append({"env_steps": int(steps[k]), **_at(stats, k)})
        for key, value in stats.items():
            rows[k].append((int(steps[k]), wall, "train", key, float(value[k])))
            if fail_non_finite and key not in NOT_LOSSES and not math.isfinite(value[k]):
                failures[k] = f"loss {key} = {value[k]} at epoch {index}"
                break
        if not failures[k]:
            rows[k].extend(
                (int(steps[k]), wall, "train", key, float(value[k]))
                for key, value in charts.items()
            )
    if fail_non_finite:
        for k, reason in enumerate(learner.weight_failures()):
            if alive[k] and not failures[k] and reason:
                failures[k] = f"{reason} at epoch {index}"
    validated = np.zeros(k_members, bool)
    candidate = np.zeros(k_members, bool)
    improved = np.zeros(k_members, bool)
    scoring = np.array([not f for f in failures])
    if scorer is not None and scoring.any():
        valid = scorer(scoring)
        wall = time.perf_counter() - t0
        for k in np.flatnonzero(scoring):
            score, returns = float(valid.scores[k]), valid.returns[k]
            finite = math.isfinite(score) and (returns is None or bool(np.isfinite(returns).all()))
            if not finite and fail_non_finite:
                failures[k] = f"validation returns at epoch {index}"
                continue
            validated[k], candidate[k] = True, finite
            result.history[k].append({"env_steps": int(steps[k]), "score": score})
            rows[k].extend(
                (int(steps[k]), wall, "validation", name, float(value))
                for name, value in valid.rows[k].items()
            )
            result.scores[k], result.returns[k] = score, returns
            if not finite:
                continue
            result.scored[k] = index
            if returns is not None:
                cid = f"{result.ids[k]}@{int(steps[k])}"
                result.candidates[k].append((cid, score, np.asarray(returns, np.float64)))
            if score > result.best_score[k]:
                improved[k] = True
                result.best_score[k], result.best_env_steps[k] = score, steps[k]
                result.best_updates[k] = updates[k]
                if keep_best:
                    result.best_state[k] = learner.state(k)
    for k in range(k_members):
        if failures[k]:
            result.scores[k], result.returns[k] = math.nan, None
        result.metrics[k].extend(rows[k])
    return Segment(
        index=index,
        wall_s=wall,
        env_steps=steps,
        updates=updates,
        stats=stats,
        rows=rows,
        validated=validated,
        candidate=candidate,
        improved=improved,
        result=result,
    )


def _at(stats: dict[str, np.ndarray], k: int) -> dict[str, float]:
    return {key: float(value[k]) for key, value in stats.items()}


def update_ratio(updates: Any, env_steps: Any) -> dict[str, Any]:
    """``{"updates_per_env_step": gradient steps / env steps}`` behind an agent's weights
    (scalars, or ``(K,)`` arrays of a population's members); 0 before any env step."""
    u = np.asarray(updates, dtype=np.float64)
    s = np.asarray(env_steps, dtype=np.float64)
    ratio = np.where(s > 0, u / np.maximum(s, 1.0), 0.0)
    return {"updates_per_env_step": float(ratio) if ratio.ndim == 0 else ratio}
