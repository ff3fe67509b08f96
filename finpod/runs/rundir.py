"""The run directory: everything needed to reproduce a run and to backtest it.

One format for a single agent (``kind = "agent"``) and a tournament
(``kind = "tournament"``)::

    runs/<run-id>/
      run.json           run id, kind, creation time, resolved strategy, dataset path and
                         hash, seed, torch threads (one agent's: the count it trains
                         with, changed only by --threads on a resume), package versions
                         (and each Ray node's)
      strategy.toml      the resolved strategy
      winner.toml        a tournament whose champion a challenger replaced: the strategy
                         with the winner's settings as its base (see
                         :mod:`finpod.tournament.winner`)
      inputs/            a copy of each file the run read outside its directory (strategy
                         file, reference weights, benchmark levels); run.json's ``inputs``
                         holds their paths and SHA-256 (see :mod:`finpod.runs.inputs`)
      leaderboard.json   see :mod:`finpod.runs.leaderboard`
      candidates.bin     see :mod:`finpod.runs.candidates`
      checkpoints/<pod_id>.safetensors (a single agent also keeps last.safetensors)
      metrics.csv        see :mod:`finpod.runs.metrics_file`
      learning_curves.png
      train.log
      .finpod.lock       only while a process writes the run (see :mod:`finpod.runs.lock`)
      tensorboard/<pod_id>/events.out.tfevents.*   metrics.csv's rows and each pod's
                         hyperparameters for TensorBoard (see :mod:`finpod.runs.tensorboard`)

Every file except the append-only ``metrics.csv`` and ``train.log`` is written atomically
(write-then-rename), so killing the driver at any instant leaves each file either old or
new, never torn. ``metrics.csv`` grows by one ``write`` + ``fsync`` of whole lines per
pod (no rewrite per result); its reader drops a torn last line, and reopening a run cuts
that line off before appending again.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import platform
import re
import secrets
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from finpod.atomic import atomic_write_json, atomic_write_text
from finpod.errors import FinpodError
from finpod.runs.inputs import INPUTS_KEY, check_inputs_exist, record_inputs
from finpod.runs.leaderboard import Entry
from finpod.runs.lock import LOCK_FILE
from finpod.runs.metrics_file import (
    CURVES_FILE,
    METRICS_FILE,
    MetricRow,
    append_metrics,
    cut_torn_tail,
    plot_learning_curves,
    read_metrics,
    write_metrics,
)
from finpod.runs.tensorboard import TENSORBOARD_DIR, EventMirror
from finpod.runs.toml_writer import toml_dumps

RUN_FILE = "run.json"
STRATEGY_FILE = "strategy.toml"
#: A tournament whose champion a challenger replaced: the winner's settings as a strategy.
WINNER_FILE = "winner.toml"
LOG_FILE = "train.log"
CHECKPOINTS_DIR = "checkpoints"
#: Kinds of run: one agent trained by ``finpod.agents.train``, or a Podracer tournament.
RUN_KINDS = ("agent", "tournament")


def new_run_id(prefix: str = "tournament") -> str:
    """``<prefix>-YYYYmmdd-HHMMSS-<4 hex>``: sortable by time, unique across machines."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(2)}"


#: A run id: one path component of letters, digits and ``._+=@-``, starting with a letter or
#: digit (so never ``..``, a hidden name, a path or an option).
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,199}")


def check_run_id(run_id: str) -> str:
    """``run_id`` when it names one folder under ``--runs`` (:data:`_RUN_ID`), else a
    :class:`FinpodError`: a run is never written outside ``--runs``."""
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise FinpodError(
            f"--run-id {run_id!r} is not a single folder name",
            "use letters, digits and . _ + = @ - (starting with a letter or digit), no / or ..",
        )
    return run_id


def run_folder(runs: str | Path, run_id: str) -> Path:
    """The folder of run ``run_id`` under ``runs`` (the id checked by :func:`check_run_id`)."""
    return Path(runs) / check_run_id(run_id)


#: The packages whose versions decide a run's numbers (recorded in ``run.json``).
VERSIONED_PACKAGES = (
    "finpod",
    "torch",
    "numpy",
    "pandas",
    "ray",
    "gymnasium",
    "safetensors",
    "empyrical-reloaded",
)


def package_versions() -> dict[str, str]:
    """Versions of Python, the platform and :data:`VERSIONED_PACKAGES` (those installed)."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def find_run(run: str | Path, runs_root: str | Path = "runs") -> Path:
    """The run directory named by ``run``: a path, or a run id under ``runs_root``.

    A run directory is a folder holding ``run.json``.
    """
    for candidate in (Path(run), Path(runs_root) / str(run)):
        if (candidate / RUN_FILE).is_file():
            return candidate
    raise FinpodError(
        f"run {str(run)!r} not found (no {RUN_FILE} there)",
        f"give a run directory or a run id under {runs_root}/",
    )


def read_json(path: Path, what: str) -> dict[str, Any]:
    """Parse a JSON file of a run directory, or say which file is missing or broken."""
    path = Path(path)
    if not path.is_file():
        raise FinpodError(f"{what} not found: {path}", "is this a finpod run directory?")
    try:
        parsed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FinpodError(f"{what} {path} is not valid JSON: {err}", "re-run finpod train") from err
    if not isinstance(parsed, dict):
        raise FinpodError(
            f"{what} {path} holds a JSON {type(parsed).__name__}, not an object",
            "restore the file finpod wrote, or re-run finpod train",
        )
    return parsed


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """The parsed ``run.json`` of ``run_dir``; a run written before ``kind`` existed is a
    tournament. A file that is not the object finpod writes is one :class:`FinpodError`."""
    info = _checked_run_json(Path(run_dir) / RUN_FILE)
    info.setdefault("kind", "tournament")
    return info


def _checked_run_json(path: Path) -> dict[str, Any]:
    """``run.json`` as written, or a :class:`FinpodError` when it is not an object, or its
    kind or dataset record is not what finpod writes."""
    info = read_json(path, RUN_FILE)
    hint = "restore the file finpod wrote, or re-run finpod train"
    kind = info.get("kind", "tournament")
    if kind not in RUN_KINDS:
        raise FinpodError(f"{path}: kind {kind!r} is not one of {RUN_KINDS}", hint)
    dataset = info.get("dataset")
    if dataset is not None and not (
        isinstance(dataset, dict)
        and isinstance(dataset.get("path"), str)
        and isinstance(dataset.get("hash"), str | None)
        and isinstance(dataset.get("splits", {}), dict)
    ):
        raise FinpodError(f"{path}: dataset is not an object with a path and a hash", hint)
    return info


class RunDir:
    """A run directory (single agent or tournament): writes its files, reads them back."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.metrics: list[MetricRow] = []
        self._logger: logging.Logger | None = None
        self._events: EventMirror | None = None
        self._events_broken = False

    @property
    def logger(self) -> logging.Logger:
        """The logger appending to ``train.log``, opened on first use (a single-agent run's
        training loop writes its own ``train.log``)."""
        if self._logger is None:
            self._logger = _file_logger(self.path / LOG_FILE)
        return self._logger

    # ----- creating and opening ---------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: Path,
        *,
        strategy: dict[str, Any],
        strategy_toml: str | None = None,
        dataset_path: Path,
        dataset_hash: str,
        seed: int,
        threads: int | None = None,
        kind: str = "tournament",
        extra: dict[str, Any] | None = None,
        inputs: dict[str, str | Path | None] | None = None,
        dataset_splits: dict[str, str] | None = None,
    ) -> RunDir:
        """Make ``path`` (must not exist) and write ``run.json`` and ``strategy.toml``.

        ``strategy`` is the resolved strategy as a dict; ``strategy_toml`` its TOML text
        (default: written from ``strategy`` by :func:`~finpod.runs.toml_writer.toml_dumps`).
        ``inputs`` (role → file, None: not read) are the files the run reads outside its
        directory: each is copied under ``inputs/`` and hashed in ``run.json``
        (:func:`~finpod.runs.inputs.record_inputs`). ``dataset_splits``: split → SHA-256
        of the bars it reads, kept as ``run.json``'s ``dataset.splits`` (a backtest checks
        its split against it). ``threads``: torch's intra-op threads of one agent's
        training, recorded beside the seed (the count changes float sums, so a run's
        numbers depend on it; None: not recorded, as for a tournament, whose pods set
        theirs). The folder's lock file (:mod:`finpod.runs.lock`) may be there already.
        """
        if kind not in RUN_KINDS:
            raise ValueError(f"kind must be one of {RUN_KINDS}, got {kind!r}")
        path = Path(path)
        if path.exists() and any(p.name != LOCK_FILE for p in path.iterdir()):
            raise FinpodError(f"run directory {path} already exists", "use --resume to continue it")
        check_inputs_exist(inputs or {})  # before the directory exists: nothing left behind
        path.mkdir(parents=True, exist_ok=True)
        (path / CHECKPOINTS_DIR).mkdir(exist_ok=True)
        info = {
            "run_id": path.name,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "kind": kind,
            "strategy": strategy,
            "dataset": {
                "path": str(Path(dataset_path).resolve()),
                "hash": dataset_hash,
                **({"splits": dict(dataset_splits)} if dataset_splits else {}),
            },
            "seed": int(seed),
            **({} if threads is None else {"threads": int(threads)}),
            "versions": package_versions(),
            INPUTS_KEY: record_inputs(path, inputs or {}),
            **(extra or {}),
        }
        atomic_write_json(path / RUN_FILE, info)
        text = strategy_toml if strategy_toml is not None else toml_dumps(strategy)
        atomic_write_text(path / STRATEGY_FILE, text)
        run = cls(path)
        run.write_metrics()
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory (for ``--resume``); its metrics are read back."""
        path = Path(path)
        if not (path / RUN_FILE).is_file():
            raise FinpodError(
                f"{path} is not a finpod run directory (no {RUN_FILE})", "pass the run's folder"
            )
        run = cls(path)
        run.metrics = read_metrics(path / METRICS_FILE)
        cut_torn_tail(path / METRICS_FILE)
        return run

    def info(self) -> dict[str, Any]:
        """The parsed ``run.json`` (checked as :func:`read_run_info` checks it)."""
        return _checked_run_json(self.path / RUN_FILE)

    @property
    def kind(self) -> str:
        """``"agent"`` or ``"tournament"`` (a run written before ``kind`` existed: tournament)."""
        return str(self.info().get("kind", "tournament"))

    @property
    def strategy_path(self) -> Path:
        """The run's copy of its resolved strategy."""
        return self.path / STRATEGY_FILE

    def write_winner_strategy(self, text: str) -> Path:
        """Write ``winner.toml`` (atomically): the strategy of the challenger that
        replaced the champion (:mod:`finpod.tournament.winner`)."""
        return atomic_write_text(self.path / WINNER_FILE, text)

    def checkpoint(self, name: str) -> Path:
        """``checkpoints/<name>.safetensors`` of this run."""
        return self.path / CHECKPOINTS_DIR / f"{name}.safetensors"

    # ----- logging and metrics ----------------------------------------------------------
    def log(self, message: str, level: int = logging.INFO) -> None:
        """Append a time-stamped line to ``train.log``."""
        self.logger.log(level, message)

    def add_metrics(self, rows: Iterable[MetricRow]) -> None:
        """Append learning-curve rows to ``metrics.csv`` (see
        :func:`~finpod.runs.metrics_file.append_metrics`)."""
        new = list(rows)
        if not new:
            return
        self.metrics.extend(new)
        append_metrics(self.path / METRICS_FILE, new)
        self._mirror(lambda events: events.write_rows(new))

    def add_hparams(self, pod_id: str, hparams: dict[str, Any], env_steps: int = 0) -> None:
        """Record ``pod_id``'s hyperparameters in its TensorBoard folder (HParams dashboard
        and a text table; see :func:`~finpod.runs.tensorboard.clean_hparams`)."""
        self._mirror(lambda events: events.write_hparams(pod_id, hparams, env_steps))

    @property
    def events(self) -> EventMirror:
        """The writer of ``tensorboard/<pod_id>/`` event files, opened on first use; its
        wall clock starts at the run's creation."""
        if self._events is None:
            try:
                created = _dt.datetime.fromisoformat(str(self.info()["created"])).timestamp()
            except (FinpodError, KeyError, ValueError):
                created = None
            self._events = EventMirror(self.path / TENSORBOARD_DIR, wall_origin=created)
        return self._events

    def flush_events(self) -> None:
        """Write the pending TensorBoard events to disk."""
        if self._events is not None:
            self._mirror(lambda events: events.flush())

    def close_events(self) -> None:
        """Flush and close the TensorBoard writers (a later row opens new event files)."""
        if self._events is not None:
            self._mirror(lambda events: events.close())

    def _mirror(self, write: Any) -> None:
        # The event files mirror metrics.csv: a failure there (TensorBoard missing, a full
        # disk) is logged once and ends the mirroring, never the run.
        if self._events_broken:
            return
        try:
            write(self.events)
        except Exception as err:  # noqa: BLE001 - a mirror must never stop a run
            self._events_broken = True
            self.log(f"TensorBoard event files not written: {err}", logging.WARNING)

    def record_nodes(self, nodes: dict[str, dict[str, str]]) -> None:
        """Store each node's package versions under ``run.json``'s ``nodes`` (atomically);
        called when a node runs its first pod."""
        info = self.info()
        info["nodes"] = {**info.get("nodes", {}), **nodes}
        atomic_write_json(self.path / RUN_FILE, info)

    def record_throughput(self, env_steps: int, wall_s: float) -> dict[str, float]:
        """Store ``run.json``'s ``throughput``: env steps trained by every pod (members of
        populations included, each counted once) over the run's wall seconds (earlier
        sessions of a resumed run included). Returns the record."""
        rate = env_steps / wall_s if wall_s > 0 else 0.0
        record = {"env_steps": int(env_steps), "wall_s": round(float(wall_s), 3)}
        record["env_steps_per_s"] = round(rate, 1)
        info = self.info()
        info["throughput"] = record
        atomic_write_json(self.path / RUN_FILE, info)
        return record

    def record_threads(self, threads: int) -> None:
        """Store ``run.json``'s ``threads``: the torch threads a resumed agent trains with
        from now on (``--threads`` given on the resume)."""
        info = self.info()
        info["threads"] = int(threads)
        atomic_write_json(self.path / RUN_FILE, info)

    def record_stopped(self, env_steps: int | None, target_steps: int | None = None) -> None:
        """Mark in ``run.json`` that training was stopped (SIGINT / SIGTERM) at
        ``env_steps`` of ``target_steps``, so a backtest says its agent is the best
        checkpoint *so far*; ``None`` clears the mark (the run trained to its end)."""
        info = self.info()
        if env_steps is None:
            if "stopped" not in info:
                return
            del info["stopped"]
        else:
            info["stopped"] = {"env_steps": int(env_steps), "target_steps": target_steps}
        atomic_write_json(self.path / RUN_FILE, info)

    def record_budget(self, report: dict[str, Any]) -> None:
        """Store ``run.json``'s ``budget``: how a tournament spent its env steps (per pod
        and per lineage, promotions, stops, children, the selected agent's share; see
        :meth:`finpod.tournament.schedulers.asha.Allocation.report`)."""
        info = self.info()
        info["budget"] = report
        atomic_write_json(self.path / RUN_FILE, info)

    def record_selection(self, record: dict[str, Any]) -> None:
        """Store ``run.json``'s ``selection``: the agent a tournament hands over, the
        champion, every challenger's paired test and the decision
        (:mod:`finpod.tournament.champion`)."""
        info = self.info()
        info["selection"] = record
        atomic_write_json(self.path / RUN_FILE, info)

    def record_learning(self, best: Entry | None) -> dict[str, Any] | None:
        """Store ``run.json``'s ``learning``: the env steps and gradient steps behind the
        best entry on validation, and their ratio. Returns the record (None: no entry)."""
        if best is None:
            return None
        ratio = best.updates_per_env_step
        record = {
            "selected": best.pod_id,
            "env_steps": int(best.env_steps),
            "updates": int(best.updates),
            "updates_per_env_step": None if ratio is None else float(f"{ratio:.6g}"),
        }
        info = self.info()
        info["learning"] = record
        atomic_write_json(self.path / RUN_FILE, info)
        return record

    def write_metrics(self) -> None:
        """Rewrite ``metrics.csv`` with every row held (atomically)."""
        write_metrics(self.path / METRICS_FILE, self.metrics)

    def plot_learning_curves(
        self, score_name: str, highlight: Iterable[str] = (), *, train_panel: bool = False
    ) -> Path | None:
        """Validation score vs env steps of every pod (``highlight``ed pods drawn bold).

        Also flushes the TensorBoard event files (the same cadence: the curves on disk and
        in TensorBoard stay as fresh as each other)."""
        self.flush_events()
        n = len({r[0] for r in self.metrics})
        title = (
            f"Tournament learning curves — {n} pods"
            if self.kind == "tournament"
            else "learning curves"
        )
        return plot_learning_curves(
            self.metrics,
            self.path / CURVES_FILE,
            score_name,
            highlight=highlight,
            title=title,
            train_panel=train_panel,
        )


def _file_logger(path: Path) -> logging.Logger:
    logger = logging.getLogger(f"finpod.runs.{path.parent.resolve()}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if not logger.handlers:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    return logger


def close_logger(run: RunDir) -> None:
    """Close the run's TensorBoard writers, then flush and detach ``train.log``'s handler
    (at the end of a run; tests open many runs in one process)."""
    run.close_events()
    if run._logger is None:
        return
    for handler in list(run._logger.handlers):
        handler.close()
        run._logger.removeHandler(handler)
