"""The failure policy: what a lost pod means for the run.

A tournament on a real cluster loses pods for reasons that say nothing about the pods
(a preempted node) and for reasons that do (a bug, a node that cannot run them). The
policy tells them apart:

- **Node lost** — a pod's actor died and its node is gone from the cluster (or Ray says
  it was preempted). The node is *one* event however many pods it ran; those pods are
  requeued with the same spec (same pod id) and the run goes on. Node losses never stop
  a run.
- **Transient** — ``ActorUnavailableError``: the actor is unreachable for a moment. The
  same call is retried on the same actor (up to :data:`TRANSIENT_RETRIES` times, with a
  growing pause); after that the pod counts as crashed.
- **Start failure** — a pod actor could not start on a node (its constructor raised, a
  package is missing, the data could not be fetched). After
  :data:`QUARANTINE_AFTER` start failures in a row on the same node, the node is
  quarantined: no pod is placed there again in this run, and ``train.log`` says why.
- **Pod failure** — a pod raised, or its actor died on a node that is still alive. It is
  logged and replaced (not requeued: the same spec would likely fail again).
- **Stop** — only when :attr:`max_failures` failures in a row (start failures and pod
  failures on healthy nodes; node losses and non-finite pods excluded) share the same
  cause, or when every node with room for a pod is quarantined.

Non-finite pods (losses, weights or validation returns NaN/inf) are failed pods of the
search, not of the cluster: counted in ``pods_failed``, never a stop reason.

Versions (:func:`version_mismatch`): a node whose Ray major.minor differs from the
driver's stops the run with one line; a different finpod, torch or Python is a warning in
``train.log``. Every node's versions are recorded in ``run.json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from finpod.errors import FinpodError

#: Start failures in a row on one node after which it is quarantined.
QUARANTINE_AFTER = 2
#: Retries of a call that failed with ``ActorUnavailableError`` before the pod is lost.
TRANSIENT_RETRIES = 3
#: Seconds to wait before retry ``k`` (1-based) of a transient failure: ``k ×`` this.
TRANSIENT_BACKOFF_S = 0.5
#: Seconds an actor death waits for its node to be reported dead before it counts as a
#: pod failure (the cluster notices a lost node a moment after its actors' callers do).
NODE_DEATH_GRACE_S = 10.0


def cause_of(message: str) -> str:
    """A failure message reduced to its cause: ids, numbers and addresses removed, so two
    failures of the same bug compare equal."""
    text = re.sub(r"0x[0-9a-f]+|[0-9a-f]{16,}", "#", message.lower())
    text = re.sub(r"\d+(\.\d+)?", "#", text)
    return re.sub(r"\s+", " ", text).strip()[:200]


@dataclass
class FailurePolicy:
    """Counts failures by kind and decides quarantines and when the run must stop."""

    max_failures: int
    """Failures in a row with the same cause (healthy nodes) that stop the run."""
    quarantined: dict[str, str] = field(default_factory=dict)
    """Node id → reason it was quarantined."""
    lost_nodes: set[str] = field(default_factory=set)
    """Nodes that left the cluster while running pods (each one event)."""
    node_events: int = 0
    """Node losses seen."""
    retries: int = 0
    """Transient failures retried."""
    pod_failures: int = 0
    """Pods that failed on healthy nodes (raised, crashed, non-finite)."""
    start_failures: int = 0
    """Pod actors that could not start."""
    _start_streak: dict[str, int] = field(default_factory=dict)
    _streak_cause: str = ""
    _streak: int = 0
    _last_message: str = ""

    # ----- events -----------------------------------------------------------------------
    def node_lost(self, node_id: str) -> bool:
        """Record that ``node_id`` left; True the first time (the event), False for each
        further pod lost with the same node. Never stops the run."""
        if node_id in self.lost_nodes:
            return False
        self.lost_nodes.add(node_id)
        self.node_events += 1
        return True

    def transient(self, attempt: int) -> float | None:
        """Seconds to wait before retry ``attempt`` (1-based) of an unavailable actor, or
        ``None`` when the retries are spent (the pod then counts as crashed)."""
        if attempt > TRANSIENT_RETRIES:
            return None
        self.retries += 1
        return TRANSIENT_BACKOFF_S * attempt

    def start_failed(self, node_id: str, message: str) -> str | None:
        """Record that a pod actor could not start on ``node_id``; returns the quarantine
        reason when the node is now quarantined. Counts towards the stop rule."""
        self.start_failures += 1
        streak = self._start_streak.get(node_id, 0) + 1
        self._start_streak[node_id] = streak
        reason = None
        if node_id and streak >= QUARANTINE_AFTER and node_id not in self.quarantined:
            reason = f"{streak} pod actors in a row failed to start: {message}"
            self.quarantined[node_id] = reason
        if reason is None:
            # A quarantined node takes itself out; only unresolved failures stop the run.
            self._count(message)
        return reason

    def started(self, node_id: str) -> None:
        """A pod actor started on ``node_id``: its start-failure streak ends."""
        self._start_streak.pop(node_id, None)

    def pod_failed(self, message: str) -> None:
        """A pod raised or its actor died on a live node (counts towards the stop rule)."""
        self.pod_failures += 1
        self._count(message)

    def non_finite(self) -> None:
        """A pod's numbers went non-finite: a failed candidate, not a cluster problem."""
        self.pod_failures += 1

    def succeeded(self) -> None:
        """A pod reported a score: every failure streak ends."""
        self._streak = 0
        self._streak_cause = ""

    # ----- decisions --------------------------------------------------------------------
    def is_quarantined(self, node_id: str) -> bool:
        return node_id in self.quarantined

    def check(self, log_path: str = "train.log") -> None:
        """Raise :class:`FinpodError` when the same cause failed ``max_failures`` times in a
        row."""
        if self._streak >= self.max_failures:
            raise FinpodError(
                f"{self._streak} pods failed in a row with the same cause; last: {self._last_message}",
                f"see {log_path}",
            )

    def all_quarantined(self, fitting_nodes: list[str], log_path: str = "train.log") -> None:
        """Raise when every node with room for a pod is quarantined (nothing can run)."""
        if fitting_nodes and all(n in self.quarantined for n in fitting_nodes):
            reasons = "; ".join(f"{n[:8]}: {self.quarantined[n]}" for n in fitting_nodes[:3])
            raise FinpodError(
                f"every node that fits a pod is quarantined ({reasons})",
                f"fix the nodes or the strategy; see {log_path}",
            )

    def _count(self, message: str) -> None:
        cause = cause_of(message)
        if cause == self._streak_cause:
            self._streak += 1
        else:
            self._streak_cause, self._streak = cause, 1
        self._last_message = message


def version_mismatch(driver: dict[str, str], node: dict[str, str]) -> tuple[str, list[str]]:
    """Compare a node's package versions with the driver's.

    Returns ``(fatal, differences)``: ``fatal`` is a one-line reason when the node's Ray
    major.minor differs from the driver's (the run must stop: objects and actors do not
    cross Ray versions reliably), else ""; ``differences`` lists finpod, torch and Python
    versions that differ (a warning: numbers may not reproduce).
    """

    def major_minor(version: str | None) -> tuple[str, ...]:
        return tuple((version or "").split(".")[:2])

    fatal = ""
    if major_minor(node.get("ray")) != major_minor(driver.get("ray")):
        fatal = f"runs Ray {node.get('ray')}, the driver Ray {driver.get('ray')}"
    differ = [
        f"{k} {node.get(k)} (driver {driver.get(k)})"
        for k in ("finpod", "torch", "python")
        if node.get(k) != driver.get(k)
    ]
    return fatal, differ


def death_verdicts(
    deaths: list[Any], alive: set[str], now: float
) -> tuple[list[Any], list[Any], list[Any]]:
    """Sort jobs whose actor died on a node that still looked alive into ``(lost, failed,
    waiting)``: lost with their node (it has gone since), failed (the node stayed alive
    past the grace period: the pod itself died), or still waiting for the cluster to say.
    Each item has ``node_id`` and ``deadline`` (see ``slots.Death``)."""
    lost, failed, waiting = [], [], []
    for death in deaths:
        if death.node_id not in alive:
            lost.append(death)
        elif now >= death.deadline:
            failed.append(death)
        else:
            waiting.append(death)
    return lost, failed, waiting
