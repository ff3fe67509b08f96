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
from dataclasses import dataclass
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


@dataclass
class Cluster:
    """Where jobs run and how their failures are judged."""

    ray: Any
    actors: ActorPool
    policy: FailurePolicy


@dataclass
class Books:
    """What a finished job is written to: the leaderboard and its run directory, the
    run's summary, the progress poller and the budget clock."""

    board: Leaderboard
    summary: Summary
    run: RunDir
    progress: ProgressPoller
    clock: BudgetClock


@dataclass
class Breeding:
    """Who turns results into the next pods: the scheduler and the updater."""

    scheduler: Scheduler
    updater: Updater


class Outcomes:
    """Results and failures of the jobs the orchestrator dispatched (module docstring),
    handled with three collaborators: the :class:`Cluster`, the :class:`Books` and the
    :class:`Breeding`, plus ``emit`` for events."""

    def __init__(self, cluster: Cluster, books: Books, breeding: Breeding, emit: Event) -> None:
        self.cluster = cluster
        self.books = books
        self.breeding = breeding
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
            got = self.cluster.ray.get(job.ref)
        except self.cluster.ray.exceptions.ActorUnavailableError as err:
            job.attempt += 1
            delay = self.cluster.policy.transient(job.attempt)
            if delay is not None:
                self.books.summary.retries += 1
                self.books.run.log(
                    f"pod {job.spec.pod_id} unreachable ({short_error(err)}); retry {job.attempt} "
                    f"in {delay:.1f}s",
                    logging.WARNING,
                )
                job.ref, job.retry_at = None, now + delay
                return
            self.actor_died(slot, err)
            return
        except self.cluster.ray.exceptions.RayActorError as err:
            self.actor_died(slot, err)
            return
        except Exception as err:  # noqa: BLE001 - a pod that raised is logged and replaced
            slot.busy, slot.idle_since = None, now
            self.settle_buffer(job)
            self.books.run.log(f"pod {job.ids} raised:\n{err}", logging.WARNING)
            self.pod_failed(job, f"pod {job.ids} failed: {short_error(err)}")
            return
        slot.busy, slot.idle_since = None, now
        results: list[PodResult] = list(got) if job.group else [got]
        self.books.summary.pod_s += now - job.dispatched
        self.books.summary.inside_s += max((r.train_s for r in results), default=0.0)
        for spec, result in zip(job.specs, results, strict=True):
            self.record(slot, job, spec, result)

    def actor_died(self, slot: Slot, err: BaseException) -> None:
        job = slot.busy
        assert job is not None
        slot.busy = None
        self.cluster.actors.drop(slot)
        text = str(err)
        message = f"pod {job.ids} died on node {slot.node_id[:8]}: {short_error(err)}"
        node_gone = getattr(err, "preempted", False) or "node has died" in text
        if node_gone or not self.cluster.actors.node_alive(slot.node_id):
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
        alive = {n.get("NodeID") for n in self.cluster.ray.nodes() if n.get("Alive")}
        lost, failed, self.deaths = fp.death_verdicts(self.deaths, alive, time.monotonic())
        for death in lost:
            self.node_lost(death.node_id, [death.inflight])
        for death in failed:
            self.pod_failed(death.inflight, death.message)

    def node_lost(self, node: str, jobs: list[Inflight]) -> None:
        """One event per node; its pods are requeued with the same spec."""
        first = self.cluster.policy.node_lost(node)
        self.books.summary.node_events = self.cluster.policy.node_events
        requeued = []
        for job in jobs:
            for i, (spec, parent) in enumerate(zip(job.specs, job.parents, strict=True)):
                self.retry.append((spec, parent, job.parent_buffer if i == 0 else None))
                self.books.summary.pods_requeued += 1
                requeued.append(spec.pod_id)
        ids = ", ".join(requeued)
        if first:
            self.books.run.log(f"node {node[:8]} lost" + (f"; requeued {ids}" if ids else ""))
            self.emit("node_lost", {"node_id": node, "requeued": requeued})
        elif ids:
            self.books.run.log(f"requeued {ids} (lost with node {node[:8]})")
        self.cluster.actors.replan = True  # re-plan the pool

    def settle_buffer(self, job: Inflight) -> None:
        """Fetch the failed pod's second return (its replay buffer holds the same error):
        an error never fetched is printed by Ray on the console, traceback and all, when
        its reference is dropped. The full text is in ``train.log`` instead."""
        if job.buffer_ref is None:
            return
        with contextlib.suppress(Exception):  # the pod's own error, logged by the caller
            self.cluster.ray.get(job.buffer_ref, timeout=0)
        job.buffer_ref = None

    def pod_failed(self, job: Inflight, message: str) -> None:
        self.breeding.scheduler.failed(job.specs)
        for _ in job.specs:
            self.count_failed(message)
        self.cluster.policy.pod_failed(message)
        self.cluster.policy.check(str(self.books.run.path / "train.log"))

    def count_failed(self, message: str) -> None:
        self.breeding.updater.failed(message, self.books.clock.elapsed())
        self.emit("failed", {"message": message})

    def record(self, slot: Slot, job: Inflight, spec: PodSpec, result: PodResult) -> None:
        """A pod reported: once per pod id, into the run's records (see :class:`Updater`)."""
        if not self.breeding.updater.first_report(result.pod_id):
            return
        self.books.progress.forget(result.pod_id)
        self.books.board.progress.env_steps += result.steps_done
        if spec.fill:
            self.books.board.progress.fill_steps += result.steps_done
            self.books.board.progress.fill_pods += 1
        if result.failure:
            self.books.summary.pods_non_finite += 1
            self.cluster.policy.non_finite()
            self.count_failed(f"pod {result.pod_id} failed: {result.failure}")
            self.breeding.scheduler.failed([spec], retry=False)
            return
        self.cluster.policy.succeeded()
        node = result.node_id or slot.node_id
        started = self.books.clock.run_time_at(job.dispatched)
        rank = self.breeding.updater.scored(
            result,
            spec,
            node,
            started_s=started,
            wall_s=self.books.clock.elapsed(),
            buffer_ref=job.buffer_ref if self.inherit else None,
        )
        self.breeding.scheduler.scored(result, spec)
        self.emit(
            "finish", {"pod_id": result.pod_id, "result": result, "rank": rank, "node_id": node}
        )

    # ----- main loop --------------------------------------------------------------------
