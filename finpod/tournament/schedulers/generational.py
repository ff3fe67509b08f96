"""``mode = "generational"``: synchronous generations. A generation is queued as a whole
and awaited; then the top ``keep_fraction`` continue unchanged and the rest are perturbed
copies of them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from finpod.runs.leaderboard import Entry
from finpod.tournament.generator import PodSpec, pod_id
from finpod.tournament.pod_results import PodResult
from finpod.tournament.schedulers.base import Context, Scheduler, group_key, score_key
from finpod.tournament.updater import entry_of


class GenerationalScheduler(Scheduler):
    """Synchronous generations: queued as a whole, the next one drawn from the last."""

    name = "generational"

    def __init__(self, context: Context) -> None:
        self.queue: list[tuple[PodSpec, Entry | None]] = []
        self.results: list[tuple[PodResult, PodSpec]] = []
        #: Checkpoints of the last generation's elites (they may not be on the board).
        self.memory: dict[str, bytes] = {}
        self.generation = 0
        """Generations completed."""
        super().__init__(context)

    def choose(self, size: int, busy: bool) -> list[PodSpec]:
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
        return [replace(spec, pod_id=pod_id(self.take_ids(1))) for spec in picked]

    def parent_bytes(self, parent_id: str | None) -> bytes | None:
        if parent_id and parent_id in self.memory:
            return self.memory[parent_id]
        return super().parent_bytes(parent_id)

    def on_scored(self, result: PodResult, spec: PodSpec) -> None:
        if not spec.champion:
            self.results.append((result, spec))

    def on_failed(self, specs: list[PodSpec]) -> None:
        # A lost member of the generation runs again under a new id.
        for spec in reversed(specs):
            if not spec.champion:
                self.queue.insert(0, (spec, None))

    def own_state(self) -> dict[str, Any]:
        # The queue and the results in flight are rebuilt from the board on resume (a
        # resumed run restarts its population from the leaderboard), as before.
        return {"generation": self.generation}

    def restore_own(self, state: dict[str, Any]) -> None:
        self.generation = int(state.get("generation", 0))

    def legacy_state(self) -> dict[str, Any]:
        saved = self.board.progress.legacy.get("generation")
        return {"generation": int(saved)} if saved else {}

    def new_generation(self) -> None:
        """Fill the queue with the next generation (first: from scratch or the board)."""
        per_group = self.config.population
        size = self.config.generation_size or max(1, self.context.pool_size()) * per_group
        if self.config.base_pod:
            size = max(1, size - 1)  # the champion holds one slot of its own
        base = self.board.progress.next_pod
        results = sorted(self.results, key=lambda rs: -score_key(rs[0].score))
        self.results = []
        champions = self.champion_ids()
        if results:
            population = [entry_of(r, spec) for r, spec in results]
            self.generation += 1
        else:
            # A resumed run restarts its population from the leaderboard.
            population = [e for e in self.board.entries if e.pod_id not in champions]
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
        self.log(f"generation {self.generation}: {len(queue)} pod(s), {len(elites)} elite(s)")
