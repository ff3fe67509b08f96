"""The orchestrator: keeps a pool of pod actors on Ray busy until the budget is spent.

- **Pool** — each pool slot is a :class:`~finpod.tournament.pod.PodWorker` actor holding
  ``cpus_per_pod`` CPUs and ``gpus_per_pod`` GPUs (fractions share a GPU). It loads the
  dataset once and trains pod after pod. The pool's target size is how many slots the
  *alive* nodes fit (``ray.nodes()``, per node, so packing is exact), capped by
  ``pods``; it is re-checked whenever a pod finishes and every few seconds, so a node
  joining grows the pool and a node leaving shrinks it.
- **Asynchronous** (default) — as soon as a pod finishes, it is evaluated (inside the pod,
  on the validation split), the updater records it on the leaderboard, and its slot gets
  the generator's next pod. **Generational** — a generation of pods is dispatched and
  awaited as a whole; the top ``keep_fraction`` continue unperturbed and the rest of the
  next generation are perturbed copies of them.
- **Faults** — a pod actor that dies (``RayActorError``: crash, ``ray.kill``, node lost)
  or a pod that raises is logged, counted and replaced; the run stops with an error only
  after ``max_failures`` failures in a row.
- **Budget** — wall time, env steps or pods trained, counted over the whole run
  (a resumed run continues the counts saved in ``leaderboard.json``).

Timing: the driver records, per pod, the round trip from dispatch to result and the time
the pod spent inside ``train``; their difference plus the driver's own bookkeeping
between a result and the slot's next dispatch is the orchestration overhead reported in
:class:`Summary`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from finpod.errors import FinpodError
from finpod.tournament.config import SearchSpace, TournamentConfig
from finpod.tournament.generator import Generator, PodSpec, pod_id
from finpod.tournament.leaderboard import Entry, Leaderboard, checkpoint_name
from finpod.tournament.pod import PodResult, PodWorker
from finpod.tournament.rundir import RunDir

#: Seconds between two checks of the cluster's size while pods are running.
RESIZE_EVERY_S = 2.0
#: Seconds between two progress polls of running pods (only with a display attached).
POLL_EVERY_S = 2.0
#: Seconds the run waits for a cluster with room for one pod before giving up.
NO_ROOM_TIMEOUT_S = 120.0
#: Seconds between two learning-curve plots while the run goes on.
PLOT_EVERY_S = 30.0


@dataclass
class Setup:
    """What the orchestrator needs besides the leaderboard and the run directory."""

    config: TournamentConfig
    """Validated ``[tournament]`` table."""
    space: SearchSpace
    """Validated ``[search]`` table."""
    dataset_dir: Path
    """Dataset directory; every node must see it at this path."""
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
    """On a cluster with an autoscaler, ask it for ``pods`` pods' worth of resources (when
    ``pods`` is a number), so nodes are added and the pool grows into them."""


@dataclass
class Summary:
    """How a run (or a resumed part of it) went."""

    pods_trained: int = 0
    """Pods evaluated in this session."""
    pods_failed: int = 0
    """Pods lost to crashes or errors in this session."""
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
    """Σ of seconds pod actors took to start and load the dataset."""
    best: Entry | None = None
    """Leaderboard's best entry at the end."""

    @property
    def orchestration_s(self) -> float:
        """Seconds of pod time not spent training: RPC, serialization, driver bookkeeping."""
        return max(0.0, self.pod_s - self.inside_s) + self.dispatch_gap_s

    @property
    def orchestration_share(self) -> float:
        """``orchestration_s`` as a share of total pod time (0 when nothing ran)."""
        total = self.pod_s + self.dispatch_gap_s
        return self.orchestration_s / total if total > 0 else 0.0


@dataclass
class _Inflight:
    spec: PodSpec
    ref: Any
    dispatched: float


@dataclass
class _Slot:
    index: int
    actor: Any
    ready_ref: Any
    created: float
    node_id: str = ""
    busy: _Inflight | None = None
    idle_since: float | None = None


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
        self.slots: dict[int, _Slot] = {}
        self.summary = Summary()
        self._next_slot = 0
        self._target = 0
        self._consecutive_failures = 0
        self._last_error = ""
        self._queue: list[tuple[PodSpec, Entry | None]] = []
        self._generation: list[tuple[PodResult, PodSpec]] = []
        self._memory: dict[str, bytes] = {}
        self._progress: dict[str, dict[str, Any]] = {}
        self._worker_cls = ray.remote(PodWorker)
        self._t0 = 0.0
        self._wall_before = board.progress.wall_s

    # ----- budget -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self._wall_before + (time.monotonic() - self._t0)

    def _inflight(self) -> list[_Inflight]:
        return [s.busy for s in self.slots.values() if s.busy is not None]

    def _budget_left(self) -> float:
        budget = self.config.budget
        if budget.kind == "time":
            return budget.amount - self.elapsed()
        if budget.kind == "steps":
            planned = sum(f.spec.steps for f in self._inflight())
            return budget.amount - self.board.progress.env_steps - planned
        return budget.amount - self.board.candidates_evaluated - len(self._inflight())

    def can_dispatch(self) -> bool:
        """Is there budget for one more pod (and no stop asked for)?"""
        if self.stop is not None and self.stop():
            return False
        left = self._budget_left()
        # A time budget keeps a sliver for the pod's first epoch and evaluation.
        return left > (0.5 if self.config.budget.kind == "time" else 0)

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
        """Pods the alive nodes fit now (per node), capped by ``config.pods``."""
        cpus, gpus = self.config.cpus_per_pod, self.setup.gpus_per_pod
        fit = 0
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            res = node.get("Resources", {})
            n = math.floor(res.get("CPU", 0.0) / cpus + 1e-9)
            if gpus > 0:
                n = min(n, math.floor(res.get("GPU", 0.0) / gpus + 1e-9))
            fit += max(0, n)
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
        while len(self.slots) < self._target:
            self._start_slot()
        if len(self.slots) > self._target:
            for slot in sorted(self.slots.values(), key=lambda s: -s.index):
                if len(self.slots) <= self._target:
                    break
                if slot.busy is None:
                    self._drop_slot(slot, kill=True)

    def _start_slot(self) -> None:
        s = self.setup
        options: dict[str, Any] = {
            "num_cpus": self.config.cpus_per_pod,
            "max_restarts": 0,
            "max_concurrency": 2,
        }
        if s.gpus_per_pod > 0:
            options["num_gpus"] = s.gpus_per_pod
        threads = max(1, int(self.config.cpus_per_pod))
        actor = self._worker_cls.options(**options).remote(
            str(s.dataset_dir), s.env_config, s.device, threads
        )
        index = self._next_slot
        self._next_slot += 1
        self.slots[index] = _Slot(index, actor, actor.ready.remote(), time.monotonic())

    def _drop_slot(self, slot: _Slot, kill: bool) -> None:
        self.slots.pop(slot.index, None)
        if kill:
            # An actor that is already gone needs no killing.
            with contextlib.suppress(Exception):
                self.ray.kill(slot.actor, no_restart=True)

    # ----- dispatch ---------------------------------------------------------------------
    def _next_spec(self) -> tuple[PodSpec, bytes | None] | None:
        board = self.board
        if self.config.mode == "generational":
            if not self._queue:
                if self._inflight():
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
        board.progress.wall_s = self.elapsed()
        board.save()
        data = self._parent_bytes(spec.parent)
        if spec.parent and data is None:
            # The parent is gone (evicted, or lost with a crashed generation): start fresh.
            spec = self.generator.fresh(index)
        return self._fit(spec), data

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
            population = [_entry_of(r, spec) for r, spec in results]
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
                self._drop_slot(slot, kill=True)
                continue
            if not self.can_dispatch():
                return
            nxt = self._next_spec()
            if nxt is None:
                return
            spec, parent = nxt
            now = time.monotonic()
            if slot.idle_since is not None:
                self.summary.dispatch_gap_s += now - slot.idle_since
                slot.idle_since = None
            slot.busy = _Inflight(spec, slot.actor.train.remote(spec, parent), now)
            origin = f"child of {spec.parent}" if spec.parent else "from scratch"
            self.run_dir.log(
                f"start {spec.pod_id} {spec.algorithm} {origin} on slot {slot.index} "
                f"({spec.steps} steps, hparams {spec.hparams})"
            )
            self._emit(
                "start",
                {"pod_id": spec.pod_id, "slot": slot.index, "spec": spec, "actor": slot.actor},
            )

    # ----- results ----------------------------------------------------------------------
    def _on_ready(self, slot: _Slot) -> None:
        ref, slot.ready_ref = slot.ready_ref, None
        try:
            slot.node_id = self.ray.get(ref)
        except Exception as err:  # noqa: BLE001 - an actor that cannot start is a failed pod
            self._drop_slot(slot, kill=True)
            self._failed(f"pod actor on slot {slot.index} failed to start: {_short(err)}")
            return
        self.summary.startup_s += time.monotonic() - slot.created
        slot.idle_since = time.monotonic()
        self._emit("slot", {"slot": slot.index, "node_id": slot.node_id})

    def _on_result(self, slot: _Slot) -> None:
        assert slot.busy is not None
        inflight, slot.busy = slot.busy, None
        now = time.monotonic()
        try:
            result: PodResult = self.ray.get(inflight.ref)
        except self.ray.exceptions.RayActorError as err:
            self._drop_slot(slot, kill=True)
            self._requeue(inflight.spec)
            self._failed(
                f"pod {inflight.spec.pod_id} died on node {slot.node_id[:8]}: {_short(err)}"
            )
            return
        except Exception as err:  # noqa: BLE001 - a pod that raised is logged and replaced
            slot.idle_since = now
            self._requeue(inflight.spec)
            self._failed(f"pod {inflight.spec.pod_id} failed: {_short(err)}")
            return
        self._consecutive_failures = 0
        self.summary.pod_s += now - inflight.dispatched
        self.summary.inside_s += result.train_s
        self.summary.pods_trained += 1
        node = result.node_id or slot.node_id
        self.summary.nodes[node] = self.summary.nodes.get(node, 0) + 1
        entry = _entry_of(result, inflight.spec)
        offset = inflight.dispatched - self._t0 + self._wall_before
        self.board.progress.env_steps += result.steps_done
        self.board.progress.wall_s = self.elapsed()
        inserted = self.board.record(entry, result.checkpoint)
        self.run_dir.add_metrics(
            (result.pod_id, steps, offset + wall, split, metric, value)
            for steps, wall, split, metric, value in result.metrics
        )
        if self.config.mode == "generational":
            self._generation.append((result, inflight.spec))
        rank = next(
            (i + 1 for i, e in enumerate(self.board.entries) if e.pod_id == result.pod_id), None
        )
        self.run_dir.log(
            f"done {result.pod_id} {result.algorithm} score {result.score:.4f} "
            f"after {result.env_steps} steps in {result.train_s:.1f}s on node {node[:8]}"
            + (f" → leaderboard #{rank}" if inserted and rank else "")
        )
        self._progress.pop(result.pod_id, None)
        self._emit(
            "finish", {"pod_id": result.pod_id, "result": result, "rank": rank, "node_id": node}
        )
        slot.idle_since = time.monotonic()

    def _requeue(self, spec: PodSpec) -> None:
        """Generational mode re-runs a lost member of its generation under a new id."""
        if self.config.mode == "generational":
            self._queue.insert(0, (spec, None))

    def _failed(self, message: str) -> None:
        self.summary.pods_failed += 1
        self.board.progress.pods_failed += 1
        self.board.progress.wall_s = self.elapsed()
        self.board.save()
        self._consecutive_failures += 1
        self._last_error = message
        self.run_dir.log(message, logging.WARNING)
        self._emit("failed", {"message": message})
        if self._consecutive_failures >= self.config.max_failures:
            raise FinpodError(
                f"{self._consecutive_failures} pods failed in a row; last: {message}",
                f"see {self.run_dir.path / 'train.log'}",
            )

    # ----- main loop --------------------------------------------------------------------
    def run(self) -> Summary:
        """Train until the budget is spent and every running pod has reported."""
        self._t0 = time.monotonic()
        last_resize = -math.inf
        last_poll = time.monotonic()
        last_plot = time.monotonic()
        no_room_since: float | None = None
        self.run_dir.log(
            f"tournament {self.config.mode} budget {self.config.budget} "
            f"({self.board.candidates_evaluated} candidates so far)"
        )
        self._request_resources(self.config.pods)
        try:
            while True:
                now = time.monotonic()
                if now - last_resize >= RESIZE_EVERY_S:
                    self._resize()
                    last_resize = now
                self._dispatch()
                waiting = {s.ready_ref: s for s in self.slots.values() if s.ready_ref is not None}
                running = {s.busy.ref: s for s in self.slots.values() if s.busy is not None}
                if not running and not self.can_dispatch():
                    break
                if not waiting and not running:
                    if not self.slots:
                        no_room_since = no_room_since or now
                        if now - no_room_since > NO_ROOM_TIMEOUT_S:
                            raise FinpodError(
                                f"the Ray cluster has no node with {self.config.cpus_per_pod} CPU(s)"
                                + (
                                    f" and {self.setup.gpus_per_pod} GPU(s)"
                                    if self.setup.gpus_per_pod
                                    else ""
                                )
                                + " free for a pod",
                                "lower tournament.cpus_per_pod / gpus_per_pod or add nodes",
                            )
                        last_resize = -math.inf
                    time.sleep(0.2)
                    continue
                no_room_since = None
                refs = [*waiting, *running]
                ready, rest = self.ray.wait(refs, num_returns=1, timeout=0.25, fetch_local=False)
                if ready and rest:
                    more, _ = self.ray.wait(
                        rest, num_returns=len(rest), timeout=0, fetch_local=False
                    )
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
                if self.display is not None and now - last_poll >= POLL_EVERY_S:
                    self._poll_progress()
                    last_poll = now
                if self.display is not None:
                    self.display(self.snapshot())
                if now - last_plot >= PLOT_EVERY_S and ready:
                    self._plot()
                    last_plot = now
        finally:
            self.summary.wall_s = time.monotonic() - self._t0
            self.board.progress.wall_s = self.elapsed()
            self.board.save()
            for slot in list(self.slots.values()):
                self._drop_slot(slot, kill=True)
            self._request_resources(0)
            self._plot()
        self.summary.best = self.board.best()
        self.run_dir.log(
            f"finished: {self.summary.pods_trained} pod(s) trained, {self.summary.pods_failed} failed, "
            f"{self.board.candidates_evaluated} candidates in the run, best "
            + (
                f"{self.summary.best.pod_id} {self.summary.best.score:.4f}"
                if self.summary.best
                else "none"
            )
        )
        return self.summary

    def _request_resources(self, pods: int | None) -> None:
        """Tell the autoscaler how many pods' resources to provide (0 releases them)."""
        if not self.setup.request_resources or pods is None:
            return
        bundle: dict[str, float] = {"CPU": self.config.cpus_per_pod}
        if self.setup.gpus_per_pod > 0:
            bundle["GPU"] = self.setup.gpus_per_pod
        try:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[dict(bundle) for _ in range(pods)])
        except Exception as err:  # noqa: BLE001 - clusters without an autoscaler just keep their size
            self.run_dir.log(
                f"autoscaler request for {pods} pod(s) not made: {err}", logging.WARNING
            )

    def _plot(self) -> None:
        try:
            self.run_dir.plot_learning_curves(
                self.board.score_name, [e.pod_id for e in self.board.entries]
            )
        except Exception as err:  # noqa: BLE001 - a plot must never stop a run
            self.run_dir.log(f"learning-curve plot failed: {err}", logging.WARNING)

    def _poll_progress(self) -> None:
        busy = [s for s in self.slots.values() if s.busy is not None]
        refs = [s.actor.progress.remote() for s in busy]
        try:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0.5)
            for ref in ready:
                info = self.ray.get(ref)
                if info.get("pod_id"):
                    self._progress[info["pod_id"]] = info
        except Exception:  # noqa: BLE001 - progress is cosmetic; a dying pod is handled elsewhere
            pass

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


def _entry_of(result: PodResult, spec: PodSpec | None = None) -> Entry:
    return Entry(
        pod_id=result.pod_id,
        algorithm=result.algorithm,
        hparams=result.hparams,
        score=float(result.score),
        checkpoint=checkpoint_name(result.pod_id),
        lineage=list(spec.lineage) if spec else [],
        history=[dict(h) for h in result.history],
        env_steps=int(result.env_steps),
        parent=spec.parent if spec else None,
    )


def _short(err: BaseException) -> str:
    """The last meaningful line of a (possibly remote) exception."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(err).__name__)[:300]
