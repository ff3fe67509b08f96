"""The updater: turns each pod's report into the run's records.

A scored pod is counted once (by pod id, so a pod requeued after a node loss and run
again counts once), its per-bar validation returns go to the candidates record
(:mod:`finpod.runs.candidates`), it is offered to the leaderboard, its learning-curve rows are
appended to ``metrics.csv`` and a line goes to ``train.log``. A failed pod only bumps the
failure counters. Only the driver writes the run directory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from finpod.runs.candidates import record_candidate
from finpod.runs.leaderboard import Entry, Leaderboard, checkpoint_name
from finpod.runs.rundir import RunDir
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod import PodResult


@dataclass
class Summary:
    """How a run (or a resumed part of it) went."""

    pods_trained: int = 0
    """Pods evaluated in this session."""
    pods_failed: int = 0
    """Pods lost to crashes, errors or non-finite numbers in this session (not counting
    pods lost with a node and requeued)."""
    pods_non_finite: int = 0
    """Of ``pods_failed``: pods whose losses, weights or validation returns went non-finite."""
    pods_unscored: int = 0
    """Pods given up, not scored, because they were still running well past the run's
    wall-time cap (:meth:`~finpod.tournament.budget.BudgetClock.overdue`)."""
    pods_requeued: int = 0
    """Pods lost with their node and started again with the same spec."""
    node_events: int = 0
    """Nodes lost while running pods."""
    retries: int = 0
    """Calls retried after a transient ``ActorUnavailableError``."""
    quarantined: dict[str, str] = field(default_factory=dict)
    """Node id → why it was quarantined."""
    max_pool: int = 0
    """Largest pool size seen."""
    pool_sizes: list[int] = field(default_factory=list)
    """Every distinct target pool size, in order."""
    nodes: dict[str, int] = field(default_factory=dict)
    """Ray node id → pods that finished on it."""
    wall_s: float = 0.0
    """Seconds this session ran."""
    pod_s: float = 0.0
    """Σ over pods of dispatch → result-in-driver seconds (what the pool spent)."""
    inside_s: float = 0.0
    """Σ over pods of seconds spent inside ``train``."""
    dispatch_gap_s: float = 0.0
    """Σ of seconds slots sat idle between a result and their next pod (driver bookkeeping)."""
    startup_s: float = 0.0
    """Σ of seconds pod actors took to start and read the dataset."""
    data_bytes: int = 0
    """Bytes of the train and validation arrays put in the object store."""
    best: Entry | None = None
    """Leaderboard's best entry at the end."""
    ensemble: dict[str, Any] | None = None
    """The leaderboard ensemble's record (``Leaderboard.ensemble``), if one was scored."""
    selection: dict[str, Any] | None = None
    """The final selection (:mod:`finpod.tournament.champion`): champion, challengers'
    paired tests, decision and the selected agent's name."""
    budget: dict[str, Any] | None = None
    """``run.json``'s ``budget``: how the run spent its env steps (``mode = "asha"``; see
    :meth:`finpod.tournament.schedulers.asha.Allocation.report`)."""
    throughput: dict[str, float] = field(default_factory=dict)
    """``run.json``'s ``throughput``: env steps, wall seconds and env steps per second of
    the whole run."""

    @property
    def orchestration_s(self) -> float:
        """Seconds of pod time not spent training: RPC, serialization, driver bookkeeping."""
        return max(0.0, self.pod_s - self.inside_s) + self.dispatch_gap_s

    @property
    def orchestration_share(self) -> float:
        """``orchestration_s`` as a share of total pod time (0 when nothing ran)."""
        total = self.pod_s + self.dispatch_gap_s
        return self.orchestration_s / total if total > 0 else 0.0


class Updater:
    """Records pod reports in the leaderboard, candidates record, metrics and log."""

    def __init__(
        self, board: Leaderboard, run: RunDir, summary: Summary, segment_steps: int | None = None
    ) -> None:
        self.segment_steps = segment_steps
        """Env steps of a full segment: a pod that trained fewer is marked partial."""
        self.board = board
        self.run_dir = run
        self.summary = summary
        #: Pod ids already reported (exactly-once counting).
        self.reported: set[str] = set()
        #: Pod id → ``ObjectRef`` of its replay buffer, for leaderboard entries only.
        self.buffers: dict[str, Any] = {}

    def first_report(self, pod_id: str) -> bool:
        """True the first time ``pod_id`` reports; later reports are logged and ignored."""
        if pod_id in self.reported:
            self.run_dir.log(f"ignored a second report of {pod_id}", logging.WARNING)
            return False
        self.reported.add(pod_id)
        return True

    def failed(self, message: str, wall_s: float) -> None:
        """A pod failed (it is no candidate): count it, save the counters, log why."""
        self.summary.pods_failed += 1
        self.board.progress.pods_failed += 1
        self.board.progress.wall_s = wall_s
        self.board.save()
        self.run_dir.log(message, logging.WARNING)

    def scored(
        self,
        result: PodResult,
        spec: PodSpec,
        node: str,
        *,
        started_s: float,
        wall_s: float,
        buffer_ref: Any = None,
    ) -> int | None:
        """Record a pod scored on validation; returns its leaderboard rank (None if off).

        Args:
            result: the pod's report (finite score and returns).
            spec: what it trained.
            node: Ray node it ran on.
            started_s: run seconds at which it was dispatched (offsets its metric rows).
            wall_s: run seconds now (saved with the leaderboard).
            buffer_ref: its replay buffer's ``ObjectRef``, kept while it is on the board.
        """
        self.summary.pods_trained += 1
        self.summary.nodes[node] = self.summary.nodes.get(node, 0) + 1
        self.board.progress.wall_s = wall_s
        if result.returns is not None:
            record_candidate(
                self.run_dir.path, result.pod_id, result.returns, score=float(result.score)
            )
        entry = entry_of(result, spec, self.segment_steps)
        inserted = self.board.record(entry, result.checkpoint)
        if inserted and buffer_ref is not None:
            self.buffers[result.pod_id] = buffer_ref
        on_board = {e.pod_id for e in self.board.entries}
        for gone in [p for p in self.buffers if p not in on_board]:
            del self.buffers[gone]
        self.run_dir.add_metrics(
            (result.pod_id, steps, started_s + wall, split, metric, value)
            for steps, wall, split, metric, value in result.metrics
        )
        self.run_dir.add_hparams(
            result.pod_id,
            {"algorithm": result.algorithm, "parent": spec.parent, "seed": spec.seed}
            | {"num_envs": spec.num_envs, **result.hparams, "env": dict(result.env or {})},
            env_steps=min((m[0] for m in result.metrics), default=0),
        )
        rank = next(
            (i + 1 for i, e in enumerate(self.board.entries) if e.pod_id == result.pod_id), None
        )
        self.run_dir.log(
            f"done {result.pod_id} {result.algorithm} score {result.score:.4f} "
            f"after {result.env_steps} steps in {result.train_s:.1f}s on node {node[:8]}"
            + (f" → leaderboard #{rank}" if inserted and rank else "")
        )
        return rank


def entry_of(
    result: PodResult, spec: PodSpec | None = None, segment_steps: int | None = None
) -> Entry:
    """The leaderboard entry of a scored pod; ``segment_steps``: the env steps of a full
    segment (``tournament.pod_steps``), to mark a pod cut short as :attr:`Entry.partial`."""
    short_steps = segment_steps is not None and result.steps_done < 0.95 * segment_steps
    short_epochs = spec is not None and 0 < result.epochs_done < spec.epochs
    return Entry(
        pod_id=result.pod_id,
        algorithm=result.algorithm,
        hparams=result.hparams,
        score=float(result.score),
        checkpoint=checkpoint_name(result.pod_id),
        lineage=list(spec.lineage) if spec else [],
        history=[dict(h) for h in result.history],
        env_steps=int(result.env_steps),
        updates=int(getattr(result, "updates", 0)),
        parent=spec.parent if spec else None,
        env=dict(getattr(result, "env", None) or (spec.env if spec else {})),
        champion=bool(spec.champion) if spec else False,
        partial=bool(short_steps or short_epochs),
    )
