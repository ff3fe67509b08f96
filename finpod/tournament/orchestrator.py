"""The orchestrator: the dispatch loop that keeps a pool of pod actors on Ray busy until the
budget is spent.

Its parts live in their own modules, each owning its state; this one wires them:

- **Data plane** (:mod:`~finpod.tournament.dataplane`) — at start the driver verifies the
  dataset's hash and puts the train and validation splits in the object store; pod actors
  get the refs, never a path.
- **Pool** (:mod:`~finpod.tournament.pool`, :mod:`~finpod.tournament.slots`) — each slot
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

import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from finpod.errors import FinpodError
from finpod.runs import Leaderboard, RunDir, package_versions
from finpod.tournament import failures as fp
from finpod.tournament.budget import BudgetClock
from finpod.tournament.config import SearchSpace, TournamentConfig
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy, version_mismatch
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.pod import PodResult, PodWorker
from finpod.tournament.pool import (
    PodResources,
    inherit_buffers,
    largest_buffer_bytes,
    node_capacity,
    pick_node,
    pod_memory_bytes,
    request_pods,
)
from finpod.tournament.progress import ProgressPoller
from finpod.tournament.schedulers import group_key, make_scheduler
from finpod.tournament.slots import Death, Inflight, Slot
from finpod.tournament.updater import Summary, Updater

#: Seconds between two checks of the cluster's size while pods are running.
RESIZE_EVERY_S = 2.0
#: Seconds between two progress polls of running pods (only with a display attached).
POLL_EVERY_S = 2.0
#: Seconds a local run (no autoscaler) waits for room for one pod before giving up.
NO_ROOM_TIMEOUT_S = 120.0
#: Seconds between two "waiting for resources" lines while a cluster scales up.
WAIT_MESSAGE_EVERY_S = 30.0
#: Seconds between two learning-curve plots while the run goes on (also drawn at the end).
PLOT_EVERY_S = 300.0
#: Seconds a pod actor may take to start (fetch the data, build the pod) before its slot
#: is given up (not counted as a failure: the node may just be busy).
START_TIMEOUT_S = 600.0


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
        self.slots: dict[int, Slot] = {}
        self.summary = Summary()
        self.updater = Updater(board, run, self.summary)
        self.data: DataPlane | None = None
        self.pod = PodResources(self.config.cpus_per_pod, setup.gpus_per_pod)
        self._next_slot = 0
        self._target = 0
        self._replan = False
        self._capacity: dict[str, int] = {}
        self._retry: list[tuple[PodSpec, bytes | None, Any]] = []
        self._deaths: list[Death] = []
        self.clock = BudgetClock(self.config.budget, board, stop)
        self.scheduler = make_scheduler(
            self.config, self.generator, board, run.log, lambda: self._target
        )
        self.progress = ProgressPoller(ray)
        self._node_versions: dict[str, dict[str, str]] = {}
        self._driver_versions = package_versions()
        self._worker_cls = ray.remote(concurrency_groups={"train": 1, "control": 2})(PodWorker)
        #: Children of off-policy pods inherit their parent's replay buffer (decided at
        #: start from ``tournament.inherit_buffer`` and the buffers' size).
        self._inherit = False

    # ----- budget -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self.clock.elapsed()

    def _inflight(self) -> list[Inflight]:
        busy = [s.busy for s in self.slots.values() if s.busy is not None]
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

    # ----- pool -------------------------------------------------------------------------
    def pool_target(self) -> int:
        """Pods the alive, non-quarantined nodes fit now (per node), capped by ``pods``."""
        nodes = self.ray.nodes()
        self._capacity = node_capacity(nodes, self.pod, set(self.policy.quarantined))
        if not self._capacity and self.policy.quarantined:
            fitting = list(node_capacity(nodes, self.pod))
            self.policy.all_quarantined(fitting, str(self.run_dir.path / "train.log"))
        fit = sum(self._capacity.values())
        if self.config.pods is not None:
            fit = min(fit, self.config.pods)
        if self.config.mode == "generational" and self.config.generation_size is not None:
            fit = min(fit, self.config.generation_size)
        return fit

    def _resize(self) -> None:
        target = self.pool_target()
        if target != self._target:
            self._target = target
            self.summary.pool_sizes.append(target)
            self.summary.max_pool = max(self.summary.max_pool, target)
            self.run_dir.log(f"pool target {target} pod(s)")
            self._emit("pool", {"target": target})
        while len(self.slots) < self._target and self._start_slot():
            pass
        if len(self.slots) > self._target:
            for slot in sorted(self.slots.values(), key=lambda s: -s.index):
                if len(self.slots) <= self._target:
                    break
                if slot.busy is None:
                    self._drop_slot(slot)

    def _start_slot(self) -> bool:
        """Start a pod actor on the node with the most room; False when none has room."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        used: dict[str, int] = {}
        for slot in self.slots.values():
            used[slot.node_id] = used.get(slot.node_id, 0) + 1
        node = pick_node(self._capacity, used)
        if node is None:
            return False
        assert self.data is not None
        s = self.setup
        options = {
            **self.pod.actor_options(),
            "max_restarts": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
        }
        actor = self._worker_cls.options(**options).remote(
            self.data.ref_list(),
            s.env_config,
            s.device,
            self.config.cpus_per_pod,
            self.config.num_learners,
        )
        index = self._next_slot
        self._next_slot += 1
        self.slots[index] = Slot(index, actor, actor.ready.remote(), time.monotonic(), node)
        return True

    def _drop_slot(self, slot: Slot, kill: bool = True) -> None:
        self.slots.pop(slot.index, None)
        if kill:
            # An actor that is already gone needs no killing.
            with contextlib.suppress(Exception):
                self.ray.kill(slot.actor, no_restart=True)

    def _node_alive(self, node_id: str) -> bool:
        return any(n.get("NodeID") == node_id and n.get("Alive") for n in self.ray.nodes())

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
        for slot in sorted(self.slots.values(), key=lambda s: s.index):
            if slot.busy is not None or slot.ready_ref is not None:
                continue
            if len(self.slots) > self._target:
                self._drop_slot(slot)
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
    def _on_ready(self, slot: Slot) -> None:
        ref, slot.ready_ref = slot.ready_ref, None
        try:
            info = self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            self._drop_slot(slot)
            if not self._node_alive(slot.node_id):
                self._node_lost(slot.node_id, [])
                return
            self._start_failed(slot, _short(err))
            return
        if info.get("error"):
            self._drop_slot(slot)
            self._start_failed(slot, info["error"])
            return
        self.policy.started(slot.node_id)
        self._check_versions(slot.node_id, info.get("versions", {}))
        self.summary.startup_s += time.monotonic() - slot.created
        slot.idle_since = time.monotonic()
        self._emit("slot", {"slot": slot.index, "node_id": slot.node_id})

    def _start_failed(self, slot: Slot, message: str) -> None:
        node = slot.node_id
        self.run_dir.log(
            f"pod actor on slot {slot.index} failed to start on node {node[:8]}: {message}",
            logging.WARNING,
        )
        self._emit("failed", {"message": message, "node_id": node, "start": True})
        reason = self.policy.start_failed(node, message)
        if reason is not None:
            self.summary.quarantined[node] = reason
            self.run_dir.log(f"quarantined node {node}: {reason}", logging.WARNING)
            self._emit("quarantine", {"node_id": node, "reason": reason})
            self._replan = True  # re-plan the pool without that node
        self.policy.check(str(self.run_dir.path / "train.log"))

    def _check_versions(self, node: str, versions: dict[str, str]) -> None:
        """Record a node's package versions; a Ray major.minor unlike the driver's stops."""
        if node in self._node_versions:
            return
        self._node_versions[node] = versions
        fatal, differ = version_mismatch(self._driver_versions, versions)
        if fatal:
            raise FinpodError(
                f"node {node[:8]} {fatal}",
                "install the same Ray version on every node and the driver",
            )
        if differ:
            self.run_dir.log(f"node {node[:8]} differs: {', '.join(differ)}", logging.WARNING)
        compact = {k: versions[k] for k in ("finpod", "ray", "torch", "python") if k in versions}
        self.run_dir.record_nodes({node: compact})

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
                    f"pod {job.spec.pod_id} unreachable ({_short(err)}); retry {job.attempt} "
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
            self._pod_failed(job, f"pod {job.ids} failed: {_short(err)}")
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
        self._drop_slot(slot)
        text = str(err)
        message = f"pod {job.ids} died on node {slot.node_id[:8]}: {_short(err)}"
        node_gone = getattr(err, "preempted", False) or "node has died" in text
        if node_gone or not self._node_alive(slot.node_id):
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
            self._request(self.config.pods)
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
            for slot in list(self.slots.values()):
                self._drop_slot(slot)
            self._request(0)
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
        self.pod = replace(self.pod, memory=memory)
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
            if self._replan or now - last_resize >= RESIZE_EVERY_S:
                self._replan = False
                self._resize()
                last_resize = now
            self._classify_deaths()
            if self._retry and not self._may_retry():
                dropped = ", ".join(spec.pod_id for spec, _, _ in self._retry)
                self.run_dir.log(f"requeued pod(s) {dropped} not started: the run is ending")
                self._retry = []
            self._retry_due(now)
            self._dispatch()
            waiting = {s.ready_ref: s for s in self.slots.values() if s.ready_ref is not None}
            running = {
                s.busy.ref: s for s in self.slots.values() if s.busy is not None and s.busy.ref
            }
            retrying = any(s.busy is not None and s.busy.ref is None for s in self.slots.values())
            idle = not running and not retrying and not self._deaths and not self._retry
            if idle and not self.can_dispatch():
                break
            if not waiting and not running:
                if not self.slots and not self._deaths:
                    no_room_since = no_room_since or now
                    last_wait_msg = self._wait_for_room(now - no_room_since, now, last_wait_msg)
                    last_resize = -math.inf
                time.sleep(0.2)
                continue
            no_room_since = None
            self._give_up_slow_starts(now)
            refs = [*waiting, *running]
            ready, rest = self.ray.wait(refs, num_returns=1, timeout=0.25, fetch_local=False)
            if ready and rest:
                more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=False)
                ready += more
            for ref in ready:
                if ref in waiting:
                    self._on_ready(waiting[ref])
                else:
                    self._on_result(running[ref])
            if any(ref in running for ref in ready):
                # Re-check the cluster whenever a pod finishes, and refill the idle
                # slots before any cosmetic work (display, plots).
                self._resize()
                last_resize = time.monotonic()
                self._dispatch()
            now = time.monotonic()
            if self.display is not None:
                if now - last_poll >= POLL_EVERY_S:
                    self.progress.ask(self.slots)
                    last_poll = now
                self.progress.collect()
                self.display(self.snapshot())
            if now - last_plot >= PLOT_EVERY_S:
                self._plot()
                last_plot = time.monotonic()

    def _retry_due(self, now: float) -> None:
        for slot in self.slots.values():
            job = slot.busy
            due = job is not None and job.retry_at is not None and now >= job.retry_at
            if due and job.ref is None:
                self._submit(slot)

    def _give_up_slow_starts(self, now: float) -> None:
        for slot in list(self.slots.values()):
            if slot.ready_ref is not None and now - slot.created > START_TIMEOUT_S:
                self.run_dir.log(
                    f"pod actor on slot {slot.index} did not start on node {slot.node_id[:8]} "
                    f"within {START_TIMEOUT_S:.0f}s; giving its slot up",
                    logging.WARNING,
                )
                self._drop_slot(slot)

    def _wait_for_room(self, waited: float, now: float, last_msg: float) -> float:
        """No node fits a pod: ask the autoscaler for one pod's resources and keep waiting
        (cluster runs), or give up after :data:`NO_ROOM_TIMEOUT_S` (local runs)."""
        need = f"{self.pod.cpus:g} CPU(s)" + (
            f" and {self.pod.gpus:g} GPU(s)" if self.pod.gpus else ""
        )
        if not self.setup.request_resources:
            if waited > NO_ROOM_TIMEOUT_S:
                raise FinpodError(
                    f"the Ray cluster has no node with {need} free for a pod",
                    "lower tournament.cpus_per_pod / gpus_per_pod or add nodes",
                )
            return last_msg
        if now - last_msg >= WAIT_MESSAGE_EVERY_S:
            if self.config.pods is None:
                self._request(1)
            self.run_dir.log(
                f"waiting for a node with {need} (asked the autoscaler; {waited:.0f}s so far)"
            )
            self._emit("waiting", {"need": self.pod.bundle(), "waited_s": waited})
            return now
        return last_msg

    def _request(self, pods: int) -> None:
        """Tell the autoscaler how many pods' resources to provide (0 releases them)."""
        if not self.setup.request_resources:
            return
        problem = request_pods(self.pod, pods)
        if problem is not None:
            self.run_dir.log(f"autoscaler request for {pods} pod(s) not made: {problem}")

    def _plot(self) -> None:
        try:
            self.run_dir.plot_learning_curves(
                self.board.score_name, [e.pod_id for e in self.board.entries]
            )
        except Exception as err:  # noqa: BLE001 - a plot must never stop a run
            self.run_dir.log(f"learning-curve plot failed: {err}", logging.WARNING)

    def snapshot(self) -> dict[str, Any]:
        """What a live display shows: running pods, leaderboard, counters."""
        running = self.progress.running(self.slots, time.monotonic())
        budget = self.config.budget
        used = self.clock.used()
        return {
            "running": running,
            "entries": self.board.entries,
            "candidates": self.board.candidates_evaluated,
            "failed": self.board.progress.pods_failed,
            "pool": len(self.slots),
            "target": self._target,
            "budget": budget,
            "budget_used": used,
            "elapsed_s": self.elapsed(),
            "score_name": self.board.score_name,
        }

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, payload)


def _short(err: BaseException) -> str:
    """The last meaningful line of a (possibly remote) exception."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(err).__name__)[:300]
