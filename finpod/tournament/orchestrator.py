"""The orchestrator: the dispatch loop that keeps a pool of pod actors on Ray busy until the
budget is spent.

Its parts live in their own modules; this one wires them:

- **Data plane** (:mod:`~finpod.tournament.dataplane`) — at start the driver verifies the
  dataset's hash and puts the train and validation splits in the object store; pod actors
  get the refs, never a path.
- **Pool** (:mod:`~finpod.tournament.pool`) — each slot is a
  :class:`~finpod.tournament.pod.PodWorker` actor placed on a chosen node (hard node
  affinity) with ``cpus_per_pod`` CPUs, ``gpus_per_pod`` GPUs and the memory its tables
  and buffers need. The target size is how many pods the alive, non-quarantined nodes
  fit, capped by ``pods``; it is re-checked when a pod finishes and every few seconds.
- **Failures** (:mod:`~finpod.tournament.failures`) — a node lost is one event and its
  pods are requeued; an unavailable actor is retried; a node whose actors cannot start is
  quarantined; the run stops only on repeated failures with the same cause.
- **Asynchronous** (default) — as soon as a pod finishes, its result (scored inside the
  pod on validation) is recorded: leaderboard, candidates record, metrics; its slot gets
  the generator's next pod. **Generational** — a generation is dispatched and awaited as
  a whole; the top ``keep_fraction`` continue and the rest are perturbed copies.
- **Budget** — wall time, env steps or pods trained, counted over the whole run.

The loop never blocks on cosmetic work: progress polls are ``ray.wait(..., timeout=0)``
on refs already issued, learning curves are drawn at the end (and at most every
:data:`PLOT_EVERY_S`), metrics are appended, not rewritten.

Timing: per pod, the round trip from dispatch to result and the time inside ``train``;
their difference plus the idle time between a result and the slot's next dispatch is the
orchestration overhead of :class:`Summary`.
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
from finpod.runs import Entry, Leaderboard, RunDir, package_versions
from finpod.tournament import failures as fp
from finpod.tournament.config import SearchSpace, TournamentConfig
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy, version_mismatch
from finpod.tournament.generator import Generator, PodSpec, pod_id
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
from finpod.tournament.updater import Summary, Updater, entry_of

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


@dataclass
class _Inflight:
    spec: PodSpec
    parent: bytes | None
    parent_buffer: Any
    dispatched: float
    ref: Any = None
    buffer_ref: Any = None
    attempt: int = 0
    retry_at: float | None = None


@dataclass
class _Slot:
    index: int
    actor: Any
    ready_ref: Any
    created: float
    node_id: str
    busy: _Inflight | None = None
    idle_since: float | None = None


@dataclass
class _Death:
    """A pod whose actor died on a node that still looked alive: classified later."""

    inflight: _Inflight
    node_id: str
    message: str
    deadline: float


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
        self.slots: dict[int, _Slot] = {}
        self.summary = Summary()
        self.updater = Updater(board, run, self.summary)
        self.data: DataPlane | None = None
        self.pod = PodResources(self.config.cpus_per_pod, setup.gpus_per_pod)
        self._next_slot = 0
        self._target = 0
        self._replan = False
        self._capacity: dict[str, int] = {}
        self._retry: list[tuple[PodSpec, bytes | None, Any]] = []
        self._deaths: list[_Death] = []
        self._queue: list[tuple[PodSpec, Entry | None]] = []
        self._generation: list[tuple[PodResult, PodSpec]] = []
        self._memory: dict[str, bytes] = {}
        self._progress: dict[str, dict[str, Any]] = {}
        self._progress_refs: dict[Any, int] = {}
        self._node_versions: dict[str, dict[str, str]] = {}
        self._driver_versions = package_versions()
        self._worker_cls = ray.remote(concurrency_groups={"train": 1, "control": 2})(PodWorker)
        self._t0 = 0.0
        self._wall_before = board.progress.wall_s
        #: Children of off-policy pods inherit their parent's replay buffer (decided at
        #: start from ``tournament.inherit_buffer`` and the buffers' size).
        self._inherit = False

    # ----- budget -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self._wall_before + (time.monotonic() - self._t0)

    def _inflight(self) -> list[_Inflight]:
        busy = [s.busy for s in self.slots.values() if s.busy is not None]
        return busy + [d.inflight for d in self._deaths]

    def _budget_left(self) -> float:
        budget = self.config.budget
        if budget.kind == "time":
            return budget.amount - self.elapsed()
        pending = self._inflight()
        if budget.kind == "steps":
            planned = sum(f.spec.steps for f in pending) + sum(s.steps for s, _, _ in self._retry)
            return budget.amount - self.board.progress.env_steps - planned
        return budget.amount - self.board.candidates_evaluated - len(pending) - len(self._retry)

    def can_dispatch(self) -> bool:
        """Is there budget for one more pod (and no stop asked for)?"""
        if self.stop is not None and self.stop():
            return False
        left = self._budget_left()
        # A time budget keeps a sliver for the pod's first epoch and evaluation.
        return left > (0.5 if self.config.budget.kind == "time" else 0)

    def _may_retry(self) -> bool:
        """May requeued pods still start? (Not once a stop was asked for or time is up;
        their share of a step or pod budget was already counted.)"""
        if self.stop is not None and self.stop():
            return False
        return self.config.budget.kind != "time" or self._budget_left() > 0.5

    def _fit(self, spec: PodSpec) -> PodSpec:
        """Shrink the spec so it ends with the budget (steps left, or seconds left)."""
        budget = self.config.budget
        if budget.kind == "steps":
            spec.steps = int(max(1, min(spec.steps, self._budget_left())))
        elif budget.kind == "time":
            left = max(0.5, self._budget_left())
            spec.max_seconds = left if spec.max_seconds is None else min(spec.max_seconds, left)
        return spec

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
        self.slots[index] = _Slot(index, actor, actor.ready.remote(), time.monotonic(), node)
        return True

    def _drop_slot(self, slot: _Slot, kill: bool = True) -> None:
        self.slots.pop(slot.index, None)
        if kill:
            # An actor that is already gone needs no killing.
            with contextlib.suppress(Exception):
                self.ray.kill(slot.actor, no_restart=True)

    def _node_alive(self, node_id: str) -> bool:
        return any(n.get("NodeID") == node_id and n.get("Alive") for n in self.ray.nodes())

    # ----- dispatch ---------------------------------------------------------------------
    def _next_spec(self) -> tuple[PodSpec, bytes | None, Any] | None:
        if self._retry:
            return self._retry.pop(0)
        board = self.board
        if self.config.mode == "generational":
            if not self._queue:
                if self._inflight() or self._retry:
                    return None
                self._new_generation()
            if not self._queue:
                return None
            spec, _ = self._queue.pop(0)
            index = board.progress.next_pod
            spec = replace(spec, pod_id=pod_id(index))
        else:
            index = board.progress.next_pod
            spec = self.generator.next(board, index)
        board.progress.next_pod = index + 1
        data = self._parent_bytes(spec.parent)
        if spec.parent and data is None:
            # The parent is gone (evicted, or lost with a crashed generation): start fresh.
            spec = self.generator.fresh(index)
        buffer = self.updater.buffers.get(spec.parent) if spec.parent else None
        return self._fit(spec), data, buffer

    def _parent_bytes(self, parent_id: str | None) -> bytes | None:
        if not parent_id:
            return None
        if parent_id in self._memory:
            return self._memory[parent_id]
        entry = self.board.get(parent_id)
        return None if entry is None else self.board.checkpoint_path(entry).read_bytes()

    def _new_generation(self) -> None:
        """Fill the queue with the next generation (first: from scratch or the leaderboard)."""
        size = self.config.generation_size or max(1, self._target)
        base = self.board.progress.next_pod
        results = sorted(self._generation, key=lambda rs: -_score_key(rs[0].score))
        self._generation = []
        if results:
            population = [entry_of(r, spec) for r, spec in results]
            self.board.progress.generation += 1
        else:
            # A resumed run restarts its population from the leaderboard.
            population = list(self.board.entries)
        keep = max(1, math.ceil(self.config.keep_fraction * size)) if population else 0
        elites = population[:keep]
        elite_ids = {e.pod_id for e in elites}
        self._memory = {r.pod_id: r.checkpoint for r, _ in results if r.pod_id in elite_ids}
        queue: list[tuple[PodSpec, Entry | None]] = []
        for i in range(size):
            index = base + i
            if not elites:
                queue.append((self.generator.fresh(index), None))
            elif i < len(elites):
                parent = elites[i]
                queue.append((self.generator.child(parent, index, perturb=False), parent))
            else:
                rng = self.generator.rng(index)
                parent = elites[int(rng.integers(len(elites)))]
                queue.append((self.generator.child(parent, index, rng=rng), parent))
        self._queue = queue
        self.run_dir.log(
            f"generation {self.board.progress.generation}: {len(queue)} pod(s), {len(elites)} elite(s)"
        )

    def _dispatch(self) -> None:
        for slot in sorted(self.slots.values(), key=lambda s: s.index):
            if slot.busy is not None or slot.ready_ref is not None:
                continue
            if len(self.slots) > self._target:
                self._drop_slot(slot)
                continue
            if not (self._retry and self._may_retry()) and not self.can_dispatch():
                return
            nxt = self._next_spec()
            if nxt is None:
                return
            spec, parent, buffer = nxt
            now = time.monotonic()
            if slot.idle_since is not None:
                self.summary.dispatch_gap_s += now - slot.idle_since
                slot.idle_since = None
            slot.busy = _Inflight(spec, parent, buffer, now)
            self._submit(slot)
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

    def _submit(self, slot: _Slot) -> None:
        job = slot.busy
        assert job is not None
        buffer_arg = [job.parent_buffer] if job.parent_buffer is not None else None
        job.ref, job.buffer_ref = slot.actor.train.remote(
            job.spec, job.parent, buffer_arg, self._inherit
        )
        job.retry_at = None

    # ----- results ----------------------------------------------------------------------
    def _on_ready(self, slot: _Slot) -> None:
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

    def _start_failed(self, slot: _Slot, message: str) -> None:
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

    def _on_result(self, slot: _Slot) -> None:
        job = slot.busy
        assert job is not None
        now = time.monotonic()
        try:
            result: PodResult = self.ray.get(job.ref)
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
            self._pod_failed(job, f"pod {job.spec.pod_id} failed: {_short(err)}")
            return
        slot.busy, slot.idle_since = None, now
        self._record(slot, job, result, now)

    def _actor_died(self, slot: _Slot, err: BaseException) -> None:
        job = slot.busy
        assert job is not None
        slot.busy = None
        self._drop_slot(slot)
        text = str(err)
        message = f"pod {job.spec.pod_id} died on node {slot.node_id[:8]}: {_short(err)}"
        node_gone = getattr(err, "preempted", False) or "node has died" in text
        if node_gone or not self._node_alive(slot.node_id):
            self._node_lost(slot.node_id, [job])
        elif "killed by `ray.kill`" in text:
            self._pod_failed(job, message)
        else:
            # The node may be on its way out: give the cluster a moment to say so.
            self._deaths.append(
                _Death(job, slot.node_id, message, time.monotonic() + fp.NODE_DEATH_GRACE_S)
            )

    def _classify_deaths(self) -> None:
        if not self._deaths:
            return
        now = time.monotonic()
        alive = {n.get("NodeID") for n in self.ray.nodes() if n.get("Alive")}
        keep: list[_Death] = []
        for death in self._deaths:
            if death.node_id not in alive:
                self._node_lost(death.node_id, [death.inflight])
            elif now >= death.deadline:
                self._pod_failed(death.inflight, death.message)
            else:
                keep.append(death)
        self._deaths = keep

    def _node_lost(self, node: str, jobs: list[_Inflight]) -> None:
        """One event per node; its pods are requeued with the same spec."""
        first = self.policy.node_lost(node)
        self.summary.node_events = self.policy.node_events
        for job in jobs:
            self._retry.append((job.spec, job.parent, job.parent_buffer))
            self.summary.pods_requeued += 1
        ids = ", ".join(j.spec.pod_id for j in jobs)
        if first:
            self.run_dir.log(f"node {node[:8]} lost" + (f"; requeued {ids}" if ids else ""))
            self._emit("node_lost", {"node_id": node, "requeued": [j.spec.pod_id for j in jobs]})
        elif ids:
            self.run_dir.log(f"requeued {ids} (lost with node {node[:8]})")
        self._replan = True  # re-plan the pool

    def _pod_failed(self, job: _Inflight, message: str) -> None:
        if self.config.mode == "generational":
            # Generational mode re-runs a lost member of its generation under a new id.
            self._queue.insert(0, (job.spec, None))
        self._count_failed(message)
        self.policy.pod_failed(message)
        self.policy.check(str(self.run_dir.path / "train.log"))

    def _count_failed(self, message: str) -> None:
        self.updater.failed(message, self.elapsed())
        self._emit("failed", {"message": message})

    def _record(self, slot: _Slot, job: _Inflight, result: PodResult, now: float) -> None:
        """A pod reported: once per pod id, into the run's records (see :class:`Updater`)."""
        if not self.updater.first_report(result.pod_id):
            return
        self._progress.pop(result.pod_id, None)
        self.summary.pod_s += now - job.dispatched
        self.summary.inside_s += result.train_s
        self.board.progress.env_steps += result.steps_done
        if result.failure:
            self.summary.pods_non_finite += 1
            self.policy.non_finite()
            self._count_failed(f"pod {result.pod_id} failed: {result.failure}")
            return
        self.policy.succeeded()
        node = result.node_id or slot.node_id
        started = job.dispatched - self._t0 + self._wall_before
        rank = self.updater.scored(
            result,
            job.spec,
            node,
            started_s=started,
            wall_s=self.elapsed(),
            buffer_ref=job.buffer_ref if self._inherit else None,
        )
        if self.config.mode == "generational":
            self._generation.append((result, job.spec))
        self._emit(
            "finish", {"pod_id": result.pod_id, "result": result, "rank": rank, "node_id": node}
        )

    # ----- main loop --------------------------------------------------------------------
    def run(self) -> Summary:
        """Train until the budget is spent and every running pod has reported."""
        self._t0 = time.monotonic()
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
            self.summary.wall_s = time.monotonic() - self._t0
            self.summary.quarantined = dict(self.policy.quarantined)
            self.board.progress.wall_s = self.elapsed()
            self.board.save()
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
                    self._ask_progress()
                    last_poll = now
                self._collect_progress()
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

    def _ask_progress(self) -> None:
        """Issue a progress call to every busy pod that has none outstanding."""
        asked = set(self._progress_refs.values())
        for slot in self.slots.values():
            if slot.busy is not None and slot.index not in asked:
                self._progress_refs[slot.actor.progress.remote()] = slot.index

    def _collect_progress(self) -> None:
        """Read the progress replies that have arrived (never waits)."""
        if not self._progress_refs:
            return
        refs = list(self._progress_refs)
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
        for ref in ready:
            self._progress_refs.pop(ref, None)
            with contextlib.suppress(Exception):  # a dying pod is handled elsewhere
                info = self.ray.get(ref, timeout=0)
                if info.get("pod_id"):
                    self._progress[info["pod_id"]] = info

    def snapshot(self) -> dict[str, Any]:
        """What a live display shows: running pods, leaderboard, counters."""
        running = []
        now = time.monotonic()
        for slot in sorted(self.slots.values(), key=lambda s: s.index):
            if slot.busy is None:
                continue
            spec = slot.busy.spec
            info = self._progress.get(spec.pod_id, {})
            running.append(
                {
                    "pod_id": spec.pod_id,
                    "algorithm": spec.algorithm,
                    "parent": spec.parent,
                    "node": slot.node_id[:8],
                    "epoch": info.get("epoch", 0),
                    "epochs": spec.epochs,
                    "score": info.get("score"),
                    "elapsed_s": now - slot.busy.dispatched,
                }
            )
        budget = self.config.budget
        used = {
            "time": self.elapsed(),
            "steps": float(self.board.progress.env_steps),
            "pods": float(self.board.candidates_evaluated),
        }[budget.kind]
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


def _score_key(score: float) -> float:
    return score if math.isfinite(score) else -math.inf


def _short(err: BaseException) -> str:
    """The last meaningful line of a (possibly remote) exception."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(err).__name__)[:300]
