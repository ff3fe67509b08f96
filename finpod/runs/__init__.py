"""The run directory (``runs/<run-id>/``): one format for single agents and tournaments.

A low layer, beside :mod:`finpod.data`: it imports nothing of finpod but
:mod:`finpod.atomic` and :mod:`finpod.errors`, and every layer above writes and reads run
directories only through it.

- :mod:`finpod.runs.rundir`: create, resume and look up a run; ``run.json`` with package
  versions; the strategy copy; ``train.log``.
- :mod:`finpod.runs.toml_writer`: the one TOML writer (``strategy.toml``).
- :mod:`finpod.runs.metrics_file`: ``metrics.csv`` and ``learning_curves.png``.
- :mod:`finpod.runs.leaderboard`: ``leaderboard.json`` and the checkpoints it names.
- :mod:`finpod.runs.candidates`: ``candidates.bin``, every candidate selection chose among.
- :mod:`finpod.runs.lock`: the lock file of a folder in use (one writer per run).
- :mod:`finpod.runs.tensorboard`: ``tensorboard/<pod_id>/``, ``metrics.csv`` mirrored as
  TensorBoard event files (with each pod's hyperparameters).
"""

from finpod.runs.candidates import (
    CANDIDATES_FILE,
    CandidateSet,
    load_candidates,
    per_bar_sharpes,
    record_candidate,
)
from finpod.runs.leaderboard import (
    CHECKPOINT_DIR,
    LEADERBOARD_FILE,
    Entry,
    Leaderboard,
    Progress,
    checkpoint_name,
)
from finpod.runs.lock import LOCK_FILE, FolderLock
from finpod.runs.metrics_file import (
    CURVES_FILE,
    METRICS_FILE,
    METRICS_HEADER,
    MetricRow,
    append_metrics,
    metrics_frame,
    plot_learning_curves,
    read_metrics,
    write_metrics,
)
from finpod.runs.rundir import (
    LOG_FILE,
    RUN_FILE,
    RUN_KINDS,
    STRATEGY_FILE,
    RunDir,
    check_run_id,
    close_logger,
    find_run,
    new_run_id,
    package_versions,
    read_json,
    read_run_info,
    run_folder,
)
from finpod.runs.tensorboard import TENSORBOARD_DIR, EventMirror, read_events, read_hparams
from finpod.runs.toml_writer import toml_dumps

__all__ = [
    "CANDIDATES_FILE",
    "CHECKPOINT_DIR",
    "CURVES_FILE",
    "RUN_KINDS",
    "LEADERBOARD_FILE",
    "LOCK_FILE",
    "LOG_FILE",
    "METRICS_FILE",
    "METRICS_HEADER",
    "RUN_FILE",
    "STRATEGY_FILE",
    "TENSORBOARD_DIR",
    "CandidateSet",
    "Entry",
    "EventMirror",
    "FolderLock",
    "Leaderboard",
    "MetricRow",
    "Progress",
    "RunDir",
    "append_metrics",
    "metrics_frame",
    "check_run_id",
    "checkpoint_name",
    "close_logger",
    "find_run",
    "load_candidates",
    "new_run_id",
    "package_versions",
    "per_bar_sharpes",
    "plot_learning_curves",
    "read_events",
    "read_hparams",
    "read_json",
    "read_metrics",
    "read_run_info",
    "record_candidate",
    "run_folder",
    "toml_dumps",
    "write_metrics",
]
