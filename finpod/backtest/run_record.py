"""What a backtest reads of a run directory besides its agents.

The leaderboard as a table, the learning curves, the validation Sharpe ratios of the
candidates and how many validation evaluations a single-agent run made (the selection
statistics' inputs), where the run's dataset is, and the files the run read outside its
directory, checked against their recorded hashes (:class:`RunInputs`). The agents and
their recorded env settings: :mod:`finpod.backtest.agents`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from finpod.data.market import MarketData
from finpod.env.config import EQUAL_WEIGHT, EnvConfig
from finpod.errors import FinpodError
from finpod.runs import METRICS_FILE, Leaderboard, metrics_frame
from finpod.runs.inputs import changed, copy_of, recorded

#: The option that backtests a run on its own copies of the files it read.
USE_RECORDED = "--use-recorded-inputs"


def trial_sharpes(leaderboard: Leaderboard, learning_curves: pd.DataFrame | None) -> list[float]:
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
    if leaderboard.score_name == "sharpe":
        return [float(e.score) for e in leaderboard.entries if math.isfinite(e.score)]
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


def leaderboard_frame(leaderboard: Leaderboard) -> pd.DataFrame:
    """One row per entry. ``hparams (differing)`` lists only the hyperparameters whose shown
    values differ between entries of the same algorithm (the algorithm column already
    tells PPO from A2C); ``execution (differing)`` the execution controls a tournament
    searched (the entry's ``env``) whose shown values differ between entries."""
    entries = leaderboard.entries
    params = [e.hparams or {} for e in entries]
    algorithms = [e.algorithm for e in entries]
    controls = [e.env or {} for e in entries]
    execution = _differing(controls, [None] * len(entries))
    hparams = _differing(params, algorithms)
    rows = []
    for rank, (e, p, env) in enumerate(zip(entries, params, controls, strict=True), start=1):
        row = {
            "rank": rank,
            "pod_id": e.pod_id,
            "algorithm": e.algorithm,
            "score": e.score if math.isfinite(e.score) else None,
            "env_steps": e.env_steps or (e.history or [{}])[-1].get("env_steps"),
            "parent": e.parent or "",
            "hparams (differing)": _listed(p, hparams.get(e.algorithm, [])),
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


@dataclass(frozen=True)
class RunInputs:
    """The reference weights file and the benchmark levels a backtest reads, as the run
    read them: the file on disk when its hash is the recorded one, the run's copy when
    asked (``use_recorded``). Build it with :meth:`check`."""

    reference: Path | None
    """The reference file to read (None: the run recorded none; the config's is read)."""
    benchmark: Path | None
    """The run's copy of the benchmark levels to read instead of the dataset's (None: the
    dataset's)."""
    backtest_rows: tuple[int, int]
    """The backtest split's rows on the dataset's time line."""
    note: str | None
    """One line for a run that recorded no input files (written before runs kept them)."""

    @classmethod
    def check(
        cls,
        run_dir: Path,
        run_meta: dict[str, Any],
        dataset: Path,
        manifest: dict[str, Any],
        *,
        use_recorded: bool = False,
    ) -> RunInputs:
        """Compare each file the run read with its recorded SHA-256; a changed or missing
        one is one :class:`FinpodError` line naming it and what to do, unless
        ``use_recorded`` (then the run's copy is read). The benchmark is checked when the
        dataset is the run's own (same content hash): another dataset has its own levels."""
        split = (manifest.get("splits") or {}).get("backtest") or {}
        rows = (int(split.get("start_index", 0)), int(split.get("stop_index", 0)))
        inputs = recorded(run_meta)
        if inputs is None:
            note = (
                f"run {run_dir.name} recorded no copy of the files it read (it predates "
                "input records): its reference file and benchmark are read as they are now"
            )
            return cls(None, None, rows, note)
        reference = _checked(run_dir, "reference", inputs.get("reference"), None, use_recorded)
        benchmark = None
        bench_file = (manifest.get("files") or {}).get("benchmark")
        same_data = manifest.get("hash") == (run_meta.get("dataset") or {}).get("hash")
        if inputs.get("benchmark") and bench_file and same_data:
            current = Path(dataset) / str(bench_file)
            path = _checked(run_dir, "benchmark", inputs["benchmark"], current, use_recorded)
            benchmark = path if path != current else None
        return cls(reference, benchmark, rows, None)

    def env(self, config: EnvConfig) -> EnvConfig:
        """``config`` reading the checked reference file (or the run's copy)."""
        if self.reference is None or config.reference == EQUAL_WEIGHT:
            return config
        return replace(config, reference=str(self.reference))

    def market(self, market: MarketData) -> MarketData:
        """``market`` with the run's copy of the benchmark levels, when that is read."""
        if self.benchmark is None or market.benchmark is None:
            return market
        r0, r1 = self.backtest_rows
        levels = pq.read_table(self.benchmark).column("close").to_numpy()[r0:r1]
        bench = pd.Series(levels, index=market.benchmark.index, name=market.benchmark.name)
        return replace(market, benchmark=bench)


def _checked(
    run_dir: Path,
    role: str,
    entry: dict[str, str] | None,
    current: Path | None,
    use_recorded: bool,
) -> Path | None:
    """The file to read for ``role``: the run's copy (``use_recorded``), else the file on
    disk once its hash is the recorded one."""
    if entry is None:
        return None
    if use_recorded:
        return copy_of(run_dir, role, entry)
    path = current if current is not None else Path(entry["path"])
    problem = changed(entry, path)
    if problem:
        raise FinpodError(
            f"the {role} file {path} {problem}; the backtest would not be the run's",
            f"restore it, or pass {USE_RECORDED} to read the run's copy, {entry['copy']}",
        )
    return path


def check_agent_entries(run_id: str, agent: str, count: int, entries: int) -> None:
    """Refuse an agent that averages more leaderboard entries than the run has: a
    ``top-3`` of a one-entry board would be the best entry under another name."""
    if count > entries:
        fits = "best" if entries == 1 else f"{agent.split('-')[0]}-{entries}"
        raise FinpodError(
            f"--agent {agent} averages the top {count} leaderboard entries but run {run_id} "
            f"has {entries}",
            f"use --agent {fits}",
        )


def market_regime(manifest: dict[str, Any]) -> str | None:
    """``"null"`` or ``"alpha"`` for a synthetic dataset (no planted signal / a planted
    one), None for market data."""
    if manifest.get("source") != "synthetic":
        return None
    regime = (manifest.get("source_options") or {}).get("regime")
    return str(regime) if regime else None


def _number(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value else None


def run_spend(
    run_meta: dict[str, Any], board: dict[str, Any], curves: pd.DataFrame | None
) -> dict[str, Any]:
    """What the run spent, from whatever it recorded (every key optional):

    ``env_steps`` and ``wall_s`` of the whole run (``run.json``'s ``throughput``, else the
    leaderboard's ``progress``, else the last row of ``metrics.csv``); the selected agent's
    ``selected_env_steps``, ``selected_updates`` (gradient steps) and
    ``updates_per_env_step`` (``run.json``'s ``learning``, else the best entry); for a
    tournament ``pods`` (candidates scored), ``winner_lineage_share`` (the best entry's env
    steps, ancestors included, over the run's) and ``budget`` (``run.json``'s budget record
    as written: env steps per pod, promotions, stops, children).
    """
    out: dict[str, Any] = {"kind": run_meta.get("kind")}
    throughput = run_meta.get("throughput") if isinstance(run_meta.get("throughput"), dict) else {}
    progress = board.get("progress") if isinstance(board.get("progress"), dict) else {}
    have_curves = curves is not None and not curves.empty
    for key, column in (("env_steps", "env_steps"), ("wall_s", "wall_s")):
        for source in (throughput, progress):
            value = _number(source.get(key))
            if value:
                out[key] = value
                break
        else:
            if have_curves and column in curves:
                value = _number(pd.to_numeric(curves[column], errors="coerce").max())
                if value:
                    out[key] = value
    learning = run_meta.get("learning") if isinstance(run_meta.get("learning"), dict) else {}
    entries = board.get("entries") or []
    best = entries[0] if entries and isinstance(entries[0], dict) else {}
    steps = _number(learning.get("env_steps", best.get("env_steps")))
    updates = _number(learning.get("updates", best.get("updates")))
    if steps is not None:
        out["selected_env_steps"] = steps
    if updates:
        out["selected_updates"] = updates
        if steps:
            out["updates_per_env_step"] = updates / steps
    if out["kind"] == "tournament":
        pods = _number(board.get("candidates_evaluated"))
        if pods is not None:
            out["pods"] = pods
        if steps and out.get("env_steps"):
            out["winner_lineage_share"] = min(1.0, steps / out["env_steps"])
    if isinstance(run_meta.get("budget"), dict):
        out["budget"] = run_meta["budget"]
    return out
