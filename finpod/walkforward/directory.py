"""The walk-forward directory: settings, per fold × seed results, and how a run resumes.

::

    <out>/
      walkforward.json           settings: dataset hash, fold plan, seeds, resolved strategy
      walkforward.log            one line per event
      folds/fold-03/seed-1/
        returns.parquet          (T_bt − 1) per-bar backtest returns: agent, benchmarks
        candidates.parquet       (T_val, n) validation returns of every checkpoint scored
        training.csv             the training log (losses, validation scores)
        best.safetensors         the selected checkpoint
        result.json              scores, metrics, statistics; written last: "done"
      folds/fold-03/fold.json    the fold's selection across seeds (DSR, PBO)
      stitched_returns.parquet, seed_returns.parquet, folds.csv, seeds.csv,
      selections.csv, stitched_metrics.csv, summary.json, report.html

Every file is written atomically (write, then rename) and nothing is pickled: JSON,
Parquet, CSV and safetensors only. A fold × seed counts as done when its ``result.json``
exists; a killed walk-forward started again with the same settings skips what is done and
continues with the rest. Non-finite numbers are stored as JSON ``null``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from finpod.atomic import atomic_write, atomic_write_json, atomic_write_text
from finpod.errors import FinpodError
from finpod.runs.lock import LOCK_FILE, FolderLock
from finpod.walkforward.job import SeedResult

SETTINGS_FILE = "walkforward.json"
LOG_FILE = "walkforward.log"
RESULT_FILE = "result.json"
#: Per fold × seed: the training log (CSV rows of the agent's metrics).
TRAINING_LOG = "training.csv"
FORMAT_VERSION = 1


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and NaN/inf as None (valid JSON)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def seed_dir(out: Path, fold: int, seed: int) -> Path:
    return Path(out) / "folds" / f"fold-{fold:02d}" / f"seed-{seed}"


def fold_dir(out: Path, fold: int) -> Path:
    return Path(out) / "folds" / f"fold-{fold:02d}"


def _write_parquet(path: Path, frame: pd.DataFrame) -> None:
    atomic_write(path, lambda p: frame.to_parquet(p, engine="pyarrow"))


def save_seed(out: Path, res: SeedResult) -> Path:
    """Persist one job's result; ``result.json`` last, so a partial write is never "done"."""
    d = seed_dir(out, res.fold, res.seed)
    d.mkdir(parents=True, exist_ok=True)
    _write_parquet(d / "returns.parquet", res.returns.astype("float64"))
    cands = pd.DataFrame(
        np.asarray(res.candidates["returns"], dtype=np.float64),
        columns=[str(c) for c in res.candidates["ids"]],
    )
    _write_parquet(d / "candidates.parquet", cands)
    atomic_write_text(d / TRAINING_LOG, res.metrics_csv)
    atomic_write(d / "best.safetensors", lambda p: p.write_bytes(res.checkpoint))
    atomic_write_json(
        d / RESULT_FILE,
        json_safe(
            {
                "fold": res.fold,
                "seed": res.seed,
                "pod_id": res.pod_id,
                "best_score": res.best_score,
                "best_env_steps": res.best_env_steps,
                "selected_id": res.selected_id,
                "score_name": res.score_name,
                "candidates": [
                    {"id": i, "score": s, "kind": k}
                    for i, s, k in zip(
                        res.candidates["ids"],
                        res.candidates["scores"],
                        res.candidates["kinds"],
                        strict=True,
                    )
                ],
                "metrics": res.metrics,
                "statistics": res.statistics,
                "train_seconds": res.train_seconds,
                "backtest_seconds": res.backtest_seconds,
                "env_steps": res.env_steps,
                "warm_start_from": res.warm_start_from,
                "info": res.info,
            }
        ),
    )
    return d


def is_done(out: Path, fold: int, seed: int) -> bool:
    return (seed_dir(out, fold, seed) / RESULT_FILE).is_file()


def load_seed(out: Path, fold: int, seed: int) -> dict[str, Any]:
    """A persisted result: ``result.json``'s fields plus ``returns`` (DataFrame) and
    ``candidate_returns`` ((T_val, n) float64, columns in ``candidates`` order)."""
    d = seed_dir(out, fold, seed)
    try:
        rec = json.loads((d / RESULT_FILE).read_text(encoding="utf-8"))
        rec["returns"] = pd.read_parquet(d / "returns.parquet")
        cands = pd.read_parquet(d / "candidates.parquet")
    except (OSError, ValueError) as err:
        raise FinpodError(
            f"cannot read the results in {d}: {err}", f"delete {d} to train that fold × seed again"
        ) from err
    ids = [c["id"] for c in rec["candidates"]]
    rec["candidate_returns"] = cands[ids].to_numpy(dtype=np.float64)
    return rec


def read_checkpoint_bytes(out: Path, fold: int, seed: int) -> bytes:
    """The selected checkpoint of a persisted fold × seed, as bytes (for a warm start)."""
    return (seed_dir(out, fold, seed) / "best.safetensors").read_bytes()


def check_settings(out: Path, settings: dict[str, Any], restart: bool = False) -> bool:
    """Write ``settings`` to a new walk-forward directory, or check an existing one.

    Returns True when ``out`` already holds results to resume. Different settings are an
    error (a resumed walk-forward must be the same experiment), unless ``restart``, which
    clears the old results first.
    """
    out = Path(out)
    path = out / SETTINGS_FILE
    settings = json_safe({"format": FORMAT_VERSION, **settings})
    if path.is_file() and not restart:
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise FinpodError(
                f"{path} is unreadable: {err}", "pass --restart to start this walk-forward again"
            ) from err
        old_cmp = {k: v for k, v in old.items() if k != "created"}
        new_cmp = {k: v for k, v in settings.items() if k != "created"}
        if _canonical(old_cmp) != _canonical(new_cmp):
            changed = sorted(
                k
                for k in set(old_cmp) | set(new_cmp)
                if _canonical(old_cmp.get(k)) != _canonical(new_cmp.get(k))
            )
            raise FinpodError(
                f"{out} holds a walk-forward with other settings ({', '.join(changed)} differ)",
                "use another --out, the same settings to resume, or --restart",
            )
        return True
    if out.exists() and any(p.name != LOCK_FILE for p in out.iterdir()) and not path.is_file():
        raise FinpodError(
            f"{out} exists and is not a walk-forward directory", "choose a new or empty --out"
        )
    if restart and (out / "folds").exists():
        shutil.rmtree(out / "folds")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, settings)
    return False


def lock(out: Path, say: Any = None) -> FolderLock:
    """The lock of walk-forward folder ``out`` (made if missing), to hold with ``with``:
    a second walk-forward into the same folder is refused in one line naming the first
    (:mod:`finpod.runs.lock`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return FolderLock(out, "walk-forward", say=say)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Log:
    """``walkforward.log``: appended line by line (the whole file rewritten atomically)."""

    def __init__(self, out: Path, echo: Any = None) -> None:
        self.path = Path(out) / LOG_FILE
        self.echo = echo
        self.lines = (
            self.path.read_text(encoding="utf-8").splitlines() if self.path.is_file() else []
        )

    def __call__(self, line: str) -> None:

        self.lines.append(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}")
        atomic_write_text(self.path, "\n".join(self.lines) + "\n")
        if self.echo is not None:
            self.echo(line)


__all__ = [
    "Log",
    "check_settings",
    "lock",
    "fold_dir",
    "is_done",
    "json_safe",
    "load_seed",
    "read_checkpoint_bytes",
    "save_seed",
    "seed_dir",
]
