"""Progress of running pods for a live display, polled without ever blocking the loop."""

from __future__ import annotations

import contextlib
from typing import Any

from finpod.tournament.slots import Slot


class ProgressPoller:
    """Asks busy pod actors for their progress and keeps the latest answer per pod id.

    ``ask`` issues at most one outstanding ``progress()`` call per slot; ``collect`` reads
    the answers that have arrived (``ray.wait(..., timeout=0)``), so neither waits on a pod.
    """

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.latest: dict[str, dict[str, Any]] = {}
        self._refs: dict[Any, int] = {}

    def ask(self, slots: dict[int, Slot]) -> None:
        """Issue a progress call to every busy slot that has none outstanding."""
        asked = set(self._refs.values())
        for slot in slots.values():
            if slot.busy is not None and slot.index not in asked:
                self._refs[slot.actor.progress.remote()] = slot.index

    def collect(self) -> None:
        """Read the progress replies that have arrived (never waits)."""
        if not self._refs:
            return
        refs = list(self._refs)
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
        for ref in ready:
            self._refs.pop(ref, None)
            with contextlib.suppress(Exception):  # a dying pod is handled elsewhere
                info = self.ray.get(ref, timeout=0)
                if info.get("pod_id"):
                    self.latest[info["pod_id"]] = info

    def forget(self, pod_id: str) -> None:
        """The pod reported: drop its progress."""
        self.latest.pop(pod_id, None)

    def running(self, slots: dict[int, Slot], now: float) -> list[dict[str, Any]]:
        """One row per running pod (every member of a population): id, algorithm, parent,
        node, epoch, last score (a population reports its best member's on its first
        member's row), seconds since dispatch."""
        rows = []
        for slot in sorted(slots.values(), key=lambda s: s.index):
            if slot.busy is None:
                continue
            lead = slot.busy.spec
            info = self.latest.get(lead.pod_id, {})
            for spec in slot.busy.specs:
                rows.append(
                    {
                        "pod_id": spec.pod_id,
                        "algorithm": spec.algorithm,
                        "parent": spec.parent,
                        "node": slot.node_id[:8],
                        "epoch": info.get("epoch", 0),
                        "epochs": spec.epochs,
                        "steps": spec.steps,
                        "score": info.get("score") if spec is lead else None,
                        "elapsed_s": now - slot.busy.dispatched,
                    }
                )
        return rows
