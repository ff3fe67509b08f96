"""Progress of running pods for a live display, polled without ever blocking the loop.

Inside a pod actor, :class:`PodProgress` keeps what ``progress()`` answers: per pod of the
job, its epoch, last validation score and the env steps trained so far, read live from
the :class:`~finpod.agents.progress.StepCountingEnv` its learners step (so the count
moves with every env step, not once per epoch). On the driver, :class:`ProgressPoller`
asks the busy actors through Ray's ``control`` concurrency group and never waits.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from finpod.tournament.slots import Slot


class PodProgress:
    """A pod actor's progress: what ``progress()`` returns while a job trains.

    ``begin`` names the job's pods (one, or a population's members) and a function giving
    each one's env steps trained so far in this job; ``epoch`` records an epoch's end and
    scores; ``end`` freezes the counts (a population trained member after member keeps the
    finished members' rows). Safe to read from another thread while the job trains.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Any]] = {}
        self._done: Callable[[], Sequence[int]] | None = None
        self._ids: list[str] = []
        self._current = ""
        self._t0 = time.perf_counter()

    def clear(self) -> None:
        """A new job: forget the pods of the last one."""
        with self._lock:
            self._pods, self._done, self._ids, self._current = {}, None, [], ""
            self._t0 = time.perf_counter()

    def begin(self, pod_ids: Sequence[str], epochs: int, done: Callable[[], Sequence[int]]) -> None:
        """``pod_ids`` start training ``epochs`` epochs; ``done()``: each one's env steps
        trained so far in this job (same order)."""
        with self._lock:
            for pod_id in pod_ids:
                self._pods[pod_id] = {"epoch": 0, "epochs": epochs, "score": None, "done": 0}
            self._done, self._ids, self._current = done, list(pod_ids), pod_ids[0]

    def epoch(self, epoch: int, scores: Sequence[float | None]) -> None:
        """The running pods finished ``epoch`` epochs, with these validation scores.

        After the first, each pod's ``target`` is its first epoch's steps × its epochs:
        what it will train once rollouts are rounded up to whole ones (PPO and A2C learn
        whole ``horizon × envs`` rollouts, so a pod may train more than it was asked)."""
        with self._lock:
            self._read_done()
            for pod_id, score in zip(self._ids, scores, strict=True):
                pod = self._pods[pod_id]
                pod.update(epoch=epoch, score=score)
                if epoch == 1:
                    pod["target"] = pod["done"] * pod["epochs"]

    def end(self) -> None:
        """The running pods stopped training: keep their last counts."""
        with self._lock:
            self._read_done()
            self._done, self._ids = None, []

    def _read_done(self) -> None:
        if self._done is None:
            return
        for pod_id, steps in zip(self._ids, self._done(), strict=True):
            self._pods[pod_id]["done"] = int(steps)

    def snapshot(self) -> dict[str, Any]:
        """``{"pods": {pod_id: {"epoch", "epochs", "score", "done", "target"}}, "elapsed_s"}``
        (``target`` once known, see :meth:`epoch`),
        plus the pod training now's ``pod_id``, ``epoch``, ``epochs``, ``score`` and
        ``env_steps`` (this job's steps) at the top level ({} before any job)."""
        with self._lock:
            if not self._pods:
                return {}
            self._read_done()
            pods = {pod_id: dict(info) for pod_id, info in self._pods.items()}
            elapsed = time.perf_counter() - self._t0
        now = pods[self._current]
        return {
            "pod_id": self._current,
            "epoch": now["epoch"],
            "epochs": now["epochs"],
            "score": now["score"],
            "env_steps": now["done"],
            "pods": pods,
            "elapsed_s": elapsed,
        }


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
                for pod_id, pod in info.get("pods", {}).items():
                    self.latest[pod_id] = pod

    def forget(self, pod_id: str) -> None:
        """The pod reported: drop its progress."""
        self.latest.pop(pod_id, None)

    def running(self, slots: dict[int, Slot], now: float) -> list[dict[str, Any]]:
        """One row per running pod (every member of a population): id, algorithm, parent,
        node, epoch, env steps trained so far (``done``) of ``steps``, its last validation
        score, seconds since dispatch."""
        rows = []
        for slot in sorted(slots.values(), key=lambda s: s.index):
            if slot.busy is None:
                continue
            for spec in slot.busy.specs:
                info = self.latest.get(spec.pod_id, {})
                rows.append(
                    {
                        "pod_id": spec.pod_id,
                        "algorithm": spec.algorithm,
                        "parent": spec.parent,
                        "node": slot.node_id[:8],
                        "epoch": info.get("epoch", 0),
                        "epochs": spec.epochs,
                        # What the pod will train (rounded up to whole rollouts) once
                        # its first epoch says so, else what it was asked.
                        "steps": info.get("target") or spec.steps,
                        "done": info.get("done", 0),
                        "score": info.get("score"),
                        "elapsed_s": now - slot.busy.dispatched,
                    }
                )
        return rows
