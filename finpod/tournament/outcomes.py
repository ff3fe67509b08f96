"""What becomes of a dispatched job: its result recorded, or its failure judged.

A result goes to the :class:`~finpod.tournament.updater.Updater` (leaderboard, candidates,
metrics) once per pod id. An unavailable actor is retried after a delay; an actor that
died is judged by its node: a node lost is one event and its pods are requeued with the
same spec (:attr:`Outcomes.retry`); an actor that died on a node still alive is given
:data:`~finpod.tournament.failures.NODE_DEATH_GRACE_S` for the cluster to say the node is
gone (:attr:`Outcomes.deaths`) before its pods count as failed
(:class:`~finpod.tournament.failures.FailurePolicy`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from finpod.runs import Leaderboard, RunDir
from finpod.tournament import failures as fp
from finpod.tournament.actor_pool import ActorPool, short_error
from finpod.tournament.budget import BudgetClock
from finpod.tournament.failures import FailurePolicy
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod_results import PodResult
from finpod.tournament.progress import ProgressPoller
from finpod.tournament.schedulers import Scheduler
from finpod.tournament.setup import Event
from finpod.tournament.slots import Death, Inflight, Slot
from finpod.tournament.updater import Summary, Updater


class Outcomes:
    """Results and failures of the jobs the orchestrator dispatched (module docstring)."""

    def __init__(
        self,
        ray: Any,
        actors: ActorPool,
        policy: FailurePolicy,
        scheduler: Scheduler,
        updater: Updater,
        summary: Summary,
        board: Leaderboard,
        progress: ProgressPoller,
        clock: BudgetClock,
        run: RunDir,
        emit: Event,
    ) -> None:
        self.ray = ray
        self.actors = actors
        self.policy = policy
        self.scheduler = scheduler
        self.updater = updater
        self.summary = summary
        self.board = board
        self.progress = progress
        self.clock = clock
        self.run_dir = run
        self.emit = emit
        self.retry: list[tuple[PodSpec, bytes | None, Any]] = []
        """Requeued pods (spec, parent bytes, parent buffer ref), dispatched first."""
        self.deaths: list[Death] = []
        """Jobs whose actor died on a node that still looked alive, judged later."""
        self.inherit = False
        """Children of off-policy pods inherit their parent's replay buffer (decided at
        start from ``tournament.inherit_buffer`` and the buffers' size)."""

    def take_requeued(
        self, size: int, key: Callable[[PodSpec], Any]
    ) -> tuple[list[PodSpec], list[bytes | None], Any]:
        """The next job of requeued pods: the first one and, with ``size`` > 1, up to
        ``size`` − 1 more of the same ``key`` (they train as one population)."""
        first = self.retry.pop(0)
        if size == 1:
            return [first[0]], [first[1]], first[2]
        group, want = [first], key(first[0])
        for item in list(self.retry):
            if len(group) < size and key(item[0]) == want:
                self.retry.remove(item)
                group.append(item)
        return [g[0] for g in group], [g[1] for g in group], None

    def on_result(self, slot: Slot) -> None:
        job = slot.busy
        assert job is not None
        now = time.monotonic()
        try:
            got = self.ray.get(job.ref)
        except self.ray.exceptions.ActorUnavailableError as err:
            job.attempt += 1
            delay = self.policy.transient(job.attempt)
            if delay is not None:
                self.summary.retries += 1
                self.run_dir.log(
                    f"pod {job.spec.pod_id} unreachable ({short_error(err)}); retry {job.attempt} "
                    f"in {delay:.1f}s",
                    logging.WARNING,
                )
                job.ref, job.retry_at = None, now + delay
                return
            self.actor_died(slot, err)
            return
        except self.ray.exceptions.RayActorError as err:
            self.actor_died(slot, err)
            return
        except Exception as err:  # noqa: BLE001 - a pod that raised is logged and replaced
            slot.busy, slot.idle_since = None, now
            self.settle_buffer(job)
            self.run_dir.log(f"pod {job.ids} raised:\n{err}", logging.WARNING)
            self.pod_failed(job, f"pod {job.ids} failed: {short_error(err)}")
            return
        slot.busy, slot.idle_since = None, now
        results: list[PodResult] = list(got) if job.group else [got]
        self.summary.pod_s += now - job.dispatched
        self.summary.inside_s += max((r.train_s for r in results), default=0.0)
        for spec, result in zip(job.specs, results, strict=True):
            self.record(slot, job, spec, result)

    def actor_died(self, slot: Slot, err: BaseException) -> None:
        job = slot.busy
        assert job is not None
        slot.busy = None
        self.actors.drop(slot)
        text = str(err)
        message = f"pod {job.ids} died on node {slot.node_id[:8]}: {short_error(err)}"
        node_gone = getattr(err, "preempted", False) or "node has died" in text
        if node_gone or not self.actors.node_alive(slot.node_id):
            self.node_lost(slot.node_id, [job])
        elif "killed by `ray.kill`" in text:
            self.pod_failed(job, message)
        else:
            # The node may be on its way out: give the cluster a moment to say so.
            self.deaths.append(
                Death(job, slot.node_id, message, time.monotonic() + fp.NODE_DEATH_GRACE_S)
            )

    def classify_deaths(self) -> None:
        if not self.deaths:
            return
        alive = {n.get("NodeID") for n in self.ray.nodes() if n.get("Alive")}
        lost, failed, self.deaths = fp.death_verdicts(self.deaths, alive, time.monotonic())
        for death in lost:
            self.node_lost(death.node_id, [death.inflight])
        for death in failed:
            self.pod_failed(death.inflight, death.message)

    def node_lost(self, node: str, jobs: list[Inflight]) -> None:
        """One event per node; its pods are requeued with the same spec."""
        first = self.policy.node_lost(node)
        self.summary.node_events = self.policy.node_events
        requeued = []
        for job in jobs:
            for i, (spec, parent) in enumerate(zip(job.specs, job.parents, strict=True)):
                self.retry.append((spec, parent, job.parent_buffer if i == 0 else None))
                self.summary.pods_requeued += 1
                requeued.append(spec.pod_id)
        ids = ", ".join(requeued)
        if first:
            self.run_dir.log(f"node {node[:8]} lost" + (f"; requeued {ids}" if ids else ""))
            self.emit("node_lost", {"node_id": node, "requeued": requeued})
        elif ids:
            self.run_dir.log(f"requeued {ids} (lost with node {node[:8]})")
        self.actors.replan = True  # re-plan the pool

    def settle_buffer(self, job: Inflight) -> None:
        """Fetch the failed pod's second return (its replay buffer holds the same error):
        an error never fetched is printed by Ray on the console, traceback and all, when
        its reference is dropped. The full text is in ``train.log`` instead."""
        if job.buffer_ref is None:
            return
        with contextlib.suppress(Exception):  # the pod's own error, logged by the caller
            self.ray.get(job.buffer_ref, timeout=0)
        job.buffer_ref = None

    def pod_failed(self, job: Inflight, message: str) -> None:
        self.scheduler.failed(job.specs)
        for _ in job.specs:
            self.count_failed(message)
        self.policy.pod_failed(message)
        self.policy.check(str(self.run_dir.path / "train.log"))

    def count_failed(self, message: str) -> None:
        self.updater.failed(message, self.clock.elapsed())
        self.emit("failed", {"message": message})

    def record(self, slot: Slot, job: Inflight, spec: PodSpec, result: PodResult) -> None:
        """A pod reported: once per pod id, into the run's records (see :class:`Updater`)."""
        if not self.updater.first_report(result.pod_id):
            return
        self.progress.forget(result.pod_id)
        self.board.progress.env_steps += result.steps_done
        if result.failure:
            self.summary.pods_non_finite += 1
            self.policy.non_finite()
            self.count_failed(f"pod {result.pod_id} failed: {result.failure}")
            return
        self.policy.succeeded()
        node = result.node_id or slot.node_id
        started = self.clock.run_time_at(job.dispatched)
        rank = self.updater.scored(
            result,
            spec,
            node,
            started_s=started,
            wall_s=self.clock.elapsed(),
            buffer_ref=job.buffer_ref if self.inherit else None,
        )
        self.scheduler.scored(result, spec)
        self.emit(
            "finish", {"pod_id": result.pod_id, "result": result, "rank": rank, "node_id": node}
        )

    # ----- main loop --------------------------------------------------------------------
