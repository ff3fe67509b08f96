"""The orchestrator: the dispatch loop that keeps a pool of pod actors on Ray busy until the
budget is spent.

Its parts live in their own modules, each owning its state; this one wires them:

- **Data plane** (:mod:`~finpod.tournament.dataplane`) — at start the driver verifies the
  dataset's hash and puts the train and validation splits in the object store; pod actors
  get the refs, never a path.
- **Pool** (:mod:`~finpod.tournament.actors`, :mod:`~finpod.tournament.pool`,
  :mod:`~finpod.tournament.slots`) — each slot
  is a :class:`~finpod.tournament.pod.PodWorker` actor placed on a chosen node (hard node
  affinity) with ``cpus_per_pod`` CPUs, ``gpus_per_pod`` GPUs and the memory its tables
  and buffers need. The target size is how many actors the alive, non-quarantined nodes
  fit, capped by ``pods``; it is re-checked when a job finishes and every few seconds.
  A job is one pod, or with ``population = K`` the K members of one population, trained
  as one batched model by the actor (:mod:`~finpod.tournament.members`); every member
  is still a pod to everything below.
- **Schedulers** (:mod:`~finpod.tournament.schedulers`) — asynchronous (default): as
  soon as a job finishes its slot gets the generator's next pods; generational: a
  generation is dispatched and awaited as a whole.
- **Budget** (:mod:`~finpod.tournament.budget`) — wall time, env steps or pods trained,
  counted over the whole run.
- **Failures** (:mod:`~finpod.tournament.failures`) — a node lost is one event and its
  pods are requeued; an unavailable actor is retried; a node whose actors cannot start is
  quarantined; the run stops only on repeated failures with the same cause.
- **Updater** (:mod:`~finpod.tournament.updater`) — each pod's result (scored inside the
  actor on validation) goes to the leaderboard, candidates record and metrics.

The loop never blocks on cosmetic work: progress polls (:mod:`~finpod.tournament.progress`)
are ``ray.wait(..., timeout=0)`` on refs already issued, learning curves are drawn at the
end (and at most every :data:`PLOT_EVERY_S`), metrics are appended, not rewritten.

Timing: per job, the round trip from dispatch to result and the time inside ``train``;
their difference plus the idle time between a result and the slot's next dispatch is the
orchestration overhead of :class:`Summary`. ``run.json``'s ``throughput`` is every pod's
env steps over the run's wall time.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from finpod.runs import Leaderboard, RunDir
from finpod.tournament import failures as fp
from finpod.tournament.actors import ActorPool, short_error
from finpod.tournament.budget import BudgetClock
from finpod.tournament.config import SearchSpace, TournamentConfig
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.pod import PodResult
from finpod.tournament.pool import inherit_buffers, largest_buffer_bytes, pod_memory_bytes
from finpod.tournament.progress import ProgressPoller
from finpod.tournament.schedulers import group_key, make_scheduler
from finpod.tournament.slots import Death, Inflight, Slot
from finpod.tournament.updater import Summary, Updater

#: Seconds between two checks of the cluster's size while pods are running.
RESIZE_EVERY_S = 2.0
#: Seconds between two progress polls of running pods (only with a display attached).
POLL_EVERY_S = 2.0
#: Seconds between two learning-curve plots while the run goes on (also drawn at the end).
PLOT_EVERY_S = 300.0


@dataclass
class Setup:
    """What the orchestrator needs besides the leaderboard and the run directory."""

    config: TournamentConfig
    """Validated ``[tournament]`` table."""
    space: SearchSpace
    """Validated ``[search]`` table."""
    dataset_dir: Path
    """Dataset directory, read by the driver only (pods get it through the object store)."""
    env_config: dict[str, Any]
    """``EnvConfig`` fields of the strategy's ``[env]`` table."""
    num_envs: int
    """W: vectorized envs per learner."""
    seed: int
    """Run seed (drives the generator)."""
    device: str = "cpu"
    """Torch device inside the pods: ``"cpu"`` or ``"cuda"`` (with ``gpus_per_pod`` > 0)."""
    gpus_per_pod: float = 0.0
    """Resolved GPUs per pod."""
    request_resources: bool = False
    """On a cluster with an autoscaler, ask it for pods' resources (``pods`` of them when a
    number; one pod's when ``"auto"`` finds no room) and keep waiting while it scales."""
    dataset_hash: str | None = None
    """Hash the run expects; the driver's check of the files must give it."""


Event = Callable[[str, dict[str, Any]], None]


class Orchestrator:
    """Runs the tournament loop on the connected Ray cluster (``ray.init`` done by the caller)."""

    def __init__(
        self,
        setup: Setup,
        board: Leaderboard,
        run: RunDir,
        on_event: Event | None = None,
        display: Callable[[dict[str, Any]], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        import ray

        self.ray = ray
        self.setup = setup
        self.config = setup.config
        self.board = board
        self.run_dir = run
        self.on_event = on_event
        self.display = display
        self.stop = stop
        self.generator = Generator(setup.space, setup.config, setup.seed, setup.num_envs)
        self.policy = FailurePolicy(self.config.max_failures)
        self.summary = Summary()
        self.updater = Updater(board, run, self.summary)
        self.data: DataPlane | None = None
        self.actors = ActorPool(ray, setup, self.policy, self.summary, run, self._emit)
        self._replan = False
        self._retry: list[tuple[PodSpec, bytes | None, Any]] = []
        self._deaths: list[Death] = []
        self.clock = BudgetClock(self.config.budget, board, stop)
        self.scheduler = make_scheduler(
            self.config, self.generator, board, run.log, lambda: self.actors.target
        )
        self.progress = ProgressPoller(ray)
        #: Children of off-policy pods inherit their parent's replay buffer (decided at
        #: start from ``tournament.inherit_buffer`` and the buffers' size).
        self._inherit = False

    # ----- budget -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self.clock.elapsed()

    def _inflight(self) -> list[Inflight]:
        busy = [s.busy for s in self.actors.slots.values() if s.busy is not None]
        return busy + [d.inflight for d in self._deaths]

    def _budget_left(self) -> float:
        pending = self._inflight()
        steps = sum(f.steps for f in pending) + sum(s.steps for s, _, _ in self._retry)
        pods = sum(len(f.specs) for f in pending) + len(self._retry)
        return self.clock.left(steps, pods)

    def can_dispatch(self) -> bool:
        """Is there budget for one more pod (and no stop asked for)?"""
        return self.clock.allows_more(self._budget_left())

    def _may_retry(self) -> bool:
        return self.clock.allows_retry(self._budget_left())

    # ----- dispatch ---------------------------------------------------------------------
    def _next_job(self) -> tuple[list[PodSpec], list[bytes | None], Any] | None:
        """The next job of a slot: one pod (``population = 1``), or up to K pods that can
        train as one population (same algorithm, architecture, controls and shape).
        Requeued pods go first."""
        size = self.config.population
        if self._retry:
            first = self._retry.pop(0)
            if size == 1:
                return [first[0]], [first[1]], first[2]
            group, key = [first], group_key(self.generator, first[0])
            for item in list(self._retry):
                if len(group) < size and group_key(self.generator, item[0]) == key:
                    self._retry.remove(item)
                    group.append(item)
            return [g[0] for g in group], [g[1] for g in group], None
        if self.config.budget.kind == "pods":
            size = int(max(1, min(size, self._budget_left())))
        specs = self.scheduler.next_specs(size, busy=bool(self._inflight() or self._retry))
        if not specs:
            return None
        parents: list[bytes | None] = []
        for i, spec in enumerate(specs):
            data = self.scheduler.parent_bytes(spec.parent)
            if spec.parent and data is None:
                # The parent is gone (evicted, or lost with a crashed generation).
                if size == 1:
                    spec = specs[i] = self.generator.fresh(int(spec.pod_id[1:]))
                else:  # the member keeps its drawn settings and starts from scratch
                    spec.parent, spec.lineage, spec.base_history = None, [], []
            parents.append(data)
        buffer = None
        if size == 1 and specs[0].parent:
            buffer = self.updater.buffers.get(specs[0].parent)
        left = self._budget_left()
        specs = [self.clock.fit(spec, left, len(specs)) for spec in specs]
        return specs, parents, buffer

    def _dispatch(self) -> None:
        for slot in sorted(self.actors.slots.values(), key=lambda s: s.index):
            if slot.busy is not None or slot.ready_ref is not None:
                continue
            if len(self.actors.slots) > self.actors.target:
                self.actors.drop(slot)
                continue
            if not (self._retry and self._may_retry()) and not self.can_dispatch():
                return
            nxt = self._next_job()
            if nxt is None:
                return
            specs, parents, buffer = nxt
            now = time.monotonic()
            if slot.idle_since is not None:
                self.summary.dispatch_gap_s += now - slot.idle_since
                slot.idle_since = None
            group = self.config.population > 1
            slot.busy = Inflight(specs, parents, buffer, now, group=group)
            self._submit(slot)
            if group:
                self.run_dir.log(
                    f"start population of {len(specs)} {specs[0].algorithm} pod(s) "
                    f"{specs[0].pod_id}…{specs[-1].pod_id} on slot {slot.index} node "
                    f"{slot.node_id[:8]} ({specs[0].steps} steps each, controls {specs[0].env})"
                )
            for spec in specs:
                origin = f"child of {spec.parent}" if spec.parent else "from scratch"
                self.run_dir.log(
                    f"start {spec.pod_id} {spec.algorithm} {origin} on slot {slot.index} "
                    f"node {slot.node_id[:8]} ({spec.steps} steps, hparams {spec.hparams})"
                )
                self._emit(
                    "start",
                    {
                        "pod_id": spec.pod_id,
                        "slot": slot.index,
                        "spec": spec,
                        "actor": slot.actor,
                        "node_id": slot.node_id,
                    },
                )

    def _submit(self, slot: Slot) -> None:
        job = slot.busy
        assert job is not None
        if job.group:
            job.ref, job.buffer_ref = slot.actor.train_group.remote(job.specs, job.parents), None
        else:
            buffer_arg = [job.parent_buffer] if job.parent_buffer is not None else None
            job.ref, job.buffer_ref = slot.actor.train.remote(
                job.spec, job.parent, buffer_arg, self._inherit
            )
        job.retry_at = None

    # ----- results ----------------------------------------------------------------------
    def _on_result(self, slot: Slot) -> None:
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
            self._actor_died(slot, err)
            return
        except self.ray.exceptions.RayActorError as err:
            self._actor_died(slot, err)
            return
        except Exception as err:  # noqa: BLE001 - a pod that raised is logged and replaced
            slot.busy, slot.idle_since = None, now
            self._pod_failed(job, f"pod {job.ids} failed: {short_error(err)}")
            return
        slot.busy, slot.idle_since = None, now
        results: list[PodResult] = list(got) if job.group else [got]
        self.summary.pod_s += now - job.dispatched
        self.summary.inside_s += max((r.train_s for r in results), default=0.0)
        for spec, result in zip(job.specs, results, strict=True):
            self._record(slot, job, spec, result)

    def _actor_died(self, slot: Slot, err: BaseException) -> None:
        job = slot.busy
        assert job is not None
        slot.busy = None
        self.actors.drop(slot)
        text = str(err)
        message = f"pod {job.ids} died on node {slot.node_id[:8]}: {short_error(err)}"
        node_gone = getattr(err, "preempted", False) or "node has died" in text
        if node_gone or not self.actors.node_alive(slot.node_id):
            self._node_lost(slot.node_id, [job])
        elif "killed by `ray.kill`" in text:
            self._pod_failed(job, message)
        else:
            # The node may be on its way out: give the cluster a moment to say so.
            self._deaths.append(
                Death(job, slot.node_id, message, time.monotonic() + fp.NODE_DEATH_GRACE_S)
            )

    def _classify_deaths(self) -> None:
        if not self._deaths:
            return
        alive = {n.get("NodeID") for n in self.ray.nodes() if n.get("Alive")}
        lost, failed, self._deaths = fp.death_verdicts(self._deaths, alive, time.monotonic())
        for death in lost:
            self._node_lost(death.node_id, [death.inflight])
        for death in failed:
            self._pod_failed(death.inflight, death.message)

    def _node_lost(self, node: str, jobs: list[Inflight]) -> None:
        """One event per node; its pods are requeued with the same spec."""
        first = self.policy.node_lost(node)
        self.summary.node_events = self.policy.node_events
        requeued = []
        for job in jobs:
            for i, (spec, parent) in enumerate(zip(job.specs, job.parents, strict=True)):
                self._retry.append((spec, parent, job.parent_buffer if i == 0 else None))
                self.summary.pods_requeued += 1
                requeued.append(spec.pod_id)
        ids = ", ".join(requeued)
        if first:
            self.run_dir.log(f"node {node[:8]} lost" + (f"; requeued {ids}" if ids else ""))
            self._emit("node_lost", {"node_id": node, "requeued": requeued})
        elif ids:
            self.run_dir.log(f"requeued {ids} (lost with node {node[:8]})")
        self._replan = True  # re-plan the pool

    def _pod_failed(self, job: Inflight, message: str) -> None:
        self.scheduler.failed(job.specs)
        for _ in job.specs:
            self._count_failed(message)
        self.policy.pod_failed(message)
        self.policy.check(str(self.run_dir.path / "train.log"))

    def _count_failed(self, message: str) -> None:
        self.updater.failed(message, self.elapsed())
        self._emit("failed", {"message": message})

    def _record(self, slot: Slot, job: Inflight, spec: PodSpec, result: PodResult) -> None:
        """A pod reported: once per pod id, into the run's records (see :class:`Updater`)."""
        if not self.updater.first_report(result.pod_id):
            return
        self.progress.forget(result.pod_id)
        self.board.progress.env_steps += result.steps_done
        if result.failure:
            self.summary.pods_non_finite += 1
            self.policy.non_finite()
            self._count_failed(f"pod {result.pod_id} failed: {result.failure}")
            return
        self.policy.succeeded()
        node = result.node_id or slot.node_id
        started = self.clock.run_time_at(job.dispatched)
        rank = self.updater.scored(
            result,
            spec,
            node,
            started_s=started,
            wall_s=self.elapsed(),
            buffer_ref=job.buffer_ref if self._inherit else None,
        )
        self.scheduler.scored(result, spec)
        self._emit(
            "finish", {"pod_id": result.pod_id, "result": result, "rank": rank, "node_id": node}
        )

    # ----- main loop --------------------------------------------------------------------
    def run(self) -> Summary:
        """Train until the budget is spent and every running pod has reported."""
        self.clock.start()
        self.run_dir.log(
            f"tournament {self.config.mode} budget {self.config.budget} "
            f"({self.board.candidates_evaluated} candidates so far)"
        )
        self._publish()
        if self.config.pods is not None:
            self.actors.request(self.config.pods)
        try:
            self._loop()
        finally:
            self.summary.wall_s = self.clock.session_s()
            self.summary.quarantined = dict(self.policy.quarantined)
            self.board.progress.wall_s = self.elapsed()
            self.board.save()
            self.summary.throughput = self.run_dir.record_throughput(
                self.board.progress.env_steps, self.board.progress.wall_s
            )
            self.actors.drop_all()
            self.actors.request(0)
            self._plot()
        self.summary.best = self.board.best()
        self.run_dir.log(
            f"finished: {self.summary.pods_trained} pod(s) trained, {self.summary.pods_failed} failed, "
            f"{self.summary.pods_requeued} requeued after {self.summary.node_events} node loss(es), "
            f"{self.board.candidates_evaluated} candidates in the run, best "
            + (
                f"{self.summary.best.pod_id} {self.summary.best.score:.4f}"
                if self.summary.best
                else "none"
            )
        )
        return self.summary

    def _publish(self) -> None:
        if self.data is None:
            t0 = time.monotonic()
            self.data = DataPlane.publish(self.setup.dataset_dir, self.setup.dataset_hash)
            self.summary.data_bytes = sum(self.data.nbytes.values())
            self.run_dir.log(
                f"dataset {self.data.dataset_hash[:12]} verified and put in the object store "
                f"({self.summary.data_bytes / 2**20:.1f} MiB, {time.monotonic() - t0:.1f}s)"
            )
        buffer_bytes = largest_buffer_bytes(self.setup.space, self.data.shapes["train"])
        memory = pod_memory_bytes(
            self.data.shapes,
            self.config.num_learners,
            on_gpu=self.setup.gpus_per_pod > 0,
            buffer_bytes=buffer_bytes,
        )
        self.actors.pod = replace(self.actors.pod, memory=memory)
        self.actors.data = self.data
        self._inherit = bool(buffer_bytes) and inherit_buffers(self.config, buffer_bytes)
        if self._inherit:
            self.run_dir.log(
                f"children inherit replay buffers (≤ {buffer_bytes / 2**20:.0f} MiB each)"
            )

    def _loop(self) -> None:
        last_resize = -math.inf
        last_poll = time.monotonic()
        last_plot = time.monotonic()
        no_room_since: float | None = None
        last_wait_msg = -math.inf
        while True:
            now = time.monotonic()
            if self._replan or self.actors.replan or now - last_resize >= RESIZE_EVERY_S:
                self._replan = self.actors.replan = False
                self.actors.resize()
                last_resize = now
            self._classify_deaths()
            if self._retry and not self._may_retry():
                dropped = ", ".join(spec.pod_id for spec, _, _ in self._retry)
                self.run_dir.log(f"requeued pod(s) {dropped} not started: the run is ending")
                self._retry = []
            self._retry_due(now)
            self._dispatch()
            waiting = {s.ready_ref: s for s in self.actors.slots.values() if s.ready_ref is not None}
            running = {
                s.busy.ref: s for s in self.actors.slots.values() if s.busy is not None and s.busy.ref
            }
            retrying = any(s.busy is not None and s.busy.ref is None for s in self.actors.slots.values())
            idle = not running and not retrying and not self._deaths and not self._retry
            if idle and not self.can_dispatch():
                break
            if not waiting and not running:
                if not self.actors.slots and not self._deaths:
                    no_room_since = no_room_since or now
                    last_wait_msg = self.actors.wait_for_room(now - no_room_since, now, last_wait_msg)
                    last_resize = -math.inf
                time.sleep(0.2)
                continue
            no_room_since = None
            self.actors.give_up_slow_starts(now)
            refs = [*waiting, *running]
            ready, rest = self.ray.wait(refs, num_returns=1, timeout=0.25, fetch_local=False)
            if ready and rest:
                more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=False)
                ready += more
            for ref in ready:
                if ref in waiting:
                    self.actors.on_ready(waiting[ref], lambda node: self._node_lost(node, []))
                else:
                    self._on_result(running[ref])
            if any(ref in running for ref in ready):
                # Re-check the cluster whenever a pod finishes, and refill the idle
                # slots before any cosmetic work (display, plots).
                self.actors.resize()
                last_resize = time.monotonic()
                self._dispatch()
            now = time.monotonic()
            if self.display is not None:
                if now - last_poll >= POLL_EVERY_S:
                    self.progress.ask(self.actors.slots)
                    last_poll = now
                self.progress.collect()
                self.display(self.snapshot())
            if now - last_plot >= PLOT_EVERY_S:
                self._plot()
                last_plot = time.monotonic()

    def _retry_due(self, now: float) -> None:
        for slot in self.actors.slots.values():
            job = slot.busy
            due = job is not None and job.retry_at is not None and now >= job.retry_at
            if due and job.ref is None:
                self._submit(slot)

    def _plot(self) -> None:
        try:
            self.run_dir.plot_learning_curves(
                self.board.score_name, [e.pod_id for e in self.board.entries]
            )
        except Exception as err:  # noqa: BLE001 - a plot must never stop a run
            self.run_dir.log(f"learning-curve plot failed: {err}", logging.WARNING)

    def snapshot(self) -> dict[str, Any]:
        """What a live display shows: running pods, leaderboard, counters."""
        running = self.progress.running(self.actors.slots, time.monotonic())
        budget = self.config.budget
        used = self.clock.used()
        return {
            "running": running,
            "entries": self.board.entries,
            "candidates": self.board.candidates_evaluated,
            "failed": self.board.progress.pods_failed,
            "pool": len(self.actors.slots),
            "target": self.actors.target,
            "budget": budget,
            "budget_used": used,
            "elapsed_s": self.elapsed(),
            "score_name": self.board.score_name,
        }

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, payload)
