"""What a backtest reads of a run directory besides its agents.

The leaderboard as a table, the learning curves, the validation Sharpe ratios of the
candidates and how many validation evaluations a single-agent run made (the selection
statistics' inputs), and where the run's dataset is. The agents and their recorded env
settings: :mod:`finpod.backtest.agents`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from finpod.errors import FinpodError
from finpod.runs import METRICS_FILE, metrics_frame


def trial_sharpes(leaderboard: dict[str, Any], learning_curves: pd.DataFrame | None) -> list[float]:
    """Annualized validation Sharpe of every candidate the run recorded.

    The last validation ``sharpe`` of each pod in ``metrics.csv`` (it logs every candidate),
    else the leaderboard scores when the score is the Sharpe ratio.
    """
    if learning_curves is not None and {"pod_id", "split", "metric", "value"} <= set(
        learning_curves.columns
    ):
        val = learning_curves[
            (learning_curves["split"] == "validation") & (learning_curves["metric"] == "sharpe")
        ]
        if "env_steps" in val:
            val = val.sort_values("env_steps")
        values = val.groupby("pod_id")["value"].last().astype(float).tolist()
        if len(values) >= 2:
            return values
    if leaderboard.get("score_name", "sharpe") == "sharpe":
        entries = leaderboard.get("entries", [])
        return [float(e["score"]) for e in entries if e.get("score") is not None]
    return []


def read_curves(run_dir: Path) -> pd.DataFrame | None:
    """The run's ``metrics.csv`` as a frame (None when missing or unreadable)."""
    return metrics_frame(run_dir / METRICS_FILE)


def _short(value: Any) -> str:
    """A hyperparameter as a person reads it: floats to 4 significant digits."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def leaderboard_frame(leaderboard: dict[str, Any]) -> pd.DataFrame:
    """One row per entry. ``hparams (differing)`` lists only the hyperparameters whose shown
    values differ between entries of the same algorithm (the algorithm column already
    tells PPO from A2C); ``execution (differing)`` the execution controls a tournament
    searched (the entry's ``env``) whose shown values differ between entries."""
    entries = leaderboard.get("entries", [])
    params = [e.get("hparams") or {} for e in entries]
    algorithms = [e.get("algorithm") for e in entries]
    controls = [e.get("env") or {} for e in entries]
    execution = _differing(controls, [None] * len(entries))
    hparams = _differing(params, algorithms)
    rows = []
    for rank, (e, p, env) in enumerate(zip(entries, params, controls, strict=True), start=1):
        row = {
            "rank": rank,
            "pod_id": e.get("pod_id"),
            "algorithm": e.get("algorithm"),
            "score": e.get("score"),
            "env_steps": e.get("env_steps", (e.get("history") or [{}])[-1].get("env_steps")),
            "parent": e.get("parent") or "",
            "hparams (differing)": _listed(p, hparams.get(e.get("algorithm"), [])),
        }
        if any(execution.values()):
            row["execution (differing)"] = _listed(env, execution[None])
        rows.append(row)
    return pd.DataFrame(rows)


def _differing(settings: list[dict[str, Any]], groups: list[Any]) -> dict[Any, list[str]]:
    """Per group, the keys whose shown value (:func:`_short`) is not the same for every
    entry of the group that sets them."""
    out: dict[Any, list[str]] = {}
    for group in dict.fromkeys(groups):
        members = [s for s, g in zip(settings, groups, strict=True) if g == group]
        keys = sorted({k for s in members for k in s})
        out[group] = [
            k for k in keys if len({_short(s[k]) for s in members if s.get(k) is not None}) > 1
        ]
    return out


def _listed(setting: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k}={_short(setting[k])}" for k in keys if setting.get(k) is not None) or "–"


def dataset_dir(run_dir: Path, run_meta: dict[str, Any], data_dir: str | Path | None) -> Path:
    """``data_dir`` when given, else the dataset directory run.json records (as written,
    or relative to the run or to its runs folder's parent)."""
    if data_dir is not None:
        path = Path(data_dir)
        if not path.is_dir():
            raise FinpodError(f"dataset directory not found: {path}", "check --data")
        return path
    recorded = (run_meta.get("dataset") or {}).get("path")
    if not recorded:
        raise FinpodError("run.json records no dataset path", "pass --data DIR")
    for path in (Path(recorded), run_dir / recorded, run_dir.parent.parent / recorded):
        if path.is_dir():
            return path
    raise FinpodError(f"the run's dataset {recorded} is not on disk", "pass --data DIR")


def validation_bars(manifest: dict[str, Any]) -> int | None:
    """Per-bar returns of the dataset's validation split (None if the manifest lacks it)."""
    split = (manifest.get("splits") or {}).get("validation") or {}
    try:
        return int(split["stop_index"]) - int(split["start_index"]) - 1
    except (KeyError, TypeError, ValueError):
        return None


def checkpoint_evaluations(curves: pd.DataFrame | None, score_name: str) -> int:
    """Validation evaluations in ``metrics.csv`` (single-agent runs: one per checkpoint)."""
    if curves is None or not {"split", "metric"} <= set(curves.columns):
        return 0
    rows = curves[(curves["split"] == "validation") & (curves["metric"] == score_name)]
    return int(len(rows))
