"""The leaderboard ensemble as a candidate of the run.

The Podracer tournament is a tournament-based *ensemble*: at the end of a run the top
``tournament.ensemble`` entries are traded together (the mean of their target weights,
:mod:`finpod.env.ensemble`) on the **validation** split, like any pod. The ensemble is then
a candidate like the others:

- its per-bar validation returns go to ``candidates.bin`` (kind ``"ensemble"``), so it is
  counted in N for the Deflated Sharpe and takes part in the PBO;
- ``leaderboard.json`` records it under ``"ensemble"`` (members, score, whether selected);
- the run *selects* it when its validation score beats the best single entry's, and
  ``finpod backtest RUN`` (``--agent selected``, the default) then trades it.

Only the validation split is read here. The candidate id names its members
(``"ensemble[p00012,p00031,p00007]"``): a resumed run whose top entries did not change
records nothing new, one whose board changed records a new candidate (a new trial).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data import load_split
from finpod.data.market import MarketData
from finpod.env.ensemble import Member, score_ensemble
from finpod.errors import FinpodError
from finpod.runs import Entry, Leaderboard, RunDir, load_candidates, read_run_info, record_candidate
from finpod.scores import scored_series
from finpod.tournament.champion import one_score


def ensemble_id(pod_ids: list[str]) -> str:
    """Candidate id of the ensemble of ``pod_ids`` (best first)."""
    return "ensemble[" + ",".join(pod_ids) + "]"


def ensemble_members(board: Leaderboard, size: int, min_scores: int = 1) -> list[Entry]:
    """The ensemble's members: the top ``size`` *complete* entries. A segment cut short by
    the budget's end or the time cap is never chosen on one score, and with
    ``min_scores`` = 2 (``mode = "asha"``, as for the challengers:
    :func:`~finpod.tournament.champion.line_challengers`) neither is a line that scored
    one segment (:func:`~finpod.tournament.champion.one_score`)."""
    entries = list(board.entries)
    members = [
        e for e in entries if not e.partial and not (min_scores > 1 and one_score(e, entries))
    ]
    return members[: max(0, int(size))]


def score_leaderboard_ensemble(
    run: RunDir,
    board: Leaderboard,
    size: int,
    validation: MarketData | str | Path,
    device: torch.device | str = "cpu",
    min_scores: int = 1,
) -> dict[str, Any] | None:
    """Score the ensemble of the top ``size`` entries on the validation split, record it as
    a candidate and on the board (``board.ensemble``); returns that record, or None when
    there is no ensemble to score (``size`` < 2 or fewer than 2 entries);
    ``min_scores``: :func:`ensemble_members`.

    A member trading shares or short (which cannot be averaged as target weights), or an
    ensemble whose validation numbers are not finite, is logged and not recorded: a
    non-finite number never becomes a score.
    """
    chosen = ensemble_members(board, size, min_scores)
    if int(size) < 2 or len(chosen) < 2:
        board.ensemble = None
        return None
    pod_ids = [e.pod_id for e in chosen]
    cid = ensemble_id(pod_ids)
    run_meta = read_run_info(run.path)
    device = torch.device(device)
    try:
        agents = load_agents(run.path, chosen, device)
        members = [
            Member(ensemble_policy([agent]), recorded_env_config(run.path, run_meta, e)[0], pid)
            for agent, e, pid in zip(agents, chosen, pod_ids, strict=True)
        ]
        market = (
            validation
            if isinstance(validation, MarketData)
            else load_split(Path(validation), "validation", device=device)
        )
        score, out = score_ensemble(members, market, board.score_name, device=device)
    except FinpodError as err:
        run.log(f"ensemble of {', '.join(pod_ids)} not scored: {err}")
        board.ensemble = None
        return None
    # The series the score ranks (active returns for an active score), as pods record.
    returns = scored_series(out.returns, out.reference_returns, board.score_name).to_numpy(
        dtype="float64"
    )
    if not math.isfinite(float(score)) or not bool((returns == returns).all()):
        run.log(f"ensemble of {', '.join(pod_ids)} not scored: non-finite validation numbers")
        board.ensemble = None
        return None
    before = board.candidates_evaluated
    known = _recorded_ids(run.path)
    record_candidate(run.path, cid, returns, score=float(score), kind="ensemble")
    if cid not in known:
        board.candidates_evaluated = before + 1
    best = chosen[0]
    record = {
        "id": cid,
        "members": pod_ids,
        "score": float(score),
        "best_single": best.pod_id,
        "best_single_score": float(best.score),
        # Decided by the final selection's paired test (finpod.tournament.champion),
        # never by the higher of two scores.
        "selected": False,
        "turnover": float(out.turnover.iloc[1:].mean()) if len(out.turnover) > 1 else 0.0,
    }
    board.ensemble = record
    board.save()
    run.log(
        f"ensemble of the top {len(pod_ids)} ({', '.join(pod_ids)}): validation "
        f"{board.score_name} {score:.4f} vs best single {best.pod_id} {best.score:.4f}"
    )
    return record


def _recorded_ids(run_dir: Path) -> set[str]:
    return set(load_candidates(run_dir).ids)
