"""A run directory read once, typed: :class:`RunRecord` (``RunRecord.read(run_dir)``).

The record is what the backtest and paper trading know of a run: its id and kind, the
agent it selected on validation, its board, the validation score of every candidate
(:class:`ValidationScores`, from the candidate record; a run written before that record
is read from its leaderboard and metrics here, and only here), the typed env settings of
an entry, its dataset and the bars' hashes, its strategy and whether training was
stopped. Besides it: the leaderboard as a table, where the run's dataset is, what the run
spent, and the files the run read outside its directory, checked against their recorded
hashes (:class:`RunInputs`). The agents' checkpoints: :mod:`finpod.backtest.agents`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from finpod.agents.train import checkpoint_id
from finpod.backtest.agents import (
    canonical_agent,
    is_ensemble,
    is_pod_id,
    parse_agent,
    recorded_env_config,
)
from finpod.data.market import MarketData
from finpod.env.config import EQUAL_WEIGHT, EnvConfig
from finpod.errors import FinpodError
from finpod.runs import (
    CANDIDATES_FILE,
    METRICS_FILE,
    CandidateSet,
    Entry,
    Leaderboard,
    load_candidates,
    metrics_frame,
    read_run_info,
)
from finpod.runs.inputs import changed, copy_of, recorded

#: The option that backtests a run on its own copies of the files it read.
USE_RECORDED = "--use-recorded-inputs"


def _trial_sharpes(leaderboard: Leaderboard, learning_curves: pd.DataFrame | None) -> list[float]:
    """Annualized validation Sharpe of every candidate of a run without a candidate record.

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


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _short(value: Any) -> str:
    """A hyperparameter as a person reads it: floats to 4 significant digits."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def leaderboard_frame(
    leaderboard: Leaderboard, scores: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """One row per entry. ``score``: ``scores[pod_id]`` (a run's validation scores,
    :meth:`RunRecord.entry_scores`), else the entry's. ``hparams (differing)`` lists only
    the hyperparameters whose shown values differ between entries of the same algorithm
    (the algorithm column already tells PPO from A2C); ``execution (differing)`` the
    execution controls a tournament searched (the entry's ``env``) whose shown values
    differ between entries."""
    entries = leaderboard.entries
    scores = scores or {}
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
            "score": _finite(scores.get(e.pod_id, e.score)),
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


def _checkpoint_evaluations(curves: pd.DataFrame | None, score_name: str) -> int:
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
    if steps:  # 0: not recorded
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


# ------------------------------------------------------------------------- the run record
@dataclass(frozen=True)
class Stopped:
    """Training was stopped early (SIGINT / SIGTERM): the board holds the best checkpoint
    on validation so far."""

    env_steps: int
    """Env steps trained when it stopped."""
    target_steps: int | None
    """Env steps it was to train (None: not recorded)."""


@dataclass(frozen=True)
class RunDataset:
    """The dataset a run trained and selected on, as ``run.json`` records it."""

    path: str | None
    """Its directory as recorded (absolute, or relative to the run or its runs folder's
    parent; see :meth:`RunRecord.dataset_dir`); None: not recorded."""
    hash: str | None
    """The manifest's content hash (None: not recorded)."""
    splits: Mapping[str, str]
    """SHA-256 of the bars each split reads (:mod:`finpod.backtest.split_hashes`), by split
    name; empty for a run written before runs recorded them."""


@dataclass(frozen=True)
class ValidationScores:
    """Every candidate the run's selection chose among on the validation split, and its
    score, read from one store: the candidate record. A run written before that record
    has the leaderboard's scores here instead (read by :meth:`RunRecord.read` alone)."""

    candidates: CandidateSet
    """Each candidate's per-bar validation returns and score (empty: a run written before
    the candidate record)."""
    scores: Mapping[str, float]
    """Validation score of each candidate by candidate id (a pod id, ``"<pod>@<env
    steps>"`` for a checkpoint of one agent, the scored ensemble's id)."""
    num_trials: int
    """N of the Deflated Sharpe: every candidate and checkpoint selection chose among (the
    record's count, or the count the run kept beside it when larger, e.g. a run resumed
    from before the record)."""
    annual_sharpes: tuple[float, ...]
    """Annualized validation Sharpe of each candidate, for the trial variance of a run
    without per-bar returns whose score is the Sharpe ratio; empty otherwise."""
    source: str
    """Where the scores were read, in words (the report's provenance)."""

    def annual_sharpe(self, candidate: str | None) -> float | None:
        """Annualized validation Sharpe of ``candidate`` when the scores are annualized
        Sharpe ratios (a run without per-bar returns); None otherwise."""
        if not self.annual_sharpes or candidate is None:
            return None
        return self.scores.get(candidate)

    def statistics_inputs(self, selected: str | None) -> dict[str, Any]:
        """The keyword arguments of :func:`~finpod.backtest.selection.selection_statistics`
        these scores give, ``selected`` being the candidate that was selected."""
        return {
            "candidates": self.candidates,
            "num_trials": self.num_trials,
            "selected_id": selected,
            "fallback_sharpes": list(self.annual_sharpes),
            "selected_sharpe": self.annual_sharpe(selected),
        }


@dataclass(frozen=True)
class ChosenAgent:
    """The leaderboard entries an agent name trades, and the validation candidate whose
    selection the report's Deflated Sharpe measures."""

    name: str
    """Canonical agent name (``best``, ``top-3``, ``ensemble-2``, ``p00012``)."""
    entries: tuple[Entry, ...]
    """The entries it trades, best first (the ensemble's members in the run's order)."""
    candidate: str | None
    """The candidate id of the agent: the scored ensemble's when it is that ensemble, else
    the first entry's."""
    ensemble_scored: bool
    """It is the leaderboard ensemble the run scored on validation."""
    asked_selected: bool
    """It was asked for as ``selected`` (what the run selected on validation)."""


@dataclass(frozen=True)
class RunRecord:
    """One run directory (a single agent or a tournament), read once: :meth:`read`.

    Every layer above reads a run through it; the choice between a run's stores (the
    candidate record, or for a run written before it the leaderboard and ``metrics.csv``)
    is made here and nowhere else.
    """

    path: Path
    """The run directory."""
    run_id: str
    """The run's id (``run.json``'s, else the directory's name)."""
    kind: str
    """``"agent"`` or ``"tournament"`` (a run written before ``kind``: a tournament)."""
    selected: str
    """The agent the run selected on validation: ``"best"``, ``"ensemble-K"`` or a pod id
    (:meth:`finpod.runs.Leaderboard.selected`)."""
    board: Leaderboard
    """The run's leaderboard (entries best first)."""
    validation: ValidationScores
    """Every candidate's validation score, from one store."""
    dataset: RunDataset
    """The dataset it trained on and its bars' hashes."""
    strategy: Mapping[str, Any]
    """The resolved strategy tables as ``run.json`` records them (``agent``, ``env``,
    ``train``, ...)."""
    stopped: Stopped | None
    """Set when training was stopped early."""
    curves: pd.DataFrame | None
    """``metrics.csv`` as a frame (None when missing)."""
    info: Mapping[str, Any]
    """``run.json`` as written (read-only), for what the record does not type."""

    @classmethod
    def read(cls, run_dir: str | Path) -> RunRecord:
        """Read the run at ``run_dir``: one :class:`FinpodError` line for a directory that is
        not a run finpod can read (no or unreadable ``run.json`` or leaderboard)."""
        path = Path(run_dir)
        info = read_run_info(path)
        board = Leaderboard.load(path)
        curves = metrics_frame(path / METRICS_FILE)
        kind = str(info.get("kind"))
        dataset = info.get("dataset") or {}
        stopped = info.get("stopped")
        return cls(
            path=path,
            run_id=str(info.get("run_id") or path.name),
            kind=kind,
            selected=board.selected(),
            board=board,
            validation=_validation_scores(path, kind, board, curves),
            dataset=RunDataset(
                path=dataset.get("path"),
                hash=dataset.get("hash"),
                splits=MappingProxyType(dict(dataset.get("splits") or {})),
            ),
            strategy=MappingProxyType(dict(info.get("strategy") or {})),
            stopped=Stopped(
                int(stopped.get("env_steps") or 0),
                None if stopped.get("target_steps") is None else int(stopped["target_steps"]),
            )
            if isinstance(stopped, dict)
            else None,
            curves=curves,
            info=MappingProxyType(info),
        )

    # ----- agents ------------------------------------------------------------------------
    def agent(self, name: str = "selected") -> ChosenAgent:
        """The entries agent ``name`` trades (one of
        :data:`~finpod.backtest.agents.AGENT_CHOICES`; ``"selected"`` is :attr:`selected`).

        Raises:
            FinpodError: an unknown name, an empty board, a pod id not on the board, or
                more entries asked for than the board has.
        """
        asked = name.strip().lower() == "selected"
        canonical = canonical_agent(self.selected if asked else name)
        k = parse_agent(canonical)
        entries = self.board.entries
        if not entries:
            raise FinpodError(f"the leaderboard of {self.path.name} is empty", "train longer")
        check_agent_entries(self.path.name, canonical, k, len(entries))
        members = list((self.board.ensemble or {}).get("members") or [])
        if is_pod_id(canonical):
            entry = self.board.get(canonical)
            if entry is None:
                raise FinpodError(
                    f"{canonical} is not on the leaderboard",
                    "pick a pod id that leaderboard.json lists",
                )
            chosen = [entry]
        elif (
            is_ensemble(canonical) and len(members) == k and all(self.board.get(m) for m in members)
        ):
            chosen = [e for m in members if (e := self.board.get(m)) is not None]
        else:
            chosen = entries[:k]
        scored = is_ensemble(canonical) and members == [e.pod_id for e in chosen]
        candidate = (
            str((self.board.ensemble or {}).get("id")) if scored else self.candidate_of(chosen[0])
        )
        return ChosenAgent(canonical, tuple(chosen), candidate, scored, asked)

    def candidate_of(self, entry: Entry) -> str:
        """The candidate id of ``entry``'s checkpoint in :attr:`validation`: its pod id (a
        tournament pod), else ``"<pod>@<env steps>"`` (a single agent's checkpoint)."""
        scores = self.validation.scores
        if entry.pod_id not in scores and checkpoint_id(entry.pod_id, entry.env_steps) in scores:
            return checkpoint_id(entry.pod_id, entry.env_steps)
        return entry.pod_id

    def score_of(self, entry: Entry) -> float:
        """``entry``'s validation score as :attr:`validation` holds it (an entry the
        candidate record lacks, trained before the run kept one: the entry's own)."""
        return float(self.validation.scores.get(self.candidate_of(entry), entry.score))

    def entry_scores(self) -> dict[str, float]:
        """Each board entry's validation score by pod id (:meth:`score_of`): the
        leaderboard table's ``score`` column (:func:`leaderboard_frame`)."""
        return {e.pod_id: self.score_of(e) for e in self.board.entries}

    def env_of(self, entry: Entry) -> tuple[EnvConfig, str]:
        """The typed env settings ``entry`` was trained and scored with, and where they
        were read (:func:`~finpod.backtest.agents.recorded_env_config`): one
        :class:`FinpodError` line for a run that recorded none."""
        return recorded_env_config(self.path, self.info, entry)

    # ----- its dataset ---------------------------------------------------------------------
    def dataset_dir(self, data_dir: str | Path | None = None) -> Path:
        """``data_dir`` when given, else the run's dataset directory (:func:`dataset_dir`)."""
        return dataset_dir(self.path, self.info, data_dir)


def _validation_scores(
    path: Path, kind: str, board: Leaderboard, curves: pd.DataFrame | None
) -> ValidationScores:
    """The validation scores of a run: the candidate record's; a run written before it
    (no record) has its leaderboard's, with ``metrics.csv``'s last validation Sharpe of
    each pod for the trial variance."""
    candidates = load_candidates(path)
    # N: a single agent's board counts its checkpoints; an older one counted only entries,
    # so its validation evaluations in metrics.csv count too.
    counted = int(board.candidates_evaluated or len(board.entries))
    if kind == "agent":
        counted = max(counted, _checkpoint_evaluations(curves, board.score_name))
    if len(candidates):
        return ValidationScores(
            candidates=candidates,
            scores=MappingProxyType(
                dict(zip(candidates.ids, map(float, candidates.scores), strict=True))
            ),
            num_trials=max(len(candidates), counted),
            annual_sharpes=(),
            source=f"candidate record ({CANDIDATES_FILE})",
        )
    scores = {e.pod_id: float(e.score) for e in board.entries}
    ensemble = board.ensemble or {}
    if ensemble.get("id") is not None and ensemble.get("score") is not None:
        scores[str(ensemble["id"])] = float(ensemble["score"])
    sharpes = _trial_sharpes(board, curves) if board.score_name == "sharpe" else []
    return ValidationScores(
        candidates=candidates,
        scores=MappingProxyType(scores),
        num_trials=counted,
        annual_sharpes=tuple(sharpes),
        source="leaderboard (a run written before the candidate record)",
    )
