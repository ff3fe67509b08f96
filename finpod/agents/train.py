"""A single agent's run: learn in segments, evaluate on validation, log, checkpoint.

``train`` runs the train-and-score loop (:func:`finpod.agents.loop.run_loop`) over the
agent as a learner of one member, with the run's callbacks
(:mod:`finpod.agents.callbacks`): ``agent.learn`` in segments of ``eval_every`` env steps.
After each segment it scores the agent with ``eval_fn`` (on the validation split for
trading), logs training statistics and the score to ``metrics.csv``, saves
``checkpoints/last.safetensors`` and, when the score improved, the best-on-validation
checkpoint. Every checkpoint scored is a candidate of that best-on-validation selection:
when ``eval_fn`` also gives its per-bar validation returns, they are appended to the run's
candidate record (:mod:`finpod.runs.candidates`) for the Deflated Sharpe and the PBO.
Every row of ``metrics.csv`` is mirrored into ``tensorboard/<pod_id>/`` event files, with
the agent's hyperparameters (:mod:`finpod.runs.tensorboard`).

Rows of a segment: the agent's training stats, ``sps`` (env steps per second of
``learn``) and its step sizes (``learning_rate``, or ``actor_lr``/``critic_lr``/…);
after validation the score and, with :func:`~finpod.agents.validation.make_trading_eval`,
the validation ``return``, ``turnover`` and ``costs``. Each segment starts from an env
reset seeded by the agent's own generator, so a run restored from ``last.safetensors``
continues exactly as the uninterrupted run would have (CPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from finpod.agents.callbacks import (
    LogLines,
    ProgressBar,
    RunDirWriter,
    RunLog,
    TensorBoardMirror,
    metric_row,
)
from finpod.agents.learners import AgentLearner, EvalScorer, population_learning_rates
from finpod.agents.loop import Callback, run_loop, update_ratio
from finpod.agents.progress import StepCountingEnv, TrainingBar
from finpod.agents.validation import Evaluation, make_trading_eval
from finpod.runs import load_candidates

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv

__all__ = [
    "Evaluation",
    "TrainResult",
    "checkpoint_id",
    "make_trading_eval",
    "population_learning_rates",
    "train",
    "update_ratio",
]


@dataclass
class TrainResult:
    """What a training run produced.

    Attributes:
        best_score: best validation score seen (``-inf`` without ``eval_fn``).
        best_env_steps: agent env steps at the best score.
        best_updates: gradient steps at the best score (0 when resumed past it).
        best_checkpoint: path of the best-on-validation checkpoint (None without run_dir).
        last_checkpoint: path of the latest checkpoint, for resuming (None without run_dir).
        history: ``[{"env_steps", "score"}]`` one per evaluation.
        segments: ``[{"env_steps", **train stats}]`` one per segment (losses etc.).
        metrics: rows of ``metrics.csv`` as dicts.
        candidates_evaluated: checkpoints the best-on-validation selection chose among
            (every validation evaluation of the run, a resumed run's earlier ones included);
            the N of the Deflated Sharpe.
        best_state: the best-on-validation agent's state dict (host tensors), kept in
            memory whether or not a run directory is written.
        candidates: ``(id, score, per-bar validation returns)`` of every finite
            evaluation of this call, in memory (a run directory also records them).
    """

    best_score: float = -math.inf
    best_env_steps: int = 0
    best_updates: int = 0
    best_checkpoint: Path | None = None
    last_checkpoint: Path | None = None
    history: list[dict[str, float]] = field(default_factory=list)
    segments: list[dict[str, float]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    candidates_evaluated: int = 0
    best_state: dict[str, Any] | None = None
    candidates: list[tuple[str, float, np.ndarray]] = field(default_factory=list)


def checkpoint_id(pod_id: str, env_steps: int) -> str:
    """Candidate id of the checkpoint of ``pod_id`` at ``env_steps``."""
    return f"{pod_id}@{int(env_steps)}"


def train(
    agent: Any,
    env: VecEnv,
    *,
    total_steps: int,
    eval_fn: Callable[[Any], Evaluation] | None = None,
    eval_every: int = 100_000,
    run_dir: str | Path | None = None,
    progress: bool = True,
    pod_id: str = "agent",
    score_name: str = "sharpe",
    log: Callable[[str], None] | None = None,
    resume_buffer: bool = False,
    tensorboard: bool = True,
) -> TrainResult:
    """Train ``agent`` on ``env`` until ``agent.env_steps ≥ total_steps``.

    Args:
        total_steps: target of the agent's env-step counter (a restored agent continues
            from its counter).
        eval_fn: ``agent -> score`` or ``agent -> (score, returns)`` (higher is better),
            called after each segment; ``returns`` (T_val,) are the per-bar validation
            returns, recorded as a candidate in ``run_dir`` (see :mod:`finpod.runs.candidates`).
            A checkpoint whose returns or score are not finite is never selected.
        eval_every: env steps per segment.
        run_dir: where ``metrics.csv``, ``learning_curves.png``, ``train.log`` and
            ``checkpoints/{pod_id,last}.safetensors`` go (nothing is written if None).
        progress: show a rich progress bar.
        pod_id: name of the agent in metrics and checkpoints.
        score_name: name of the validation metric in ``metrics.csv``.
        log: extra sink for log lines (e.g. the console).
        resume_buffer: also store an off-policy agent's replay buffer in
            ``last.safetensors`` so a resumed run continues exactly (large files).
        tensorboard: mirror the metrics into ``run_dir``'s TensorBoard event files.

    An ``eval_fn`` with an ``activity`` attribute (a dict of name → number, set by each
    call, as :func:`~finpod.agents.validation.make_trading_eval`'s has) adds those as
    validation rows.
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    log_to = RunLog(run_dir, log)
    callbacks: list[Callback] = []
    writer = None
    if run_dir is not None:
        writer = RunDirWriter(
            run_dir,
            agent,
            env.config,
            pod_id=pod_id,
            score_name=score_name,
            scored=eval_fn is not None,
            resume_buffer=resume_buffer,
        )
        callbacks.append(writer)
        if tensorboard:
            callbacks.append(TensorBoardMirror(run_dir, agent, env.num_envs, pod_id, log_to))
    bar = TrainingBar(progress, total_steps, agent.env_steps)
    callbacks += [LogLines(log_to, pod_id, score_name), ProgressBar(bar)]
    # The bar moves with every env step, not once per segment.
    counted = StepCountingEnv(env, on_step=bar.on_step) if progress else env
    log_to.emit(
        f"{pod_id}: training {agent.algorithm} to {total_steps} env steps on {env.num_envs} envs"
    )
    loop = run_loop(
        AgentLearner(agent, counted),
        None if eval_fn is None else EvalScorer(eval_fn, agent, score_name),
        ids=[pod_id],
        steps_per_segment=eval_every,
        total_steps=total_steps,
        callbacks=callbacks,
    )
    recorded = len(load_candidates(run_dir)) if run_dir is not None else 0
    return TrainResult(
        best_score=float(loop.best_score[0]),
        best_env_steps=int(loop.best_env_steps[0]),
        best_updates=int(loop.best_updates[0]),
        best_checkpoint=None if writer is None else writer.best_checkpoint,
        last_checkpoint=None if writer is None else writer.last_checkpoint,
        history=loop.history[0],
        segments=loop.segments[0],
        metrics=[metric_row(pod_id, r) for r in loop.metrics[0]],
        candidates_evaluated=max(recorded, len(loop.history[0])),
        best_state=loop.best_state[0],
        candidates=loop.candidates[0],
    )
