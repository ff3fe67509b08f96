"""The leaderboard ensemble is a candidate of the run: scored on validation, counted in N,
selectable, and traded by ``finpod backtest --agent ensemble``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from finpod.runs import Leaderboard, load_candidates
from finpod.tournament import run_tournament

from .conftest import write_strategy

pytestmark = pytest.mark.usefixtures("local_ray")


def _active_strategy(path: Path, extra: str = "ensemble = 3") -> Path:
    """The tiny strategy, trading active tilts around equal weight (start invested)."""
    write_strategy(path, pod_steps=256, epochs=2, top_k=4, extra=extra)
    text = path.read_text().replace(
        "[env]\n", '[env]\naction_mode = "active"\nstart = "reference"\n', 1
    )
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory, tiny_dataset) -> Path:
    tmp = tmp_path_factory.mktemp("ens")
    strategy = _active_strategy(tmp / "s.toml")
    result = run_tournament(strategy, tiny_dataset, pods=1, budget="5 pods", runs=tmp / "runs")
    assert result.summary.pods_trained == 5
    return Path(result.run_dir)


def test_the_ensemble_counts_in_n(ensemble_run):
    """Five pods and the ensemble: six candidates, in the board's count and in the record
    the Deflated Sharpe and PBO read, with the ensemble's own validation returns."""
    board = Leaderboard.load(ensemble_run)
    record = board.ensemble
    assert record is not None
    assert record["members"] == [e.pod_id for e in board.entries[:3]]
    assert board.candidates_evaluated == 6
    cands = load_candidates(ensemble_run)
    assert len(cands) == 6
    k = cands.ids.index(record["id"])
    assert cands.kinds[k] == "ensemble"
    assert cands.scores[k] == pytest.approx(record["score"])
    # Its returns are its own, not a copy of a member's.
    members = [cands.ids.index(p) for p in record["members"]]
    for m in members:
        assert not np.allclose(cands.returns[:, k], cands.returns[:, m])


def test_the_backtest_of_the_ensemble_counts_it_among_the_trials(ensemble_run, tiny_dataset):
    from finpod.backtest import run_backtest

    result = run_backtest(ensemble_run, agent="ensemble", data=tiny_dataset)
    assert result.num_trials == 6
    assert result.statistics["num_trials"] == 6
    assert "ensemble-3 (mean target weights of the top 3 entries)" in result.info["agent"]
    assert "not a validation candidate" not in result.info["agent"]
    # the DSR shown is the ensemble's own (it is a candidate of the run)
    assert "ensemble's own DSR" in result.statistics["dsr_note"]
    assert "mean action" not in result.statistics["dsr_note"]


def test_the_run_selects_the_ensemble_only_when_it_wins_the_paired_test(ensemble_run):
    """A higher validation score is not enough: the ensemble replaces the selected single
    agent only when the paired test over the validation bars says so."""
    from finpod.backtest.agents import resolve_agent

    board = json.loads((ensemble_run / "leaderboard.json").read_text())
    record, selection = board["ensemble"], board["selection"]
    test = selection["ensemble"]
    assert test["incumbent"] == selection["incumbent"] and test["challenger"] == record["id"]
    wins = test["delta"] > 0 and test["p_value"] <= selection["alpha"]
    assert record["selected"] is wins
    assert board["selected"] == ("ensemble-3" if wins else selection["incumbent"])
    assert resolve_agent(ensemble_run, "selected") == board["selected"]
    assert resolve_agent(ensemble_run, "best") == "best"
    run = json.loads((ensemble_run / "run.json").read_text())
    assert run["selection"] == selection


def test_a_winning_ensemble_is_what_selected_names(tmp_path):
    board = Leaderboard(tmp_path, 4, "sharpe")
    board.ensemble = {"id": "ensemble[a,b]", "members": ["a", "b"], "score": 2.0, "selected": True}
    board.save()
    again = Leaderboard.load(tmp_path)
    assert again.selected() == "ensemble-2"
    assert json.loads(board.path.read_text())["selected"] == "ensemble-2"
    again.ensemble["selected"] = False
    assert again.selected() == "best"


def test_a_resumed_run_with_the_same_top_entries_does_not_count_the_ensemble_twice(
    ensemble_run, tiny_dataset
):
    before = Leaderboard.load(ensemble_run)
    run_tournament(
        None, tiny_dataset, resume=ensemble_run, budget="5 pods", runs=ensemble_run.parent
    )
    after = Leaderboard.load(ensemble_run)
    assert [e.pod_id for e in after.entries] == [e.pod_id for e in before.entries]
    assert after.candidates_evaluated == before.candidates_evaluated == 6
    assert len(load_candidates(ensemble_run)) == 6


def test_no_ensemble_when_switched_off(tmp_path, tiny_dataset):
    strategy = _active_strategy(tmp_path / "s.toml", extra="ensemble = 0")
    result = run_tournament(strategy, tiny_dataset, pods=1, budget="3 pods", runs=tmp_path / "r")
    board = Leaderboard.load(result.run_dir)
    assert board.ensemble is None and board.candidates_evaluated == 3
    assert "ensemble" not in json.loads(board.path.read_text())
