"""The board of a single-agent run stopped mid-training (Ctrl-C, SIGTERM).

A stopped run is a usable run: :func:`write_stopped_board` writes ``leaderboard.json``
with the best checkpoint on validation so far (the one the run's writer kept in
``checkpoints/``) and its validation history from ``metrics.csv``, and marks ``run.json``
as stopped, so ``finpod backtest`` tests that checkpoint and says the run was stopped
early, and ``finpod train --resume`` continues it (the mark is cleared when it finishes):
from ``last.safetensors``, or from the checkpoint its board names when the stop came
between the two writes (:func:`resume_checkpoint`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from finpod.errors import FinpodError
from finpod.runs.candidates import load_candidates
from finpod.runs.leaderboard import Entry, Leaderboard, checkpoint_name
from finpod.runs.rundir import RunDir


def write_stopped_board(
    run_dir: str | Path,
    pod_id: str,
    algorithm: str,
    hparams: dict[str, Any],
    score_name: str,
    env_steps: int,
    target_steps: int | None,
) -> Entry | None:
    """Write the board of a run stopped at ``env_steps`` of ``target_steps``: its best
    checkpoint so far. Returns the entry (None, and nothing written, before the first
    validation point)."""
    run = RunDir.open(Path(run_dir))
    rows = [r for r in run.metrics if r[0] == pod_id]
    history = [
        {"env_steps": r[1], "score": r[5]}
        for r in rows
        if r[3] == "validation" and r[4] == score_name
    ]
    finite = [h for h in history if math.isfinite(h["score"])]
    if not run.checkpoint(pod_id).is_file() or not finite:
        return None
    best = max(finite, key=lambda h: h["score"])
    ratio = next(
        (
            r[5]
            for r in rows
            if r[3] == "train" and r[4] == "updates_per_env_step" and r[1] == best["env_steps"]
        ),
        math.nan,
    )
    entry = Entry(
        pod_id=pod_id,
        algorithm=algorithm,
        hparams=hparams,
        score=float(best["score"]),
        checkpoint=checkpoint_name(pod_id),
        history=history,
        env_steps=int(best["env_steps"]),
        updates=round(ratio * best["env_steps"]) if math.isfinite(ratio) else 0,
    )
    candidates = max(len(load_candidates(run.path)), len(history))
    Leaderboard.single(run.path, entry, score_name, candidates)
    run.record_learning(entry)
    run.record_stopped(int(env_steps), target_steps)
    return entry


def resume_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint a run continues from: ``checkpoints/last.safetensors``, else the
    checkpoint its board names (a stop between the best checkpoint's write and the last
    one's); None when it has neither (nothing learned yet: the run starts again)."""
    run = RunDir(Path(run_dir))
    last = run.checkpoint("last")
    if last.is_file():
        return last
    try:
        entries = Leaderboard.load(run.path).entries
    except FinpodError:  # no board yet
        return None
    named = (run.path / entry.checkpoint for entry in entries)
    return next((path for path in named if path.is_file()), None)
