"""The top-K leaderboard of a run, persisted atomically after every change.

A tournament keeps its best ``top_k`` pods; a single-agent run's board holds its one
best-on-validation checkpoint (``top_k`` = 1, see :meth:`Leaderboard.single`).

``leaderboard.json`` (read by the backtester)::

    {"score_name": "sharpe", "top_k": 10, "candidates_evaluated": 37,
     "entries": [{"pod_id", "algorithm", "hparams", "score", "checkpoint", "lineage",
                  "history": [{"env_steps", "score"}, ...], "env_steps", "parent"}, ...],
     "progress": {"next_pod": 41, "env_steps": 1840000, "wall_s": 612.4,
                  "pods_failed": 1, "generation": 0}}

Entries are sorted best first; ``checkpoint`` is relative to the run directory.
``candidates_evaluated`` counts every pod scored on validation, whether or not it made the
board (the Deflated Sharpe of the winner needs it). ``progress`` is what ``--resume``
continues from.

Crash safety: a qualifying pod's checkpoint file is written (atomically) *before* the JSON
that names it, and an evicted entry's file is deleted only *after* the JSON without it is
on disk, so at every instant each entry on disk points at a complete checkpoint.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from finpod.atomic import atomic_write, atomic_write_json
from finpod.errors import FinpodError

LEADERBOARD_FILE = "leaderboard.json"
CHECKPOINT_DIR = "checkpoints"


@dataclass
class Entry:
    """One pod on the leaderboard."""

    pod_id: str
    """Unique id within the run (``"p00042"``)."""
    algorithm: str
    """Registry name of the agent's algorithm."""
    hparams: dict[str, Any]
    """The hyperparameters the pod trained with."""
    score: float
    """Validation score of the checkpoint (higher is better)."""
    checkpoint: str
    """Checkpoint path relative to the run directory."""
    lineage: list[str] = field(default_factory=list)
    """Ancestors' pod ids, oldest first (empty for a pod trained from scratch)."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Validation scores along the lineage: ``[{"env_steps", "score"}, ...]``."""
    env_steps: int = 0
    """Env steps the agent has learned from, ancestors included."""
    parent: str | None = None
    """Direct parent's pod id, if any."""
    env: dict[str, Any] = field(default_factory=dict)
    """The pod's searched execution controls over the run's ``[env]`` (``{}``: the run's
    env as is). The backtest replays them; children inherit and perturb them."""
    updates: int = 0
    """Gradient steps the agent's weights have taken, ancestors included (0: not recorded)."""
    champion: bool = False
    """A checkpoint of the run's champion line (``base_pod = true``): the strategy's own
    settings, trained without being cut. The board keeps every checkpoint of the line
    whatever its rank."""
    partial: bool = False
    """Its segment was cut short (the budget's end or the wall-time cap stopped it before
    its env steps or validation points were done): never selected on one score."""

    @property
    def updates_per_env_step(self) -> float | None:
        """Gradient steps per env step behind the checkpoint (None when not recorded): a
        policy trained on millions of env steps with almost no gradient steps has not
        learned, however many steps it saw."""
        if self.updates <= 0 or self.env_steps <= 0:
            return None
        return self.updates / self.env_steps

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["updates_per_env_step"] = self.updates_per_env_step
        out["score"] = _finite_or_none(self.score)
        out["history"] = [
            {"env_steps": int(h["env_steps"]), "score": _finite_or_none(h["score"])}
            for h in self.history
        ]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Entry:
        known = {f: obj[f] for f in cls.__dataclass_fields__ if f in obj}
        known["score"] = _nan_if_none(known.get("score"))
        known["history"] = [
            {"env_steps": int(h["env_steps"]), "score": _nan_if_none(h.get("score"))}
            for h in known.get("history", [])
        ]
        return cls(**known)


@dataclass
class Progress:
    """Counters a resumed run continues from."""

    next_pod: int = 0
    """Index of the next pod id to hand out."""
    env_steps: int = 0
    """Env steps trained by all evaluated pods of the run."""
    fill_steps: int = 0
    """Of ``env_steps``, those explorers trained beyond a step budget while the champion
    finished its share (``tournament.fill``): not counted against the budget."""
    fill_pods: int = 0
    """Pods that trained those steps."""
    wall_s: float = 0.0
    """Wall seconds the run has been training, summed over sessions."""
    pods_failed: int = 0
    """Pods that crashed or raised (not counted as candidates)."""
    legacy: dict[str, Any] = field(default_factory=dict, compare=False)
    """Scheduler state an older run kept here (``allocation``, ``generation``), read once
    by its scheduler; never written back (schedulers save ``scheduler.json``)."""


class Leaderboard:
    """Top-K pods by validation score, mirrored to ``<run_dir>/leaderboard.json``."""

    def __init__(self, run_dir: Path, top_k: int, score_name: str) -> None:
        self.run_dir = Path(run_dir)
        self.top_k = int(top_k)
        self.score_name = score_name
        self.entries: list[Entry] = []
        self.candidates_evaluated = 0
        self.progress = Progress()
        self.ensemble: dict[str, Any] | None = None
        """The leaderboard ensemble scored on validation at the end of a tournament
        (``{"id", "members", "score", "best_single", "best_single_score", "selected",
        "turnover"}``), or None."""
        self.selection: dict[str, Any] | None = None
        """The final selection of a tournament (:mod:`finpod.tournament.champion`): the
        champion, every challenger's paired test and the decision; its ``"selected"`` is
        the agent name the backtest trades (a pod id, or ``"ensemble-K"``)."""

    # ----- reading ----------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.run_dir / LEADERBOARD_FILE

    def __len__(self) -> int:
        return len(self.entries)

    def best(self) -> Entry | None:
        return self.entries[0] if self.entries else None

    def selected(self) -> str:
        """What the run selected on validation: ``"ensemble-K"`` when the leaderboard
        ensemble of K members beat the best entry, else ``"best"``."""
        if self.selection and self.selection.get("selected"):
            return str(self.selection["selected"])
        if self.ensemble and self.ensemble.get("selected"):
            return f"ensemble-{len(self.ensemble.get('members') or [])}"
        return "best"

    def get(self, pod_id: str) -> Entry | None:
        return next((e for e in self.entries if e.pod_id == pod_id), None)

    def checkpoint_path(self, entry: Entry) -> Path:
        return self.run_dir / entry.checkpoint

    def qualifies(self, score: float) -> bool:
        """Would a pod with ``score`` enter the board? (NaN never does.)"""
        if not math.isfinite(score):
            return False
        return len(self.entries) < self.top_k or score > self.entries[-1].score

    def sample_parent(self, rng: np.random.Generator) -> Entry:
        """An entry drawn with probability ∝ (K − rank): the best most often, none never."""
        if not self.entries:
            raise ValueError("the leaderboard is empty")
        n = len(self.entries)
        weights = np.arange(n, 0, -1, dtype=float)
        return self.entries[int(rng.choice(n, p=weights / weights.sum()))]

    # ----- changing ---------------------------------------------------------------------
    def record(self, entry: Entry, checkpoint_bytes: bytes | Callable[[Path], None]) -> bool:
        """Count ``entry`` as an evaluated candidate and insert it if it qualifies.

        ``checkpoint_bytes`` (the safetensors file's bytes, or a function writing it to a
        path) is written to ``entry.checkpoint`` only when the pod makes the board.
        Returns whether it did. The JSON is rewritten either way.
        """
        self.candidates_evaluated += 1
        inserted = self.qualifies(entry.score) or self.qualifies_entry(entry)
        evicted: list[Entry] = []
        if inserted:
            target = self.run_dir / entry.checkpoint
            if callable(checkpoint_bytes):
                atomic_write(target, checkpoint_bytes)
            else:
                data = checkpoint_bytes
                atomic_write(target, lambda p: p.write_bytes(data))
            self.entries.append(entry)
            # Stable sort: among equal scores the earlier pod keeps its rank.
            self.entries.sort(key=lambda e: -e.score)
            keep = self._kept(self.entries)
            evicted = [e for e in self.entries if e.pod_id not in keep]
            self.entries = [e for e in self.entries if e.pod_id in keep]
        self.save()
        for gone in evicted:
            (self.run_dir / gone.checkpoint).unlink(missing_ok=True)
        return inserted and entry in self.entries

    def qualifies_entry(self, entry: Entry) -> bool:
        """Would ``entry`` stay on the board (:meth:`qualifies`, or it is the champion
        line's newest or best checkpoint)?"""
        if not math.isfinite(entry.score):
            return False
        return entry.pod_id in self._kept([*self.entries, entry])

    def _kept(self, entries: list[Entry]) -> set[str]:
        """Ids the board keeps of ``entries`` (best first): the top ``top_k``, plus every
        checkpoint of the champion line (its next segment continues the newest; the final
        selection picks among them by a smoothed score, not by rank)."""
        keep = {e.pod_id for e in entries[: self.top_k]}
        keep |= {e.pod_id for e in entries if e.champion}
        return keep

    def save(self) -> None:
        """Write ``leaderboard.json`` atomically."""
        atomic_write_json(self.path, self.to_json())

    def to_json(self) -> dict[str, Any]:
        out = {
            "score_name": self.score_name,
            "top_k": self.top_k,
            "candidates_evaluated": self.candidates_evaluated,
            "entries": [e.to_json() for e in self.entries],
            "progress": {k: v for k, v in asdict(self.progress).items() if k != "legacy"},
        }
        if self.ensemble is not None:
            out["ensemble"] = dict(self.ensemble)
        if self.selection is not None:
            out["selection"] = dict(self.selection)
        if self.ensemble is not None or self.selection is not None:
            out["selected"] = self.selected()
        return out

    @classmethod
    def single(
        cls, run_dir: Path, entry: Entry, score_name: str, candidates_evaluated: int
    ) -> Leaderboard:
        """The board of a single-agent run: ``entry`` (whose checkpoint is already written)
        chosen among ``candidates_evaluated`` validation checkpoints; saved."""
        board = cls(Path(run_dir), 1, score_name)
        board.entries = [entry]
        board.candidates_evaluated = int(candidates_evaluated)
        board.save()
        return board

    # ----- resuming ---------------------------------------------------------------------
    @classmethod
    def load(cls, run_dir: Path) -> Leaderboard:
        """Read ``<run_dir>/leaderboard.json`` (FinpodError if missing or unreadable)."""
        path = Path(run_dir) / LEADERBOARD_FILE
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
            entries = [Entry.from_json(e) for e in obj["entries"]]
            # A single-agent run's board (before it recorded top_k) holds its one entry.
            top_k = int(obj.get("top_k", max(1, len(entries))))
            board = cls(Path(run_dir), top_k, str(obj["score_name"]))
            board.candidates_evaluated = int(obj.get("candidates_evaluated", len(entries)))
            board.entries = entries
            saved = dict(obj.get("progress", {}))
            legacy = {k: saved.pop(k) for k in ("allocation", "generation") if k in saved}
            board.progress = Progress(**saved, legacy=legacy)
            ensemble = obj.get("ensemble")
            board.ensemble = dict(ensemble) if isinstance(ensemble, dict) else None
            selection = obj.get("selection")
            board.selection = dict(selection) if isinstance(selection, dict) else None
        except FileNotFoundError as err:
            raise FinpodError(
                f"{path} does not exist", "is this a finpod tournament run directory?"
            ) from err
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise FinpodError(
                f"{path} is unreadable: {err}", "restore it or start a new run"
            ) from err
        board.entries.sort(key=lambda e: -e.score)
        return board

    def drop_missing_checkpoints(self, verify: Callable[[Path], None] | None = None) -> list[str]:
        """Remove entries whose checkpoint is missing or fails ``verify``; return messages."""
        problems: list[str] = []
        kept: list[Entry] = []
        for entry in self.entries:
            path = self.run_dir / entry.checkpoint
            try:
                if not path.is_file():
                    raise FinpodError(f"checkpoint {entry.checkpoint} is missing")
                if verify is not None:
                    verify(path)
                kept.append(entry)
            except FinpodError as err:
                problems.append(f"{entry.pod_id}: {err}")
        if problems:
            self.entries = kept
            self.save()
        return problems

    def remove_orphan_checkpoints(self) -> list[Path]:
        """Delete checkpoint files no entry names (left by a run killed between two writes)."""
        named = {(self.run_dir / e.checkpoint).resolve() for e in self.entries}
        removed = []
        ckpt_dir = self.run_dir / CHECKPOINT_DIR
        if ckpt_dir.is_dir():
            for path in ckpt_dir.iterdir():
                if path.is_file() and path.resolve() not in named:
                    path.unlink(missing_ok=True)
                    removed.append(path)
        return removed


def checkpoint_name(pod_id: str) -> str:
    """Run-relative checkpoint path of a pod."""
    return f"{CHECKPOINT_DIR}/{pod_id}.safetensors"


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _nan_if_none(x: Any) -> float:
    return float("nan") if x is None else float(x)
