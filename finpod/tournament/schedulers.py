"""Schedulers: which pods the pool trains next, asynchronously or by generations.

- :class:`AsyncScheduler` (``mode = "async"``): every free slot gets the generator's next
  pod (or population) at once, drawn against the leaderboard as it is now.
- :class:`GenerationalScheduler` (``mode = "generational"``): a generation is queued as a
  whole and awaited; then the top ``keep_fraction`` continue unchanged and the rest are
  perturbed copies of them.
- :class:`HalvingScheduler` (``mode = "asha"``): a free slot first continues the pods
  that lead their rung and still improve, and explores (fresh pods, perturbed copies of
  leaders) only when none can be promoted (see :mod:`finpod.tournament.halving`).

Both hand out pods in groups of up to ``size`` that can train as one population (same
algorithm, architecture, controls and shape, see :func:`group_key`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, replace

from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.tournament.generator import Generator, PodSpec, pod_id
from finpod.tournament.halving import Allocation, PodRecord
from finpod.tournament.pod import PodResult
from finpod.tournament.settings import TournamentConfig
from finpod.tournament.updater import entry_of


def group_key(generator: Generator, spec: PodSpec) -> str:
    """Pods with equal keys can train in one population."""
    frozen = generator.frozen_of(spec.algorithm, spec.hparams)
    return repr(
        (spec.algorithm, sorted(frozen.items()), sorted(spec.env.items()), spec.num_envs)
        + (spec.epochs, spec.score_name, spec.num_learners)
    )


class Scheduler:
    """What to train next; the parents' checkpoint bytes; what a finished pod changes."""

    def __init__(
        self,
        config: TournamentConfig,
        generator: Generator,
        board: Leaderboard,
        log: Callable[[str], None],
    ) -> None:
        self.config = config
        self.generator = generator
        self.board = board
        self.log = log

    def next_specs(self, size: int, busy: bool) -> list[PodSpec]:
        """Up to ``size`` pods for one slot (``[]``: nothing to start now); ``busy``:
        pods are still running or waiting to be retried."""
        raise NotImplementedError

    def parent_bytes(self, parent_id: str | None) -> bytes | None:
        """The checkpoint file bytes of ``parent_id`` (``None``: gone, or no parent)."""
        if not parent_id:
            return None
        entry = self.board.get(parent_id)
        return None if entry is None else self.board.checkpoint_path(entry).read_bytes()

    def scored(self, result: PodResult, spec: PodSpec) -> None:
        """A pod reported a score (already recorded on the board)."""

    def failed(self, specs: list[PodSpec]) -> None:
        """Pods failed and will not report."""

    def report(self) -> dict[str, object] | None:
        """How the run's budget was spent (``run.json``'s ``budget``; None: not tracked)."""
        return None

    def _take_ids(self, count: int) -> int:
        index = self.board.progress.next_pod
        self.board.progress.next_pod = index + count
        return index


class AsyncScheduler(Scheduler):
    """The generator's next pod, or population, drawn against the board as it is now."""

    def next_specs(self, size: int, busy: bool) -> list[PodSpec]:
        if self.config.population == 1:
            return [self.generator.next(self.board, self._take_ids(1))]
        index = self.board.progress.next_pod
        specs = self.generator.next_group(self.board, index, size)
        self._take_ids(len(specs))
        return specs


class GenerationalScheduler(Scheduler):
    """Synchronous generations: queued as a whole, the next one drawn from the last."""

    def __init__(
        self,
        config: TournamentConfig,
        generator: Generator,
        board: Leaderboard,
        log: Callable[[str], None],
        pool_size: Callable[[], int],
    ) -> None:
        super().__init__(config, generator, board, log)
        self.pool_size = pool_size
        self.queue: list[tuple[PodSpec, Entry | None]] = []
        self.results: list[tuple[PodResult, PodSpec]] = []
        #: Checkpoints of the last generation's elites (they may not be on the board).
        self.memory: dict[str, bytes] = {}

    def next_specs(self, size: int, busy: bool) -> list[PodSpec]:
        if not self.queue:
            if busy:
                return []
            self.new_generation()
        if not self.queue:
            return []
        lead, _ = self.queue.pop(0)
        picked = [lead]
        key = group_key(self.generator, lead)
        for item in list(self.queue):
            if len(picked) < size and group_key(self.generator, item[0]) == key:
                self.queue.remove(item)
                picked.append(item[0])
        return [replace(spec, pod_id=pod_id(self._take_ids(1))) for spec in picked]

    def parent_bytes(self, parent_id: str | None) -> bytes | None:
        if parent_id and parent_id in self.memory:
            return self.memory[parent_id]
        return super().parent_bytes(parent_id)

    def scored(self, result: PodResult, spec: PodSpec) -> None:
        self.results.append((result, spec))

    def failed(self, specs: list[PodSpec]) -> None:
        # A lost member of the generation runs again under a new id.
        for spec in reversed(specs):
            self.queue.insert(0, (spec, None))

    def new_generation(self) -> None:
        """Fill the queue with the next generation (first: from scratch or the board)."""
        per_group = self.config.population
        size = self.config.generation_size or max(1, self.pool_size()) * per_group
        base = self.board.progress.next_pod
        results = sorted(self.results, key=lambda rs: -_score_key(rs[0].score))
        self.results = []
        if results:
            population = [entry_of(r, spec) for r, spec in results]
            self.board.progress.generation += 1
        else:
            # A resumed run restarts its population from the leaderboard.
            population = list(self.board.entries)
        keep = max(1, math.ceil(self.config.keep_fraction * size)) if population else 0
        elites = population[:keep]
        elite_ids = {e.pod_id for e in elites}
        self.memory = {r.pod_id: r.checkpoint for r, _ in results if r.pod_id in elite_ids}
        queue: list[tuple[PodSpec, Entry | None]] = []
        for i in range(size):
            index = base + i
            if not elites:
                # A population's members share an algorithm: a fresh generation takes
                # the listed algorithms in turn, one population each.
                turn = None if per_group == 1 else self.generator.algorithm_in_turn(i // per_group)
                queue.append((self.generator.fresh(index, forced=turn), None))
            elif i < len(elites):
                parent = elites[i]
                queue.append((self.generator.child(parent, index, perturb=False), parent))
            else:
                rng = self.generator.rng(index)
                parent = elites[int(rng.integers(len(elites)))]
                queue.append((self.generator.child(parent, index, rng=rng), parent))
        self.queue = queue
        self.log(
            f"generation {self.board.progress.generation}: {len(queue)} pod(s), "
            f"{len(elites)} elite(s)"
        )


class HalvingScheduler(AsyncScheduler):
    """Asynchronous successive halving with continuation (``mode = "asha"``).

    A free slot gets, in this order: the promotable pods (:meth:`Allocation.promotable`:
    pods in their grace period, then lines with fewer continuations running, then the
    deepest rung, then the best score), continued unchanged — up to ``size`` of them
    that can share a population, else one alone; or, when none can be promoted, the
    generator's next pod or population (from scratch, or perturbed copies of leaderboard
    entries), as the asynchronous scheduler draws them. With one pod per slot an explorer
    copies the best pod of a leading line (:meth:`Allocation.exploit_parents`)."""

    def __init__(
        self,
        config: TournamentConfig,
        generator: Generator,
        board: Leaderboard,
        log: Callable[[str], None],
    ) -> None:
        super().__init__(config, generator, board, log)
        saved = dict(board.progress.allocation or {})
        saved.setdefault("eta", config.eta)
        saved.setdefault("patience", config.patience)
        saved.setdefault("grace", config.grace)
        self.allocation = Allocation(**saved)

    def next_specs(self, size: int, busy: bool) -> list[PodSpec]:
        available = {e.pod_id for e in self.board.entries}
        ready = self.allocation.promotable(available)
        if not ready and self.config.population == 1:
            ids = self.allocation.exploit_parents(available)
            parents = [e for e in map(self.board.get, ids) if e is not None]
            return [self.generator.next(self.board, self._take_ids(1), parents=parents)]
        if not ready:
            return super().next_specs(size, busy)
        lead = self.board.get(ready[0].pod)
        assert lead is not None
        specs = [self.generator.child(lead, self._take_ids(1), perturb=False)]
        key = group_key(self.generator, specs[0])
        for rec in ready[1:]:
            if len(specs) >= size:
                break
            entry = self.board.get(rec.pod)
            assert entry is not None
            spec = self.generator.child(entry, self.board.progress.next_pod, perturb=False)
            if group_key(self.generator, spec) == key:
                self._take_ids(1)
                specs.append(spec)
        for spec in specs:
            assert spec.parent is not None
            self.allocation.promote(spec.parent)
            self.log(f"promote {spec.parent} → {spec.pod_id} (rung {len(spec.lineage) + 1})")
        self._save()
        return specs

    def scored(self, result: PodResult, spec: PodSpec) -> None:
        prior = [h["score"] for h in spec.base_history if math.isfinite(h["score"])]
        scores = [h["score"] for h in result.history]
        finite = [(v, i) for i, v in enumerate(scores) if math.isfinite(v)]
        best_at = max(finite)[1] if finite else -1
        kind = "fresh" if spec.parent is None else ("continued" if spec.continued else "child")
        self.allocation.record(
            PodRecord(
                pod=result.pod_id,
                parent=spec.parent,
                kind=kind,
                rung=len(spec.lineage) + 1,
                steps=int(result.steps_done),
                score=float(result.score),
                prev_best=max(prior, default=-math.inf),
                since_best=len(scores) - 1 - best_at if finite else len(scores),
                epochs_done=int(result.epochs_done),
                epochs=int(spec.epochs),
            )
        )
        self._save()

    def failed(self, specs: list[PodSpec]) -> None:
        # A promotion that failed may be tried again from the same parent.
        for spec in specs:
            if spec.continued and spec.parent in self.allocation.promoted:
                self.allocation.promoted.remove(spec.parent)
        self._save()

    def report(self) -> dict[str, object]:
        """The budget report (:meth:`Allocation.report`) for the board's best entry."""
        best = self.board.best()
        return self.allocation.report(best.pod_id if best else None, self.board.progress.env_steps)

    def _save(self) -> None:
        self.board.progress.allocation = asdict(self.allocation)
        self.board.save()


def make_scheduler(
    config: TournamentConfig,
    generator: Generator,
    board: Leaderboard,
    log: Callable[[str], None],
    pool_size: Callable[[], int],
) -> Scheduler:
    """The scheduler of ``config.mode``."""
    if config.mode == "generational":
        return GenerationalScheduler(config, generator, board, log, pool_size)
    if config.mode == "asha":
        return HalvingScheduler(config, generator, board, log)
    return AsyncScheduler(config, generator, board, log)


def _score_key(score: float) -> float:
    return score if math.isfinite(score) else -math.inf


__all__ = [
    "AsyncScheduler",
    "GenerationalScheduler",
    "HalvingScheduler",
    "Scheduler",
    "group_key",
    "make_scheduler",
]
