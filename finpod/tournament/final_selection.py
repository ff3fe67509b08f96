"""The end of a tournament: score the ensemble on validation, then choose the agent the
run hands over (:mod:`finpod.tournament.champion`) and record the decision."""

from __future__ import annotations

from typing import Any

from finpod.data.market import MarketData
from finpod.runs import Leaderboard, RunDir, load_candidates
from finpod.tournament.champion import select
from finpod.tournament.ensemble_candidate import ensemble_members, score_leaderboard_ensemble
from finpod.tournament.settings import TournamentConfig
from finpod.tournament.setup import Event
from finpod.tournament.winner import record_winner


def select_final(
    run: RunDir,
    board: Leaderboard,
    config: TournamentConfig,
    validation: MarketData,
    on_event: Event | None = None,
    yielded: str | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Score the ensemble of the top complete entries (``tournament.ensemble`` ≥ 2), then
    run the champion's paired tests; returns (ensemble record, selection record). Both go
    to ``leaderboard.json``; the selection also to ``run.json``. When a challenger replaced
    the champion, the run also gets ``winner.toml`` (:mod:`finpod.tournament.winner`). ``validation``: the
    validation split (the driver's copy in the object store: the dataset's files are not
    read again); ``yielded``: why the champion line yielded its slot mid-run, when it did
    (said after the decision)."""
    ensemble = None
    # Under "asha" lines go on segment by segment: a line with one score stopped after its
    # first, the noisiest score a run has (elsewhere a pod of epochs = 1 has one by design).
    min_scores = 2 if config.mode == "asha" else 1
    members = ensemble_members(board, config.ensemble, min_scores)
    if config.ensemble >= 2 and len(members) >= 2:
        if on_event is not None:
            on_event("ensemble_start", {"members": len(members)})
        ensemble = score_leaderboard_ensemble(
            run, board, config.ensemble, validation, "cpu", min_scores
        )
        if on_event is not None and ensemble is not None:
            on_event("ensemble", {"record": ensemble})
    if not len(board):
        return ensemble, None
    bars_per_year = validation.annualization
    record = select(
        board,
        load_candidates(run.path),
        alpha=config.challenge_alpha,
        bars_per_year=float(bars_per_year),
        ensemble_id=None if ensemble is None else ensemble["id"],
        ensemble_name=None if ensemble is None else f"ensemble-{len(ensemble['members'])}",
        min_scores=min_scores,
    )
    if record is None:
        return ensemble, None
    if yielded:
        record["champion_yielded"] = yielded
        record["decision"] += f"; the champion line {yielded}"
    if ensemble is not None:
        ensemble["selected"] = bool((record.get("ensemble") or {}).get("selected"))
        board.ensemble = ensemble
    lost = record_winner(run, board, record)
    if lost:
        record["settings_note"] = lost
    board.selection = record
    board.save()
    run.record_selection(record)
    run.log(f"selection: {record['decision']} → {record['selected']}")
    if lost:
        run.log(f"selection: {lost}")
    if on_event is not None:
        on_event("selection", {"record": record})
    return ensemble, record
