"""The training loop: learn in segments, evaluate on validation, log, checkpoint.

``train`` runs ``agent.learn`` in segments of ``eval_every`` env steps. After each
segment it scores the agent with ``eval_fn`` (on the validation split for trading), logs
training statistics and the score to ``metrics.csv``, saves ``checkpoints/last.safetensors``
and, when the score improved, the best-on-validation checkpoint. Every checkpoint scored
is a candidate of that best-on-validation selection: when ``eval_fn`` also gives its
per-bar validation returns, they are appended to the run's candidate record
(:mod:`finpod.runs.candidates`) for the Deflated Sharpe and the PBO. Every row of
``metrics.csv`` is mirrored into ``tensorboard/<pod_id>/`` event files, with the agent's
hyperparameters (:mod:`finpod.runs.tensorboard`).

Rows of a segment: the agent's training stats, ``sps`` (env steps per second of
``learn``) and its step sizes (``learning_rate``, or ``actor_lr``/``critic_lr``/…);
after validation the score and, with :func:`~finpod.agents.validation.make_trading_eval`,
the validation ``return``, ``turnover`` and ``costs``. Each segment starts from an env
reset seeded by the agent's own generator, so a run restored from ``last.safetensors``
continues exactly as the uninterrupted run would have (CPU).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from finpod.agents.checkpoint import save_checkpoint
from finpod.agents.progress import StepCountingEnv, TrainingBar
from finpod.agents.validation import Evaluation, evaluate, make_trading_eval
from finpod.atomic import atomic_write_text
from finpod.runs import (
    CHECKPOINT_DIR,
    CURVES_FILE,
    LOG_FILE,
    METRICS_FILE,
    METRICS_HEADER,
    TENSORBOARD_DIR,
    EventMirror,
    append_metrics,
    load_candidates,
    plot_learning_curves,
    read_metrics,
    record_candidate,
    write_metrics,
)
from finpod.runs.metrics_file import cut_torn_tail

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv

__all__ = [
    "Evaluation",
    "TrainResult",
    "checkpoint_id",
    "learning_rates",
    "make_trading_eval",
    "population_learning_rates",
    "train",
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
    # The env settings the agent trains with, recorded in every checkpoint.
    result = TrainResult()
    log_lines: list[str] = []
    if run_dir is not None:
        # Resuming into the same run directory keeps the earlier curves and log.
        metrics_file = run_dir / METRICS_FILE
        prior_rows = read_metrics(metrics_file)
        prior = run_dir / LOG_FILE
        if prior.exists():
            log_lines = prior.read_text(encoding="utf-8").splitlines()
        # ... and the best-on-validation checkpoint of before the interruption: a resumed
        # run replaces it only with a better score. Rows past the restored agent's counter
        # (written after its last checkpoint) are dropped; they are trained again.
        kept = [r for r in prior_rows if r[0] != pod_id or r[1] <= agent.env_steps]
        if len(kept) != len(prior_rows):
            write_metrics(metrics_file, kept)
        cut_torn_tail(metrics_file)
        best_file = run_dir / CHECKPOINT_DIR / f"{pod_id}.safetensors"
        for r_pod, steps, _, split, metric, score in kept:
            if r_pod == pod_id and split == "validation" and metric == score_name:
                result.history.append({"env_steps": steps, "score": score})
                if score > result.best_score and best_file.exists():
                    result.best_score, result.best_env_steps = score, steps
                    result.best_checkpoint = best_file

    def emit(line: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        log_lines.append(f"{stamp} {line}")
        if log is not None:
            log(line)
        if run_dir is not None:
            atomic_write_text(run_dir / LOG_FILE, "\n".join(log_lines) + "\n")

    start = time.perf_counter()
    events = None
    if run_dir is not None and tensorboard:
        events = EventMirror(run_dir / TENSORBOARD_DIR, wall_origin=time.time())
        if agent.env_steps > 0:
            # A resumed run trains again the steps after its checkpoint: hide those events.
            events.purge_after(pod_id, agent.env_steps)
    written = 0  # rows of result.metrics already in metrics.csv
    bar = TrainingBar(progress, total_steps, agent.env_steps)
    # The bar moves with every env step, not once per segment.
    counted = StepCountingEnv(env, on_step=bar.on_step) if progress else env
    emit(f"{pod_id}: training {agent.algorithm} to {total_steps} env steps on {env.num_envs} envs")
    with bar, _Closing(events):
        while agent.env_steps < total_steps:
            agent.reset_rollout()
            chunk = min(eval_every, total_steps - agent.env_steps)
            before, learn_t0 = agent.env_steps, time.perf_counter()
            stats = agent.learn(counted, chunk)
            wall = time.perf_counter() - start
            sps = (agent.env_steps - before) / max(time.perf_counter() - learn_t0, 1e-9)
            result.segments.append({"env_steps": agent.env_steps, **stats})
            charts = {
                "sps": sps,
                **learning_rates(agent),
                **update_ratio(agent.updates, agent.env_steps),
            }
            for name, value in {**stats, **charts}.items():
                result.metrics.append(_row(pod_id, agent.env_steps, wall, "train", name, value))
            line = f"{pod_id}: {agent.env_steps} steps " + " ".join(
                f"{k}={v:.4g}" for k, v in stats.items()
            )
            if eval_fn is not None:
                score, returns = evaluate(eval_fn, agent)
                finite = math.isfinite(score) and (
                    returns is None or bool(np.isfinite(returns).all())
                )
                if finite and returns is not None:
                    cid = checkpoint_id(pod_id, agent.env_steps)
                    result.candidates.append((cid, float(score), np.asarray(returns, float)))
                    if run_dir is not None:
                        record_candidate(run_dir, cid, returns, score=score, kind="checkpoint")
                result.history.append({"env_steps": agent.env_steps, "score": score})
                val_wall = time.perf_counter() - start
                scored = {score_name: score, **(getattr(eval_fn, "activity", None) or {})}
                for name, value in scored.items():
                    result.metrics.append(
                        _row(pod_id, agent.env_steps, val_wall, "validation", name, value)
                    )
                line += f" | validation {score_name}={score:.4g}"
                if not finite:
                    line += " (non-finite: not a candidate)"
                elif score > result.best_score or result.best_checkpoint is None:
                    result.best_score, result.best_env_steps = score, agent.env_steps
                    result.best_updates = agent.updates
                    result.best_state = {
                        k: v.detach().to("cpu", copy=True) for k, v in agent.state_dict().items()
                    }
                    if run_dir is not None:
                        result.best_checkpoint = save_checkpoint(
                            agent,
                            run_dir / CHECKPOINT_DIR / f"{pod_id}.safetensors",
                            env=env.config,
                        )
                    line += " (best)"
            if run_dir is not None:
                result.last_checkpoint = save_checkpoint(
                    agent,
                    run_dir / CHECKPOINT_DIR / "last.safetensors",
                    include_buffer=resume_buffer,
                    env=env.config,
                )
                if eval_fn is None:
                    result.best_checkpoint = save_checkpoint(
                        agent, run_dir / CHECKPOINT_DIR / f"{pod_id}.safetensors", env=env.config
                    )
                new = [tuple(r[c] for c in METRICS_HEADER) for r in result.metrics[written:]]
                append_metrics(run_dir / METRICS_FILE, new)
                if events is not None:
                    hparams = None if written else _hparams(agent, env)
                    events = _mirror(events, pod_id, agent.env_steps, new, hparams, emit)
                written = len(result.metrics)
            emit(line)
            bar.update(agent.env_steps, result.best_score)
    if run_dir is not None and result.metrics:
        plot_learning_curves(
            read_metrics(run_dir / METRICS_FILE),
            run_dir / CURVES_FILE,
            score_name,
            title=f"learning curves — {pod_id}",
            train_panel=True,
        )
    recorded = len(load_candidates(run_dir)) if run_dir is not None else 0
    result.candidates_evaluated = max(recorded, len(result.history))
    return result


def update_ratio(updates: Any, env_steps: Any) -> dict[str, Any]:
    """``{"updates_per_env_step": gradient steps / env steps}`` behind an agent's weights
    (scalars, or ``(K,)`` arrays of a population's members); 0 before any env step."""
    u = np.asarray(updates, dtype=np.float64)
    s = np.asarray(env_steps, dtype=np.float64)
    ratio = np.where(s > 0, u / np.maximum(s, 1.0), 0.0)
    return {"updates_per_env_step": float(ratio) if ratio.ndim == 0 else ratio}


def learning_rates(agent: Any) -> dict[str, float]:
    """Step size of each of ``agent``'s optimizers, named by its hyperparameter
    (``learning_rate`` for PPO and A2C; ``actor_lr``, ``critic_lr``, ``alpha_lr``)."""
    population = getattr(agent, "population", None)
    if population is None:
        return {}
    return {k: float(v[0]) for k, v in population_learning_rates(population).items()}


def population_learning_rates(population: Any) -> dict[str, np.ndarray]:
    """:func:`learning_rates` of every member of a population, each ``(K,) float64``."""
    out = {}
    for hp_name in population.lr_fields.values():
        if hp_name in population.hp:
            out[hp_name] = population.hp[hp_name].detach().to("cpu", torch.float64).numpy()
        else:
            out[hp_name] = np.array([float(getattr(h, hp_name)) for h in population.hparams])
    return out


def _hparams(agent: Any, env: VecEnv) -> dict[str, Any]:
    """What TensorBoard records of a single agent's settings."""
    out: dict[str, Any] = {"algorithm": agent.algorithm, "num_envs": env.num_envs}
    if dataclasses.is_dataclass(getattr(agent, "hparams", None)):
        out.update(dataclasses.asdict(agent.hparams))
    return out


def _mirror(
    events: EventMirror,
    pod_id: str,
    env_steps: int,
    rows: list[tuple],
    hparams: dict[str, Any] | None,
    emit: Callable[[str], None],
) -> EventMirror | None:
    """Write ``rows`` (and ``hparams``) to the event files; ``None`` once that failed (the
    event files mirror metrics.csv: a failure there is told once and never ends the run)."""
    try:
        events.write_rows(rows)
        if hparams is not None:
            events.write_hparams(pod_id, hparams, env_steps)
    except Exception as err:  # noqa: BLE001 - a mirror must never stop a training run
        emit(f"TensorBoard event files not written: {err}")
        return None
    return events


class _Closing:
    """Closes an :class:`~finpod.runs.EventMirror` (or nothing) on leaving the block."""

    def __init__(self, events: EventMirror | None) -> None:
        self.events = events

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        if self.events is not None:
            self.events.close()


def _row(
    pod_id: str, steps: int, wall: float, split: str, metric: str, value: float
) -> dict[str, Any]:
    return {
        "pod_id": pod_id,
        "env_steps": int(steps),
        "wall_s": round(float(wall), 3),
        "split": split,
        "metric": metric,
        "value": float(value),
    }
