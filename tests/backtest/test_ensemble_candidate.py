"""The leaderboard ensemble is scored by the board's own score.

Tested through its caller (:func:`finpod.tournament.ensemble_candidate.score_leaderboard_ensemble`)
on a market where the validation Sharpe and the annual return rank the ensemble and the
best single entry in opposite orders: scored by any other score than the board's, the
record and the selection come out different.
"""

from __future__ import annotations

import json

import pytest
import torch

from finpod.agents import load_checkpoint, save_checkpoint
from finpod.backtest.agents import ensemble_policy
from finpod.env import EnvConfig, rollout, score
from finpod.env.ensemble import Member, score_ensemble
from finpod.runs import Leaderboard, RunDir, load_candidates
from finpod.tournament.ensemble_candidate import score_leaderboard_ensemble

from .fakes import FakeDataset, make_market, make_run_dir

ENV = {"action_mode": "weights", "cost_rate": 0.001}
#: Seed of a market on which the ensemble of the two entries beats the best of them on
#: validation Sharpe and loses to it on annual return.
FLIPPING_SEED = 3


def _active(path, bias: float):
    """An untrained policy holds ~0; make its actions swing with the obs (own bias)."""
    agent = load_checkpoint(path)
    weights = agent.weights()
    last = max(int(k.split(".")[2]) for k in weights if k.startswith("actor.mean."))
    with torch.no_grad():
        weights[f"actor.mean.{last}.weight"].mul_(300.0)
        weights[f"actor.mean.{last}.bias"].fill_(bias)
    save_checkpoint(agent, path)
    return load_checkpoint(path)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A run of two entries whose board records their true validation Sharpe."""
    valid = make_market(num_bars=120, seed=FLIPPING_SEED, late_listing=False, split="validation")
    (tmp_path / "dataset").mkdir()
    path = make_run_dir(tmp_path, valid, num_entries=2, env=ENV)
    agents = [
        _active(path / "checkpoints" / f"pod{i:03d}.safetensors", bias)
        for i, bias in enumerate((0.3, -0.2))
    ]
    config = EnvConfig.from_dict(ENV)
    singles = []
    for agent in agents:
        out = rollout(lambda obs, a=agent: a.act(obs, deterministic=True), valid, config)
        singles.append({name: score(out, name) for name in ("sharpe", "return")})
    board = json.loads((path / "leaderboard.json").read_text())
    for entry, single in zip(board["entries"], singles, strict=True):
        entry["score"] = single["sharpe"]
    (path / "leaderboard.json").write_text(json.dumps(board))
    FakeDataset({"validation": valid}).install(monkeypatch)
    members = [Member(ensemble_policy([a]), config, f"pod{i:03d}") for i, a in enumerate(agents)]
    _, out = score_ensemble(members, valid, "sharpe")
    ensemble = {name: score(out, name) for name in ("sharpe", "return")}
    return path, tmp_path / "dataset", singles, ensemble


def test_the_ensemble_is_scored_by_the_boards_score_and_not_selected_on_it(run):
    path, dataset, singles, ensemble = run
    best = max(singles, key=lambda s: s["sharpe"])
    # The market ranks differently by the two scores: the test can tell them apart.
    assert ensemble["sharpe"] > best["sharpe"] and ensemble["return"] < best["return"]
    board = Leaderboard.load(path)
    assert board.score_name == "sharpe"
    record = score_leaderboard_ensemble(RunDir(path), board, 2, dataset)
    assert record is not None
    assert record["score"] == pytest.approx(ensemble["sharpe"], rel=1e-9)
    # A higher score alone selects nothing: the final selection's paired test decides.
    assert record["selected"] is False
    assert Leaderboard.load(path).selected() == "best"
    cands = load_candidates(path)
    assert cands.scores[cands.ids.index(record["id"])] == pytest.approx(ensemble["sharpe"])


@pytest.mark.parametrize(("mode", "scored"), [("asha", False), ("async", True)])
def test_under_asha_a_line_of_one_score_joins_no_ensemble(run, mode, scored):
    """Both entries scored once. Under ``mode = "asha"`` lines go on segment by segment,
    so a line of one score stopped after its first and is no ensemble member (nor a
    challenger); under ``"async"`` a pod of ``epochs = 1`` has one score by design."""
    from finpod.data import load_split
    from finpod.tournament.final_selection import select_final
    from finpod.tournament.settings import TournamentConfig

    path, dataset, _, _ = run
    board = Leaderboard.load(path)
    assert all(len(e.history) == 1 for e in board.entries)
    config = TournamentConfig(mode=mode, ensemble=2)
    ensemble, record = select_final(RunDir(path), board, config, load_split(dataset, "validation"))
    assert (ensemble is not None) is scored
    assert record is not None and record["selected"] == board.entries[0].pod_id
