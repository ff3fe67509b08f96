"""What a pod sends back, and the checks and conversions around it (used by
:mod:`~finpod.tournament.pod` and :mod:`~finpod.tournament.members`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
import torch

from finpod.agents.checkpoint import checkpoint_to_bytes, read_checkpoint_bytes

if TYPE_CHECKING:
    from finpod.env import EnvConfig

#: Prefix of :attr:`PodResult.failure` for a pod whose numbers went non-finite.
NON_FINITE = "non-finite"


@dataclass
class PodResult:
    """What a finished pod sends back to the orchestrator."""

    pod_id: str
    """The spec's pod id."""
    algorithm: str
    """Registry name of the agent's algorithm."""
    hparams: dict[str, Any]
    """Every hyperparameter of the trained agent, JSON-ready."""
    score: float
    """Validation score of the final (returned) weights (NaN when ``failure``)."""
    history: list[dict[str, float]]
    """Validation scores along the lineage, this pod's epochs last."""
    env_steps: int
    """Env steps the agent has learned from, ancestors included."""
    steps_done: int
    """Env steps this pod trained (all learners)."""
    checkpoint: bytes
    """The agent as a finpod safetensors checkpoint file (empty when ``failure``)."""
    metrics: list[tuple[int, float, str, str, float]] = field(default_factory=list)
    """Learning-curve rows ``(env_steps, pod_wall_s, split, metric, value)``."""
    node_id: str = ""
    """Ray node the pod ran on ("" outside Ray)."""
    train_s: float = 0.0
    """Seconds spent inside the pod (training, fusion, evaluation, checkpoint)."""
    epochs_done: int = 0
    """Epochs completed (fewer than asked when ``max_seconds`` stopped the pod)."""
    returns: np.ndarray | None = None
    """(T_validation − 1,) float32 per-bar simple returns of the scored weights on the
    validation split (for PBO / Deflated Sharpe over every candidate)."""
    failure: str = ""
    """Why the pod failed ("" when it scored), e.g. ``"non-finite: loss actor_loss"``."""
    buffer_rows: int = 0
    """Replay-buffer transitions exported with the result (0: none)."""
    env: dict[str, Any] = field(default_factory=dict)
    """The pod's searched execution controls (``PodSpec.env``) it trained and was scored
    with, recorded on its leaderboard entry so the backtest replays them."""
    updates: int = 0
    """Gradient steps the agent's weights have taken, ancestors included (with
    ``env_steps``: how much learning stands behind the checkpoint)."""


def checkpoint_bytes(agent: Any, env: EnvConfig | None = None) -> bytes:
    """The bytes of ``agent``'s checkpoint file, with the ``env`` it was trained and
    scored with in its metadata (made in memory)."""
    return checkpoint_to_bytes(agent, env=env)


def state_from_checkpoint_bytes(data: bytes) -> dict[str, torch.Tensor]:
    """Verified state dict of a checkpoint file's bytes (checksum checked)."""
    return read_checkpoint_bytes(data)[1]


def last_line(err: BaseException) -> str:
    """The last meaningful line of an error's text (at most 300 characters)."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else type(err).__name__)[:300]


def node_id() -> str:
    try:
        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray there is no node id to report
        pass
    return ""
