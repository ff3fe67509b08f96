"""What a tournament run hands its orchestrator besides the leaderboard and the run
directory (:class:`Setup`), the shape of its event callback (:data:`Event`), and the
driver's check of the files every pod will read (:func:`check_inputs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.data.manifest import Manifest
from finpod.env.config import EQUAL_WEIGHT, EnvConfig
from finpod.env.observed import observed_feature_names
from finpod.env.reference import load_reference_file
from finpod.errors import FinpodError
from finpod.tournament.search import SearchSpace
from finpod.tournament.settings import TournamentConfig


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


def check_inputs(env_config: EnvConfig, dataset_dir: Path) -> Manifest:
    """Check on the driver what every pod will read, before a run directory or an actor
    exists: the dataset (its manifest against its Parquet files, benchmark included, see
    :meth:`~finpod.data.manifest.Manifest.load`) and the reference weights file (readable,
    naming only the dataset's tickers, starting at or before the train split). A problem is
    one :class:`FinpodError` line, as is a user feature the strategy names and the dataset
    lacks. Returns the dataset's manifest."""
    manifest = Manifest.load(dataset_dir)
    observed_feature_names(manifest.features, env_config.user_features)
    if env_config.reference == EQUAL_WEIGHT:
        return manifest
    path = env_config.reference
    frame = load_reference_file(path, manifest.tickers)
    train = manifest.splits.get("train")
    if train is not None and frame.index[0] > _as_time(train.start, frame.index.tz):
        raise FinpodError(
            f"reference file {path} starts at {frame.index[0]}, after the train split's first "
            f"bar {train.start}",
            "add a row at or before the split's first bar",
        )
    return manifest


def _as_time(text: str, tz: Any) -> pd.Timestamp:
    stamp = pd.Timestamp(text)
    return stamp.tz_localize(tz) if stamp.tz is None else stamp.tz_convert(tz)
