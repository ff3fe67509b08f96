"""The orchestrator: the dispatch loop that keeps a pool of pod actors on Ray busy until the
budget is spent.

Its parts live in their own modules, each owning its state; this one wires them:

- **Data plane** (:mod:`~finpod.tournament.dataplane`) — at start the driver verifies the
  dataset's hash and puts the train and validation splits in the object store; pod actors
  get the refs, never a path.
- **Pool** (:mod:`~finpod.tournament.actor_pool`, :mod:`~finpod.tournament.placement`,
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
- **Outcomes** (:mod:`~finpod.tournament.outcomes`, :mod:`~finpod.tournament.failures`)
  — a node lost is one event and its pods are requeued; an unavailable actor is retried;
  a node whose actors cannot start is quarantined; the run stops only on repeated
  failures with the same cause. Each pod's result (scored inside the actor on
  validation) goes to the leaderboard, candidates record and metrics
  (:mod:`~finpod.tournament.updater`).

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
from dataclasses import dataclass, field
from typing import Any

import ray

from finpod.data.market import MarketData
from finpod.data.payload import market_from_payload
from finpod.runs import Leaderboard, RunDir, load_candidates
from finpod.tournament.actor_pool import ActorPool
from finpod.tournament.budget import BudgetClock, eta_seconds
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy
from finpod.tournament.final_selection import select_final
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.outcomes import Books, Breeding, Cluster, Outcomes
from finpod.tournament.placement import inherit_buffers
from finpod.tournament.progress import ProgressPoller
from finpod.tournament.schedulers import SCHEDULER_FILE, Context, group_key, make_scheduler
from finpod.tournament.setup import Event, Setup
from finpod.tournament.slots import Inflight, Slot
from finpod.tournament.updater import Summary, Updater

__all__ = ["Event", "Orchestrator", "Setup", "Summary"]

#: Seconds between two checks of the cluster's size while pods are running.
RESIZE_EVERY_S = 2.0
#: Seconds between two progress polls of running pods (only with a display attached).
POLL_EVERY_S = 2.0
#: Seconds between two learning-curve plots while the run goes on (also drawn at the end).
PLOT_EVERY_S = 300.0


@dataclass
class _LoopTimes:
    """When the loop last resized the pool, polled progress, drew plots, said it waits."""

    resize: float = -math.inf
    poll: float = field(default_factory=time.monotonic)
    plot: float = field(default_factory=time.monotonic)
    wait_msg: float = -math.inf
    no_room_since: float | None = None


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
        self.updater = Updater(board, run, self.summary, self.config.pod_steps)
        self.data: DataPlane | None = None
        self._annualization: float | None = None
        self.actors = ActorPool(ray, setup, self.policy, self.summary, run, self._emit)
        self.clock = BudgetClock(self.config.budget, board, stop, self.config.time_cap)
        self.scheduler = make_scheduler(
            Context(
                self.config,
                self.generator,
                board,
                run.log,
                lambda: self.actors.target,
                run.path / SCHEDULER_FILE,
                self._bars_per_year,
            )
        )
        if self.config.yield_alpha > 0:  # the champion's returns, for its mid-run looks
            self.scheduler.remember(load_candidates(run.path))
        self.progress = ProgressPoller(ray)
        self.outcomes = Outcomes(
            Cluster(ray, self.actors, self.policy),
            Books(board, self.summary, run, self.progress, self.clock),
            Breeding(self.scheduler, self.updater),
            self._emit,
        )

    # ----- budget -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self.clock.elapsed()

    def _inflight(self) -> list[Inflight]:
        busy = [s.busy for s in self.actors.slots.values() if s.busy is not None]
        return busy + [d.inflight for d in self.outcomes.deaths]

    def _budget_left(self) -> float:
        pending = self._inflight()
        planned = [s for f in pending for s in f.specs] + [s for s, _, _ in self.outcomes.retry]
        steps = sum(s.steps for s in planned if not s.fill)  # fill is beyond the budget
        pods = sum(len(f.specs) for f in pending) + len(self.outcomes.retry)
        return self.clock.left(steps, pods)

    def _fill_seconds(self) -> float | None:
        """Seconds an explorer may train beyond a step budget (``tournament.fill``): until
        the champion line is expected to have trained its share, at the pace of its
        scored segments (:meth:`Scheduler.champion_seconds_left`); None when there is
        nothing to fill (no champion, not a step budget, a stop asked for, the cap)."""
        if not self.config.fill or self.config.budget.kind != "steps":
            return None
        if self.clock.stopped() or self.clock.capped():
            return None
        now = time.monotonic()
        running = [now - j.dispatched for j in self._inflight() if any(s.champion for s in j.specs)]
        share = self.config.budget.amount / max(1, self.actors.target)
        return self.scheduler.champion_seconds_left(share, max(running, default=0.0))

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
        if self.outcomes.retry:
            return self.outcomes.take_requeued(size, lambda s: group_key(self.generator, s))
        left = self._budget_left()  # nothing below changes what is in flight
        if self.config.budget.kind == "pods":
            size = int(max(1, min(size, left)))
        reserve = self._champion_reserve()
        explore = left - reserve > 0
        fill = None if explore else self._fill_seconds()
        specs = self.scheduler.next_specs(
            size,
            busy=bool(self._inflight() or self.outcomes.retry),
            explore=explore or fill is not None,
        )
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
        for spec in specs:
            if fill is not None and not spec.champion:
                # Beyond the budget: a whole segment's steps, stopped by the champion's end.
                spec.fill = True
                self.clock.cap(spec, fill)
            else:
                self.clock.fit(spec, left if spec.champion else left - reserve, len(specs))
        return specs, parents, buffer

    def _champion_reserve(self) -> float:
        """Env steps of a step budget kept for the champion line
        (:meth:`Scheduler.champion_reserve`): its share is the budget over the pool's
        slots. Time budgets share out by themselves, and pod budgets count segments."""
        if self.config.budget.kind != "steps":
            return 0.0
        planned = sum(s.steps for job in self._inflight() for s in job.specs if s.champion) + sum(
            s.steps for s, _, _ in self.outcomes.retry if s.champion
        )
        share = self.config.budget.amount / max(1, self.actors.target)
        return self.scheduler.champion_reserve(share, planned)

    def _dispatch(self) -> None:
        for slot in sorted(self.actors.slots.values(), key=lambda s: s.index):
            if slot.busy is not None or slot.ready_ref is not None:
                continue
            if len(self.actors.slots) > self.actors.target:
                self.actors.drop(slot)
                continue
            retry = self.outcomes.retry and self._may_retry()
            if not retry and not self.can_dispatch() and self._fill_seconds() is None:
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
                job.spec, job.parent, buffer_arg, self.outcomes.inherit
            )
        job.retry_at = None

    # ----- main loop --------------------------------------------------------------------
    def run(self) -> Summary:
        """Train until the budget is spent and every running pod has reported."""
        self.clock.start()
        self.run_dir.log(
            f"tournament {self.config.mode} {self.clock} "
            f"({self.board.candidates_evaluated} candidates so far)"
        )
        self._publish()
        if self.config.pods is not None:
            self.actors.request(self.config.pods)
        try:
            self._loop()
            # Trained to its budget: the ensemble, then the champion's paired tests.
            self.summary.ensemble, self.summary.selection = select_final(
                self.run_dir,
                self.board,
                self.config,
                self._validation(),
                self.on_event,
                yielded=self.scheduler.yield_note(),
            )
        finally:
            self.summary.wall_s = self.clock.session_s()
            self.summary.quarantined = dict(self.policy.quarantined)
            self.board.progress.wall_s = self.elapsed()
            self.board.save()
            self.summary.throughput = self.run_dir.record_throughput(
                self.board.progress.env_steps, self.board.progress.wall_s
            )
            self.run_dir.record_learning(self.board.best())
            self.summary.budget = self.scheduler.report()
            progress = self.board.progress
            if self.summary.budget is not None and progress.fill_pods:
                self.summary.budget["fill"] = {
                    "pods": progress.fill_pods,
                    "env_steps": progress.fill_steps,
                    "what": "explorer segments beyond the step budget, trained while the "
                    "champion finished its share (tournament.fill)",
                }
            if self.summary.budget is not None:
                self.run_dir.record_budget(self.summary.budget)
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

    def _bars_per_year(self) -> float:
        """Bars per year of the validation split (read once from the object store)."""
        if self._annualization is None:
            self._annualization = float(self._validation().annualization)
        return self._annualization

    def _validation(self) -> MarketData:
        """The validation split, from the object store (the driver put it there)."""
        assert self.data is not None
        return market_from_payload(self.ray.get(self.data.refs["validation"]), "cpu")

    def _publish(self) -> None:
        if self.data is None:
            t0 = time.monotonic()
            self.data = DataPlane.publish(self.setup.dataset_dir, self.setup.dataset_hash)
            self.summary.data_bytes = sum(self.data.nbytes.values())
            self.run_dir.log(
                f"dataset {self.data.dataset_hash[:12]} verified and put in the object store "
                f"({self.summary.data_bytes / 2**20:.1f} MiB, {time.monotonic() - t0:.1f}s)"
            )
        buffer_bytes = self.actors.use_data(self.data)
        self.outcomes.inherit = bool(buffer_bytes) and inherit_buffers(self.config, buffer_bytes)
        if self.outcomes.inherit:
            self.run_dir.log(
                f"children inherit replay buffers (≤ {buffer_bytes / 2**20:.0f} MiB each)"
            )

    def _loop(self) -> None:
        t = _LoopTimes()
        while True:
            now = time.monotonic()
            if self.actors.replan or now - t.resize >= RESIZE_EVERY_S:
                self.actors.replan = False
                self.actors.resize()
                t.resize = now
            self.outcomes.classify_deaths()
            self._drop_late_retries()
            self._retry_due(now)
            self._dispatch()
            slots = self.actors.slots.values()
            waiting = {s.ready_ref: s for s in slots if s.ready_ref is not None}
            running = {s.busy.ref: s for s in slots if s.busy is not None and s.busy.ref}
            retrying = any(s.busy is not None and s.busy.ref is None for s in slots)
            pending = retrying or self.outcomes.deaths or self.outcomes.retry
            if not running and not pending and not self.can_dispatch():
                break
            if not waiting and not running:
                if not self.actors.slots and not self.outcomes.deaths:
                    t.no_room_since = t.no_room_since or now
                    t.wait_msg = self.actors.wait_for_room(now - t.no_room_since, now, t.wait_msg)
                    t.resize = -math.inf
                time.sleep(0.2)
                continue
            t.no_room_since = None
            if running and self.clock.overdue():
                self._give_up_overdue(running)
                break
            self.actors.give_up_slow_starts(now)
            if self._collect(waiting, running):
                # Re-check the cluster whenever a pod finishes, and refill the idle
                # slots before any cosmetic work (display, plots).
                self.actors.resize()
                t.resize = time.monotonic()
                self._dispatch()
            self._show(t)

    def _give_up_overdue(self, running: dict[Any, Slot]) -> None:
        """The run is past its wall-time cap (:meth:`BudgetClock.overdue`): the pods still
        running are stopped and recorded as not scored, so the run ends on time."""
        for slot in running.values():
            job = slot.busy
            assert job is not None
            self.run_dir.log(
                f"pod(s) {job.ids} not scored: still running {self.elapsed():.0f}s into the "
                f"run, past its wall-time cap",
                logging.WARNING,
            )
            self.summary.pods_unscored += len(job.specs)
            slot.busy = None
            self.actors.drop(slot)

    def _drop_late_retries(self) -> None:
        """Requeued pods the budget has no room for any more are not started."""
        if self.outcomes.retry and not self._may_retry():
            dropped = ", ".join(spec.pod_id for spec, _, _ in self.outcomes.retry)
            self.run_dir.log(f"requeued pod(s) {dropped} not started: the run is ending")
            self.outcomes.retry.clear()

    def _collect(self, waiting: dict[Any, Slot], running: dict[Any, Slot]) -> bool:
        """Wait briefly for actors' start-up answers and jobs' results and handle every one
        that is in; True when a job came back."""
        refs = [*waiting, *running]
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=0.25, fetch_local=False)
        if ready and rest:
            more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=False)
            ready += more
        for ref in ready:
            if ref in waiting:
                self.actors.on_ready(waiting[ref], lambda node: self.outcomes.node_lost(node, []))
            else:
                self.outcomes.on_result(running[ref])
        return any(ref in running for ref in ready)

    def _show(self, t: _LoopTimes) -> None:
        """The cosmetic work: the live display (with progress polls) and the plots."""
        now = time.monotonic()
        if self.display is not None:
            if now - t.poll >= POLL_EVERY_S:
                self.progress.ask(self.actors.slots)
                t.poll = now
            self.progress.collect()
            self.display(self.snapshot())
        if now - t.plot >= PLOT_EVERY_S:
            self._plot()
            t.plot = time.monotonic()

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
            "eta_s": eta_seconds(budget, used, running, self.elapsed(), self.config.time_cap),
            "running": running,
            "entries": self.board.entries,
            "candidates": self.board.candidates_evaluated,
            "failed": self.board.progress.pods_failed,
            "pool": len(self.actors.slots),
            "target": self.actors.target,
            "budget": budget,
            "budget_used": used,
            "time_cap": self.config.time_cap,
            "elapsed_s": self.elapsed(),
            "score_name": self.board.score_name,
        }

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, payload)
