"""What a single agent's run does besides training, as :class:`~finpod.agents.loop.Callback`\\ s
of the loop: its log, its run directory, its TensorBoard mirror, its progress bar, and a
time budget.

The run directory (:class:`RunDirWriter`) holds ``metrics.csv``, ``train.log``,
``checkpoints/{pod_id,last}.safetensors``, the candidate record and the learning curves.
Resuming into it keeps the earlier rows, log and best-on-validation checkpoint; rows
written after the restored agent's last checkpoint are dropped (they are trained again).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from finpod.agents import deadline
from finpod.agents.checkpoint import save_checkpoint
from finpod.agents.loop import Callback, LoopResult, Row, Segment
from finpod.agents.progress import TrainingBar
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
    plot_learning_curves,
    read_metrics,
    record_candidate,
    write_metrics,
)
from finpod.runs.metrics_file import cut_torn_tail

__all__ = [
    "LogLines",
    "ProgressBar",
    "RunDirWriter",
    "RunLog",
    "TensorBoardMirror",
    "TimeBudget",
    "metric_row",
]


def metric_row(pod_id: str, row: Row) -> dict[str, Any]:
    """A loop's metric row as a ``metrics.csv`` row (wall seconds to the millisecond)."""
    steps, wall, split, metric, value = row
    return {
        "pod_id": pod_id,
        "env_steps": int(steps),
        "wall_s": round(float(wall), 3),
        "split": split,
        "metric": metric,
        "value": float(value),
    }


class RunLog:
    """Time-stamped log lines: kept, rewritten to ``run_dir/train.log`` (continuing an
    earlier run's) and passed to ``sink`` (e.g. the console)."""

    def __init__(self, run_dir: Path | None, sink: Callable[[str], None] | None) -> None:
        self.run_dir, self.sink = run_dir, sink
        self.lines: list[str] = []
        if run_dir is not None and (run_dir / LOG_FILE).exists():
            self.lines = (run_dir / LOG_FILE).read_text(encoding="utf-8").splitlines()

    def emit(self, line: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.lines.append(f"{stamp} {line}")
        if self.sink is not None:
            self.sink(line)
        if self.run_dir is not None:
            atomic_write_text(self.run_dir / LOG_FILE, "\n".join(self.lines) + "\n")


class LogLines(Callback):
    """One log line per segment: member 0's stats, and its validation score."""

    def __init__(self, log: RunLog, pod_id: str, score_name: str) -> None:
        self.log, self.pod_id, self.score_name = log, pod_id, score_name

    def on_segment(self, segment: Segment) -> bool:
        line = f"{self.pod_id}: {int(segment.env_steps[0])} steps " + " ".join(
            f"{k}={float(v[0]):.4g}" for k, v in segment.stats.items()
        )
        if segment.validated[0]:
            line += f" | validation {self.score_name}={segment.result.scores[0]:.4g}"
            if not segment.candidate[0]:
                line += " (non-finite: not a candidate)"
            elif segment.improved[0]:
                line += " (best)"
        self.log.emit(line)
        return False


class RunDirWriter(Callback):
    """A single agent's run directory (see the module doc); ``scored``: the run has a
    validation score (without one, every segment's checkpoint is the best)."""

    def __init__(
        self,
        run_dir: Path,
        agent: Any,
        env_config: Any,
        *,
        pod_id: str,
        score_name: str,
        scored: bool,
        resume_buffer: bool,
    ) -> None:
        self.run_dir, self.agent, self.env_config = run_dir, agent, env_config
        self.pod_id, self.score_name = pod_id, score_name
        self.scored, self.resume_buffer = scored, resume_buffer
        self.best_file = run_dir / CHECKPOINT_DIR / f"{pod_id}.safetensors"
        self.best_checkpoint: Path | None = None
        self.last_checkpoint: Path | None = None
        self.wall_before = 0.0
        """Wall seconds of the sessions before a resume: ``wall_s`` continues from them."""

    def on_start(self, result: LoopResult) -> None:
        metrics_file = self.run_dir / METRICS_FILE
        prior_rows = read_metrics(metrics_file)
        steps = self.agent.env_steps
        kept = [r for r in prior_rows if r[0] != self.pod_id or r[1] <= steps]
        if len(kept) != len(prior_rows):
            write_metrics(metrics_file, kept)
        cut_torn_tail(metrics_file)
        self.wall_before = max((r[2] for r in kept if r[0] == self.pod_id), default=0.0)
        # The best of before the interruption: a resumed run replaces it only with a
        # better score.
        for r_pod, r_steps, _, split, metric, score in kept:
            if r_pod == self.pod_id and split == "validation" and metric == self.score_name:
                result.history[0].append({"env_steps": r_steps, "score": score})
                if score > result.best_score[0] and self.best_file.exists():
                    result.best_score[0], result.best_env_steps[0] = score, r_steps
                    self.best_checkpoint = self.best_file

    def on_segment(self, segment: Segment) -> bool:
        result = segment.result
        returns = result.returns[0]
        if segment.candidate[0] and returns is not None:
            cid = result.candidates[0][-1][0]
            record_candidate(
                self.run_dir, cid, returns, score=float(result.scores[0]), kind="checkpoint"
            )
        if segment.improved[0] or not self.scored:
            self.best_checkpoint = save_checkpoint(self.agent, self.best_file, env=self.env_config)
        self.last_checkpoint = save_checkpoint(
            self.agent,
            self.run_dir / CHECKPOINT_DIR / "last.safetensors",
            include_buffer=self.resume_buffer,
            env=self.env_config,
        )
        rows = [metric_row(self.pod_id, r) for r in segment.rows[0]]
        for row in rows:  # a resumed run's clock continues where the last session's stopped
            row["wall_s"] = round(row["wall_s"] + self.wall_before, 3)
        append_metrics(
            self.run_dir / METRICS_FILE, [tuple(r[c] for c in METRICS_HEADER) for r in rows]
        )
        return False

    def on_end(self, result: LoopResult) -> None:
        if result.metrics[0]:
            plot_learning_curves(
                read_metrics(self.run_dir / METRICS_FILE),
                self.run_dir / CURVES_FILE,
                self.score_name,
                title=f"learning curves — {self.pod_id}",
                train_panel=True,
            )


class TensorBoardMirror(Callback):
    """Member 0's rows mirrored into ``run_dir/tensorboard/<pod_id>/`` event files, with
    the agent's hyperparameters. A failure there is told once and never ends the run."""

    def __init__(self, run_dir: Path, agent: Any, num_envs: int, pod_id: str, log: RunLog) -> None:
        self.agent, self.num_envs, self.pod_id, self.log = agent, num_envs, pod_id, log
        self.events: EventMirror | None = EventMirror(
            run_dir / TENSORBOARD_DIR, wall_origin=time.time()
        )
        self.hparams_written = False
        if agent.env_steps > 0:
            # A resumed run trains again the steps after its checkpoint: hide those events.
            self.events.purge_after(pod_id, agent.env_steps)

    def on_segment(self, segment: Segment) -> bool:
        if self.events is None:
            return False
        rows = [metric_row(self.pod_id, r) for r in segment.rows[0]]
        try:
            self.events.write_rows([tuple(r[c] for c in METRICS_HEADER) for r in rows])
            if not self.hparams_written:
                self.hparams_written = True
                self.events.write_hparams(self.pod_id, self.hparams(), int(segment.env_steps[0]))
        except Exception as err:  # noqa: BLE001 - a mirror must never stop a training run
            self.log.emit(f"TensorBoard event files not written: {err}")
            self.close()
            self.events = None
        return False

    def hparams(self) -> dict[str, Any]:
        """What TensorBoard records of a single agent's settings."""
        out: dict[str, Any] = {"algorithm": self.agent.algorithm, "num_envs": self.num_envs}
        if dataclasses.is_dataclass(getattr(self.agent, "hparams", None)):
            out.update(dataclasses.asdict(self.agent.hparams))
        return out

    def close(self) -> None:
        if self.events is not None:
            self.events.close()


class ProgressBar(Callback):
    """The console's :class:`~finpod.agents.progress.TrainingBar`: moved with every env
    step by its ``on_step`` hook, set to member 0's counter and best after a segment."""

    def __init__(self, bar: TrainingBar) -> None:
        self.bar = bar

    def on_start(self, result: LoopResult) -> None:
        self.bar.__enter__()

    def on_segment(self, segment: Segment) -> bool:
        self.bar.update(int(segment.env_steps[0]), float(segment.result.best_score[0]))
        return False

    def close(self) -> None:
        self.bar.__exit__()


#: Share of a time-capped job's seconds kept for its last validation and its report
#: (between :data:`MIN_RESERVE_S` and :data:`MAX_RESERVE_S`).
RESERVE_SHARE = 0.08
MIN_RESERVE_S, MAX_RESERVE_S = 1.0, 30.0


class TimeBudget(Callback):
    """Stops the loop once ``out_of_time(wall seconds, segments done)`` says so; with
    ``max_seconds``, also sets the process's learning deadline
    (:mod:`finpod.agents.deadline`) that far after ``t0`` minus a reserve for the last
    validation, so ``learn`` itself stops on time and the segment it cut is still scored."""

    def __init__(
        self,
        out_of_time: Callable[[float, int], bool],
        max_seconds: float | None = None,
        t0: float | None = None,
    ) -> None:
        self.out_of_time = out_of_time
        self.max_seconds = max_seconds
        self.t0 = time.perf_counter() if t0 is None else t0

    def on_start(self, result: LoopResult) -> None:
        if self.max_seconds is not None:
            reserve = min(MAX_RESERVE_S, max(MIN_RESERVE_S, RESERVE_SHARE * self.max_seconds))
            deadline.set_deadline(self.t0 + max(0.0, self.max_seconds - reserve))

    def on_segment(self, segment: Segment) -> bool:
        return bool(self.out_of_time(segment.wall_s, segment.index)) or deadline.passed()

    def close(self) -> None:
        if self.max_seconds is not None:
            deadline.set_deadline(None)
