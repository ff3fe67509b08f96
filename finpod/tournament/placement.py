"""The pool's view of the cluster: how many pods each node fits, where the next one goes,
what one pod declares to Ray, and what the autoscaler is asked for.

Pods are placed explicitly: the orchestrator picks a node with room (alive, not
quarantined) and starts the pod actor there with a hard node affinity. So it always knows
which node a pod actor is on — a start failure is attributed to its node, and a node
that cannot run pods can be left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ray.autoscaler.sdk import request_resources

from finpod.agents import ALGORITHMS
from finpod.agents.buffer import replay_buffer_nbytes
from finpod.env import ObsLayout
from finpod.tournament.search import SearchSpace
from finpod.tournament.settings import TournamentConfig, inherit_buffer_fits

#: Bytes of Python, torch and the agent's networks in one pod actor, beyond its tables.
POD_BASE_MEMORY = 512 * 2**20


@dataclass(frozen=True)
class PodResources:
    """What one pod asks Ray for."""

    cpus: float
    """CPUs (``tournament.cpus_per_pod``)."""
    gpus: float = 0.0
    """GPUs (fractions share one device)."""
    memory: int = 0
    """Bytes of host memory: env lookup tables (CPU pods), replay buffers, a base share."""

    def bundle(self) -> dict[str, float]:
        """The resource bundle of one pod for ``request_resources`` (CPU, and GPU when the
        pods use GPUs)."""
        out: dict[str, float] = {"CPU": float(self.cpus)}
        if self.gpus > 0:
            out["GPU"] = float(self.gpus)
        # Memory stays out: autoscalers pick node types by CPUs and GPUs.
        return out

    def actor_options(self) -> dict[str, Any]:
        """``num_cpus``/``num_gpus``/``memory`` options of a pod actor."""
        out: dict[str, Any] = {"num_cpus": self.cpus}
        if self.gpus > 0:
            out["num_gpus"] = self.gpus
        if self.memory > 0:
            out["memory"] = int(self.memory)
        return out


def pod_memory_bytes(
    shapes: dict[str, tuple[int, int, int]],
    num_learners: int,
    on_gpu: bool,
    buffer_bytes: int = 0,
) -> int:
    """Host bytes one pod needs besides the shared dataset.

    Args:
        shapes: split → (bars T, tickers N, features F) of the shipped splits.
        num_learners: L (each learner's env builds its own tables over the train split).
        on_gpu: tables and buffers live on the GPU, not in host memory.
        buffer_bytes: one learner's replay buffer at capacity (0 for on-policy agents).

    Env tables per env: ``(T, 3N)`` float64 fill/mark/tradable and ``(T, N(1+F))`` float32
    static observations (see :func:`finpod.env.tables.build_tables`); the evaluator builds
    them once over the validation split.
    """

    def tables(split: str) -> int:
        t, n, f = shapes[split]
        return t * 3 * n * 8 + t * n * (1 + f) * 4

    if on_gpu:
        return POD_BASE_MEMORY
    learners = max(1, int(num_learners))
    # A child's inherited buffer is held once more while it is imported.
    buffers = (learners + 1) * int(buffer_bytes) if buffer_bytes else 0
    return POD_BASE_MEMORY + learners * tables("train") + tables("validation") + buffers


def node_capacity(
    nodes: list[dict[str, Any]], pod: PodResources, exclude: set[str] | frozenset[str] = frozenset()
) -> dict[str, int]:
    """Alive node id → pods it fits by its total resources (``exclude``: quarantined)."""
    out: dict[str, int] = {}
    for node in nodes:
        if not node.get("Alive"):
            continue
        node_id = str(node.get("NodeID", ""))
        if node_id in exclude:
            continue
        res = node.get("Resources", {})
        n = math.floor(res.get("CPU", 0.0) / pod.cpus + 1e-9)
        if pod.gpus > 0:
            n = min(n, math.floor(res.get("GPU", 0.0) / pod.gpus + 1e-9))
        if pod.memory > 0 and "memory" in res:
            n = min(n, math.floor(res["memory"] / pod.memory + 1e-9))
        if n > 0:
            out[node_id] = n
    return out


def pick_node(capacity: dict[str, int], used: dict[str, int]) -> str | None:
    """The node with the most free pod slots (ties: the first listed), or None if full."""
    best, room = None, 0
    for node_id, cap in capacity.items():
        free = cap - used.get(node_id, 0)
        if free > room:
            best, room = node_id, free
    return best


def request_pods(pod: PodResources, count: int) -> str | None:
    """Ask the autoscaler for ``count`` pods' resources (0 releases the request).

    Returns None on success, else why no request was made (a cluster without an
    autoscaler keeps its size).
    """
    try:
        request_resources(bundles=[pod.bundle() for _ in range(max(0, int(count)))])
    except Exception as err:  # noqa: BLE001 - clusters without an autoscaler just keep their size
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return None


def largest_buffer_bytes(space: SearchSpace, layout: ObsLayout) -> int:
    """Bytes of the largest replay buffer any off-policy algorithm of the search may
    allocate (0 when the search has none), for observations of the env's ``layout``
    (:meth:`finpod.env.ObsLayout.for_universe`)."""
    obs_dim, action_dim = layout.obs_dim, layout.num_stocks
    largest = 0
    for algo in space.algorithms.values():
        if not getattr(algo, "off_policy", False):
            continue
        size = float(algo.base.get("buffer_size", 0) or 0)
        for spec in algo.params:
            if spec.name == "buffer_size":
                size = max(
                    float(v)
                    for v in (spec.value, spec.high, *spec.choices, size)
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                )
        if size <= 0:
            params_cls = ALGORITHMS.get(algo.algorithm, (None,))[0]
            size = float(getattr(params_cls(), "buffer_size", 0)) if params_cls else 0.0
        if size > 0:
            largest = max(largest, replay_buffer_nbytes(int(size), obs_dim, action_dim))
    return largest


def inherit_buffers(config: TournamentConfig, buffer_bytes: int) -> bool:
    """``tournament.inherit_buffer`` resolved (``"auto"``: the top-k buffers fit in memory)."""
    return inherit_buffer_fits(config.inherit_buffer, buffer_bytes, config.top_k)
