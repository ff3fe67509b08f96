"""What a tournament run hands its orchestrator besides the leaderboard and the run
directory (:class:`Setup`), and the shape of its event callback (:data:`Event`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finpod.tournament.settings import SearchSpace, TournamentConfig

if TYPE_CHECKING:
    from finpod.env import EnvConfig


@dataclass
class Setup:
    """What the orchestrator needs besides the leaderboard and the run directory."""

    config: TournamentConfig
    """Validated ``[tournament]`` table."""
    space: SearchSpace
    """Validated ``[search]`` table."""
    dataset_dir: Path
    """Dataset directory, read by the driver only (pods get it through the object store)."""
    env_config: EnvConfig
    """The strategy's env settings; every pod actor gets this object (each pod applies its
    searched execution controls to it, see :func:`~finpod.tournament.search.pod_env_config`)."""
    num_envs: int
    """W: vectorized envs per learner."""
    seed: int
    """Run seed (drives the generator)."""
    device: str = "cpu"
    """Torch device inside the pods: ``"cpu"`` or ``"cuda"`` (with ``gpus_per_pod`` > 0)."""
    gpus_per_pod: float = 0.0
    """Resolved GPUs per pod."""
    request_resources: bool = False
    """On a cluster with an autoscaler, ask it for pods' resources (``pods`` of them when a
    number; one pod's when ``"auto"`` finds no room) and keep waiting while it scales."""
    dataset_hash: str | None = None
    """Hash the run expects; the driver's check of the files must give it."""


#: ``f(kind, payload)``: the run's events (pool changes, pod starts, finishes, failures…).
Event = Callable[[str, dict[str, Any]], None]
