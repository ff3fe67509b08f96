"""The pool of pod actors: how many the cluster fits, starting and dropping them, their
start-up answers, and waiting for room.

:class:`ActorPool` owns the slots (one :class:`~finpod.tournament.pod.PodWorker` actor
each, pinned to a node with hard node affinity) and the pool's target size: how many
actors the alive, non-quarantined nodes fit (:func:`~finpod.tournament.placement.node_capacity`),
capped by ``pods`` (and the generation size). The orchestrator
(:mod:`~finpod.tournament.orchestrator`) gives jobs to idle slots and reads their results.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from finpod.env import ObsLayout
from finpod.errors import FinpodError
from finpod.runs import RunDir, package_versions
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy, version_mismatch
from finpod.tournament.placement import (
    PodResources,
    largest_buffer_bytes,
    node_capacity,
    pick_node,
    pod_memory_bytes,
    request_pods,
)
from finpod.tournament.pod import PodWorker
from finpod.tournament.pod_results import last_line
from finpod.tournament.settings import TournamentConfig
from finpod.tournament.setup import Setup
from finpod.tournament.slots import Slot
from finpod.tournament.updater import Summary

#: Seconds a local run (no autoscaler) waits for room for one pod before giving up.
NO_ROOM_TIMEOUT_S = 120.0
#: Seconds between two "waiting for resources" lines while a cluster scales up.
WAIT_MESSAGE_EVERY_S = 30.0
#: Seconds a pod actor may take to start (fetch the data, build the pod) before its slot
#: is given up (not counted as a failure: the node may just be busy).
START_TIMEOUT_S = 600.0


class ActorPool:
    """The run's pod actors (slots) and their target number (module docstring)."""

    def __init__(
        self,
        ray: Any,
        setup: Setup,
        policy: FailurePolicy,
        summary: Summary,
        run: RunDir,
        emit: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.ray = ray
        self.setup = setup
        self.config: TournamentConfig = setup.config
        self.policy = policy
        self.summary = summary
        self.run_dir = run
        self.emit = emit
        self.pod = PodResources(self.config.cpus_per_pod, setup.gpus_per_pod)
        self.slots: dict[int, Slot] = {}
        self.target = 0
        self.data: DataPlane | None = None  # once published
        self.replan = False
        """Set when the pool must be re-planned now (a node quarantined or lost); the loop
        clears it."""
        self._next_slot = 0
        self._capacity: dict[str, int] = {}
        self._node_versions: dict[str, dict[str, str]] = {}
        self._driver_versions = package_versions()
        self._worker_cls = ray.remote(concurrency_groups={"train": 1, "control": 2})(PodWorker)

    def use_data(self, data: DataPlane) -> int:
        """Ship ``data`` to the actors started from now on, each sized for its splits and
        the search space's largest replay buffer; returns that buffer's bytes."""
        layout = ObsLayout.for_universe(
            data.shapes["train"][1], data.feature_names, data.bar, self.setup.env_config
        )
        buffer_bytes = largest_buffer_bytes(self.setup.space, layout)
        memory = pod_memory_bytes(
            data.shapes,
            self.config.num_learners,
            on_gpu=self.setup.gpus_per_pod > 0,
            buffer_bytes=buffer_bytes,
        )
        self.pod = replace(self.pod, memory=memory)
        self.data = data
        return buffer_bytes

    # ----- size -------------------------------------------------------------------------
    def fit(self) -> int:
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

    def resize(self) -> None:
        """Re-check the target size; start actors up to it, drop idle ones above it."""
        target = self.fit()
        if target != self.target:
            self.target = target
            self.summary.pool_sizes.append(target)
            self.summary.max_pool = max(self.summary.max_pool, target)
            self.run_dir.log(f"pool target {target} pod(s)")
            self.emit("pool", {"target": target})
        while len(self.slots) < self.target and self.start():
            pass
        if len(self.slots) > self.target:
            for slot in sorted(self.slots.values(), key=lambda s: -s.index):
                if len(self.slots) <= self.target:
                    break
                if slot.busy is None:
                    self.drop(slot)

    def start(self) -> bool:
        """Start a pod actor on the node with the most room; False when none has room."""
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
        self.slots[index] = Slot(index, actor, actor.ready.remote(), time.monotonic(), node)
        return True

    def drop(self, slot: Slot, kill: bool = True) -> None:
        self.slots.pop(slot.index, None)
        if kill:
            # An actor that is already gone needs no killing.
            with contextlib.suppress(Exception):
                self.ray.kill(slot.actor, no_restart=True)

    def drop_all(self) -> None:
        for slot in list(self.slots.values()):
            self.drop(slot)

    def node_alive(self, node_id: str) -> bool:
        return any(n.get("NodeID") == node_id and n.get("Alive") for n in self.ray.nodes())

    # ----- start-up ---------------------------------------------------------------------
    def on_ready(self, slot: Slot, node_lost: Callable[[str], None]) -> bool:
        """The actor of ``slot`` answered ``ready()``: True when it can take jobs. A start
        that failed drops the slot (``node_lost(node)`` when its node is gone) and may
        quarantine the node (:class:`~finpod.tournament.failures.FailurePolicy`)."""
        ref, slot.ready_ref = slot.ready_ref, None
        try:
            info = self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            self.drop(slot)
            if not self.node_alive(slot.node_id):
                node_lost(slot.node_id)
                return False
            self._start_failed(slot, short_error(err))
            return False
        if info.get("error"):
            self.drop(slot)
            self._start_failed(slot, info["error"])
            return False
        self.policy.started(slot.node_id)
        self._check_versions(slot.node_id, info.get("versions", {}))
        self.summary.startup_s += time.monotonic() - slot.created
        slot.idle_since = time.monotonic()
        self.emit("slot", {"slot": slot.index, "node_id": slot.node_id})
        return True

    def _start_failed(self, slot: Slot, message: str) -> None:
        node = slot.node_id
        self.run_dir.log(
            f"pod actor on slot {slot.index} failed to start on node {node[:8]}: {message}",
            logging.WARNING,
        )
        self.emit("failed", {"message": message, "node_id": node, "start": True})
        reason = self.policy.start_failed(node, message)
        if reason is not None:
            self.summary.quarantined[node] = reason
            self.run_dir.log(f"quarantined node {node}: {reason}", logging.WARNING)
            self.emit("quarantine", {"node_id": node, "reason": reason})
            self.replan = True  # re-plan the pool without that node
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

    def give_up_slow_starts(self, now: float) -> None:
        for slot in list(self.slots.values()):
            if slot.ready_ref is not None and now - slot.created > START_TIMEOUT_S:
                self.run_dir.log(
                    f"pod actor on slot {slot.index} did not start on node {slot.node_id[:8]} "
                    f"within {START_TIMEOUT_S:.0f}s; giving its slot up",
                    logging.WARNING,
                )
                self.drop(slot)

    # ----- room -------------------------------------------------------------------------
    def wait_for_room(self, waited: float, now: float, last_msg: float) -> float:
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
                self.request(1)
            self.run_dir.log(
                f"waiting for a node with {need} (asked the autoscaler; {waited:.0f}s so far)"
            )
            self.emit("waiting", {"need": self.pod.bundle(), "waited_s": waited})
            return now
        return last_msg

    def request(self, pods: int) -> None:
        """Tell the autoscaler how many pods' resources to provide (0 releases them)."""
        if not self.setup.request_resources:
            return
        problem = request_pods(self.pod, pods)
        if problem is not None:
            self.run_dir.log(f"autoscaler request for {pods} pod(s) not made: {problem}")


def short_error(err: BaseException) -> str:
    """The last meaningful line of a (possibly remote) exception."""
    cause = getattr(err, "cause", None)
    return last_line(cause if isinstance(cause, BaseException) else err)
