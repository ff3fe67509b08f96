"""What the orchestrator holds per pod actor: its slot, the job it runs, a death to judge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from finpod.tournament.generator import PodSpec


@dataclass
class Inflight:
    """What one slot is training: one pod, or the members of one population."""

    specs: list[PodSpec]
    """The pods of the job (one, or a population's members in member order)."""
    parents: list[bytes | None]
    """Each pod's parent checkpoint bytes (``None``: from scratch)."""
    parent_buffer: Any
    """The parent's replay buffer ref (single off-policy pods only), or ``None``."""
    dispatched: float
    """``time.monotonic()`` at dispatch."""
    ref: Any = None
    """The result ref (``None`` while a retry waits)."""
    buffer_ref: Any = None
    """The exported replay buffer ref (single pods only)."""
    attempt: int = 0
    """Retries after a transient ``ActorUnavailableError``."""
    retry_at: float | None = None
    """When the next retry is due."""
    group: bool = False
    """Trained by ``train_group`` (a population), one result per spec."""

    @property
    def spec(self) -> PodSpec:
        """The first (or only) pod."""
        return self.specs[0]

    @property
    def parent(self) -> bytes | None:
        return self.parents[0]

    @property
    def steps(self) -> int:
        """Env steps planned for every pod of the job."""
        return sum(s.steps for s in self.specs)

    @property
    def ids(self) -> str:
        """The pod id of a job, or the first…last ids of a population."""
        if len(self.specs) == 1:
            return self.spec.pod_id
        return f"{self.specs[0].pod_id}…{self.specs[-1].pod_id}"


@dataclass
class Slot:
    """One pod actor of the pool."""

    index: int
    """Slot number within the run (never reused)."""
    actor: Any
    """The ``PodWorker`` actor handle."""
    ready_ref: Any
    """The actor's ``ready()`` ref until it answered, then ``None``."""
    created: float
    """``time.monotonic()`` when the actor was asked for."""
    node_id: str
    """Ray node the actor is pinned to."""
    busy: Inflight | None = None
    """The job it runs (``None``: idle)."""
    idle_since: float | None = None
    """Since when it waits for a job."""


@dataclass
class Death:
    """A job whose actor died on a node that still looked alive: classified later."""

    inflight: Inflight
    node_id: str
    message: str
    deadline: float
