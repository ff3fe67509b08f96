"""The run directory of a tournament: everything needed to reproduce it and to backtest it.

::

    runs/<run-id>/
      run.json           run id, creation time, resolved strategy, dataset path and hash,
                         seed, package versions
      strategy.toml      the resolved strategy
      leaderboard.json   see :mod:`finpod.tournament.leaderboard`
      checkpoints/<pod_id>.safetensors
      metrics.csv        pod_id,env_steps,wall_s,split,metric,value (append-only)
      learning_curves.png
      train.log

Every file except the append-only ``metrics.csv`` and ``train.log`` is written atomically
(write-then-rename), so killing the driver at any instant leaves each file either old or
new, never torn. ``metrics.csv`` grows by one ``write`` + ``fsync`` of whole lines per
pod (no rewrite per result); its reader drops a torn last line, and reopening a run cuts
that line off before appending again.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import logging
import math
import os
import platform
import secrets
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from finpod.atomic import atomic_write, atomic_write_json, atomic_write_text
from finpod.errors import FinpodError

RUN_FILE = "run.json"
STRATEGY_FILE = "strategy.toml"
METRICS_FILE = "metrics.csv"
CURVES_FILE = "learning_curves.png"
LOG_FILE = "train.log"
METRICS_HEADER = ("pod_id", "env_steps", "wall_s", "split", "metric", "value")

MetricRow = tuple[str, int, float, str, str, float]


def new_run_id(prefix: str = "tournament") -> str:
    """``<prefix>-YYYYmmdd-HHMMSS-<4 hex>``: sortable by time, unique across machines."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(2)}"


def package_versions() -> dict[str, str]:
    """Versions of Python and the packages that decide a run's numbers."""
    from importlib import metadata

    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("finpod", "torch", "numpy", "pandas", "ray", "safetensors", "empyrical-reloaded"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunDir:
    """A tournament run directory: writes its files and reads them back on resume."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.metrics: list[MetricRow] = []
        self.logger = _file_logger(self.path / LOG_FILE)

    # ----- creating and opening ---------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: Path,
        *,
        strategy: dict[str, Any],
        strategy_toml: str,
        dataset_path: Path,
        dataset_hash: str,
        seed: int,
        extra: dict[str, Any] | None = None,
    ) -> RunDir:
        """Make ``path`` (must not exist) and write ``run.json`` and ``strategy.toml``."""
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise FinpodError(f"run directory {path} already exists", "use --resume to continue it")
        path.mkdir(parents=True, exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        info = {
            "run_id": path.name,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "kind": "tournament",
            "strategy": strategy,
            "dataset": {"path": str(Path(dataset_path).resolve()), "hash": dataset_hash},
            "seed": int(seed),
            "versions": package_versions(),
            **(extra or {}),
        }
        atomic_write_json(path / RUN_FILE, info)
        atomic_write_text(path / STRATEGY_FILE, strategy_toml)
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
        _cut_torn_tail(path / METRICS_FILE)
        return run

    def info(self) -> dict[str, Any]:
        """The parsed ``run.json``."""
        try:
            return json.loads((self.path / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise FinpodError(f"{self.path / RUN_FILE} is unreadable: {err}", "restore it") from err

    # ----- logging and metrics ----------------------------------------------------------
    def log(self, message: str, level: int = logging.INFO) -> None:
        """Append a time-stamped line to ``train.log``."""
        self.logger.log(level, message)

    def add_metrics(self, rows: Iterable[MetricRow]) -> None:
        """Append learning-curve rows to ``metrics.csv``: one ``write`` of whole lines,
        then ``fsync`` (a crash leaves at most a torn last line, which readers drop)."""
        new = list(rows)
        if not new:
            return
        self.metrics.extend(new)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        for pod, steps, wall, split, metric, value in new:
            writer.writerow([pod, int(steps), f"{wall:.3f}", split, metric, _fmt(value)])
        path = self.path / METRICS_FILE
        if not path.is_file():
            self.write_metrics()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, buf.getvalue().encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

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

    def write_metrics(self) -> None:
        """Rewrite ``metrics.csv`` with every row held (atomically)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(METRICS_HEADER)
        for pod, steps, wall, split, metric, value in self.metrics:
            writer.writerow([pod, int(steps), f"{wall:.3f}", split, metric, _fmt(value)])
        atomic_write_text(self.path / METRICS_FILE, buf.getvalue())

    def plot_learning_curves(self, score_name: str, highlight: Iterable[str] = ()) -> Path | None:
        """Validation score vs env steps of every pod (``highlight``ed pods drawn bold)."""
        rows = [r for r in self.metrics if r[3] == "validation" and r[4] == score_name]
        if not rows:
            return None
        # A bare Figure draws with Agg without switching the process's pyplot backend.
        from matplotlib.figure import Figure

        bold = list(highlight)
        by_pod: dict[str, list[tuple[int, float]]] = {}
        for pod, steps, _, _, _, value in rows:
            by_pod.setdefault(pod, []).append((steps, value))
        fig = Figure(figsize=(8, 4.5), dpi=100)
        ax = fig.subplots()
        for pod, points in by_pod.items():
            points.sort()
            xs, ys = zip(*points, strict=True)
            if pod in bold:
                ax.plot(xs, ys, marker="o", lw=1.8, label=f"{pod} (#{bold.index(pod) + 1})")
            else:
                ax.plot(xs, ys, color="0.7", lw=0.8, alpha=0.7)
        ax.set_xlabel("env steps (lineage)")
        ax.set_ylabel(f"validation {score_name}")
        ax.set_title(f"Tournament learning curves — {len(by_pod)} pods")
        ax.grid(alpha=0.3)
        if bold:
            ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        target = self.path / CURVES_FILE
        atomic_write(target, lambda p: fig.savefig(p, format="png"))
        return target


def read_metrics(path: Path) -> list[MetricRow]:
    """Rows of a ``metrics.csv`` (empty if the file does not exist).

    A last line without its newline is a write cut short by a crash: it is dropped. A
    malformed line anywhere else raises :class:`FinpodError`.
    """
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows: list[MetricRow] = []
    with io.StringIO(text, newline="") as fh:
        for rec in csv.DictReader(fh):
            try:
                rows.append(
                    (
                        rec["pod_id"],
                        int(rec["env_steps"]),
                        float(rec["wall_s"]),
                        rec["split"],
                        rec["metric"],
                        float(rec["value"]) if rec["value"] not in ("", "nan") else math.nan,
                    )
                )
            except (KeyError, ValueError) as err:
                raise FinpodError(f"{path} has a malformed row: {err}", "restore the file") from err
    return rows


def _cut_torn_tail(path: Path) -> None:
    """Truncate ``path`` after its last newline (a torn append), so appends stay whole."""
    if not path.is_file():
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
            os.fsync(fh.fileno())


def _fmt(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.6g}"


def _file_logger(path: Path) -> logging.Logger:
    logger = logging.getLogger(f"finpod.tournament.run.{path.parent.resolve()}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if not logger.handlers:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    return logger


def close_logger(run: RunDir) -> None:
    """Flush and detach ``train.log``'s handler (tests open many runs in one process)."""
    for handler in list(run.logger.handlers):
        handler.close()
        run.logger.removeHandler(handler)


def toml_dumps(obj: dict[str, Any]) -> str:
    """Minimal TOML writer for resolved strategies: scalars, lists, inline and nested tables."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "nan"
            if math.isinf(value):
                return "inf" if value > 0 else "-inf"
            return repr(value)
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(scalar(v) for v in value) + "]"
        if isinstance(value, dict):
            return (
                "{ "
                + ", ".join(f"{_key(k)} = {scalar(v)}" for k, v in value.items() if v is not None)
                + " }"
            )
        raise TypeError(f"cannot write {type(value).__name__} to TOML")

    def table(prefix: str, body: dict[str, Any]) -> None:
        def inline(v: Any) -> bool:
            return not isinstance(v, dict) or _is_leaf_spec(v)

        plain = {k: v for k, v in body.items() if v is not None and inline(v)}
        nested = {k: v for k, v in body.items() if v is not None and not inline(v)}
        header = bool(prefix) and (bool(plain) or not nested)
        if header:
            lines.append(f"[{prefix}]")
        for k, v in plain.items():
            lines.append(f"{_key(k)} = {scalar(v)}")
        if header or plain:
            lines.append("")
        for k, v in nested.items():
            table(f"{prefix}.{_key(k)}" if prefix else _key(k), v)

    table("", obj)
    return "\n".join(lines).rstrip() + "\n"


def _is_leaf_spec(value: dict[str, Any]) -> bool:
    return set(value) <= {"low", "high", "log"} and {"low", "high"} <= set(value)


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)
