"""``RunRecord``: a run directory read once, typed, the same for one agent and a
tournament; a run written before the candidate record is read from its leaderboard (by
the reader alone) or refused in one line; the backtest reads validation scores from one
store."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from finpod.backtest.run_record import RunRecord, Stopped
from finpod.env import EnvConfig
from finpod.errors import FinpodError
from finpod.runs import CandidateSet, Leaderboard, load_candidates, record_candidate
from tests.backtest.fakes import FakeDataset, make_market, make_run_dir

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_run_format"


@pytest.fixture()
def runs(tmp_path: Path) -> Path:
    """A writable copy of the run-format fixture (a single agent and a tournament)."""
    shutil.copytree(FIXTURE, tmp_path / "runs")
    return tmp_path / "runs"


def _typed_values(record: RunRecord) -> dict[str, object]:
    """What the record gives, by the type each value has."""
    chosen = record.agent("selected")
    config, source = record.env_of(chosen.entries[0])
    return {
        "run_id": type(record.run_id),
        "kind": record.kind in ("agent", "tournament"),
        "selected": record.selected,
        "board": type(record.board),
        "chosen": (chosen.name, type(chosen.entries), len(chosen.entries)),
        "candidate": chosen.candidate in record.validation.scores,
        "candidates": type(record.validation.candidates),
        "scores": isinstance(record.validation.scores, Mapping)
        and {type(k) for k in record.validation.scores}
        | {type(v) for v in record.validation.scores.values()},
        "num_trials": type(record.validation.num_trials),
        "env": (type(config), source),
        "dataset": (type(record.dataset.path), type(record.dataset.hash)),
        "splits": isinstance(record.dataset.splits, Mapping),
        "strategy": isinstance(record.strategy, Mapping) and "env" in record.strategy,
        "stopped": record.stopped,
    }


def test_the_reader_gives_the_same_typed_values_for_one_agent_and_a_tournament(runs: Path):
    agent = RunRecord.read(runs / "agent-legacy")
    tournament = RunRecord.read(runs / "tournament-legacy")
    assert (agent.kind, tournament.kind) == ("agent", "tournament")
    assert _typed_values(agent) == _typed_values(tournament)
    for record in (agent, tournament):
        # Every candidate's score is the candidate record's, the board's entry included.
        recorded = load_candidates(record.path)
        assert dict(record.validation.scores) == dict(
            zip(recorded.ids, recorded.scores.tolist(), strict=True)
        )
        best = record.board.entries[0]
        assert record.score_of(best) == record.validation.scores[record.candidate_of(best)]
        assert record.validation.num_trials == len(recorded)
        assert record.validation.annual_sharpes == ()
    # A single agent's entry is its best checkpoint: "<pod>@<env steps>" in the record.
    assert agent.candidate_of(agent.board.entries[0]) == "ppo-0@32"
    assert tournament.candidate_of(tournament.board.entries[0]) == "p00000"


def test_the_env_settings_of_an_entry_are_an_env_config(runs: Path):
    record = RunRecord.read(runs / "agent-legacy")
    config, source = record.env_of(record.board.entries[0])
    assert type(config) is EnvConfig and source == "checkpoint"
    assert config.cost_rate == record.strategy["env"]["cost_rate"] == 0.002


def test_a_stopped_run_and_its_dataset_record_are_typed(runs: Path):
    run = runs / "agent-legacy"
    info = json.loads((run / "run.json").read_text())
    info["stopped"] = {"env_steps": 64, "target_steps": 1000}
    info["dataset"]["splits"] = {"backtest": "ab" * 32}
    (run / "run.json").write_text(json.dumps(info))
    record = RunRecord.read(run)
    assert record.stopped == Stopped(env_steps=64, target_steps=1000)
    assert record.dataset.hash == info["dataset"]["hash"]
    assert dict(record.dataset.splits) == {"backtest": "ab" * 32}


def test_a_run_without_a_candidate_record_is_read_from_its_leaderboard(runs: Path):
    run = runs / "agent-legacy"
    (run / "candidates.bin").unlink()
    record = RunRecord.read(run)
    validation = record.validation
    assert len(validation.candidates) == 0 and "leaderboard" in validation.source
    assert dict(validation.scores) == {"ppo-0": pytest.approx(3.0229647587850033)}
    # Its score is the Sharpe ratio: the DSR of an older run reads the annualized scores.
    inputs = validation.statistics_inputs(record.agent().candidate)
    assert inputs["selected_sharpe"] == pytest.approx(3.0229647587850033)
    assert len(inputs["fallback_sharpes"]) == 1
    assert validation.num_trials == 2  # the board counted both checkpoints


def test_a_run_that_recorded_no_env_settings_is_refused_in_one_line(tmp_path: Path):
    run = make_run_dir(tmp_path, make_market(num_bars=60))
    info = json.loads((run / "run.json").read_text())
    del info["strategy"]["env"]  # and its checkpoints and entries hold none
    (run / "run.json").write_text(json.dumps(info))
    record = RunRecord.read(run)
    with pytest.raises(FinpodError, match="recorded no env settings") as err:
        record.env_of(record.board.entries[0])
    assert "\n" not in str(err.value)


def test_a_folder_without_a_leaderboard_is_refused_in_one_line(runs: Path):
    run = runs / "tournament-legacy"
    (run / "leaderboard.json").unlink()
    with pytest.raises(FinpodError, match="does not exist") as err:
        RunRecord.read(run)
    assert "\n" not in str(err.value)


def _record_candidates(run: Path, scores: list[float]) -> CandidateSet:
    rng = np.random.default_rng(11)
    val = rng.normal(0.0, 0.01, (79, len(scores)))
    val[:, 0] += 0.003
    for j, score in enumerate(scores):
        record_candidate(run, f"pod{j:03d}", val[:, j], score=score)
    return load_candidates(run)


def test_the_backtest_reads_validation_scores_from_the_candidate_record_alone(
    tmp_path: Path, monkeypatch
):
    from finpod.backtest import run_backtest
    from finpod.backtest import selection as sel

    whole = make_market(num_bars=420, seed=5)
    splits = {
        "train": whole.slice(0, 200),
        "validation": whole.slice(200, 280),
        "backtest": whole.slice(280, 420),
    }
    (tmp_path / "dataset").mkdir()
    run = make_run_dir(tmp_path, splits["backtest"], dataset_path=str(tmp_path / "dataset"))
    manifest = {"splits": {"validation": {"start_index": 200, "stop_index": 280}}}
    FakeDataset(splits, manifest=manifest).install(monkeypatch)
    # The candidate record's scores disagree with the leaderboard's (2.0, 1.5, 1.0).
    cands = _record_candidates(run, [0.7 - 0.05 * j for j in range(14)])
    first = run_backtest(run)
    assert first.leaderboard["score"].tolist() == pytest.approx(cands.scores[:3].tolist())
    sharpes = cands.sharpes()
    assert first.statistics["selected_candidate"] == "pod000"
    assert first.statistics["selected_validation_sharpe"] == pytest.approx(sharpes[0])
    assert first.statistics["dsr"] == pytest.approx(
        sel.deflated_sharpe_ratio(cands.returns[:, 0], 14, float(np.var(sharpes, ddof=1)))
    )
    # The leaderboard's and metrics.csv's scores change; the statistics do not.
    board = Leaderboard.load(run)
    for i, entry in enumerate(board.entries):
        entry.score = 50.0 - 20.0 * i
    board.save()
    curves = (run / "metrics.csv").read_text().replace(",sharpe,", ",sharpe,9")
    (run / "metrics.csv").write_text(curves)
    second = run_backtest(run)
    assert second.statistics == first.statistics
    assert second.leaderboard["score"].tolist() == first.leaderboard["score"].tolist()
    assert second.num_trials == first.num_trials == 14


def test_paper_trading_trades_the_pod_the_run_selected(tmp_path: Path, monkeypatch):
    from finpod.paper.decide import load_run_agent

    market = make_market(num_bars=60)
    (tmp_path / "dataset").mkdir()
    run = make_run_dir(tmp_path, market, dataset_path=str(tmp_path / "dataset"))
    board = json.loads((run / "leaderboard.json").read_text())
    for i, entry in enumerate(board["entries"]):
        entry["pod_id"] = f"p{i:05d}"  # a tournament's pod ids
    board["selection"] = {"selected": "p00001", "decision": "p00001 beat the champion"}
    (run / "leaderboard.json").write_text(json.dumps(board))
    FakeDataset({}, manifest={"tickers": market.tickers}).install(monkeypatch)
    assert RunRecord.read(run).selected == "p00001"
    # Not the top entry (p00000): the one the run selected, as the backtest trades it.
    assert load_run_agent(run, "selected").pod_ids == ["p00001"]
    assert RunRecord.read(run).agent().entries[0].pod_id == "p00001"


def test_the_selected_ensemble_is_its_members_and_its_own_candidate(tmp_path: Path):
    run = make_run_dir(tmp_path, make_market(num_bars=60))
    board = json.loads((run / "leaderboard.json").read_text())
    board["ensemble"] = {"id": "ens-a", "members": ["pod001", "pod002"], "score": 2.5}
    board["selected"] = "ensemble-2"
    board["selection"] = {"selected": "ensemble-2"}
    (run / "leaderboard.json").write_text(json.dumps(board))
    record = RunRecord.read(run)
    chosen = record.agent()
    assert chosen.name == "ensemble-2" and chosen.asked_selected and chosen.ensemble_scored
    assert [e.pod_id for e in chosen.entries] == ["pod001", "pod002"]
    assert chosen.candidate == "ens-a"
    # No candidate record: the ensemble's score is the leaderboard's, read by the reader.
    assert record.validation.statistics_inputs(chosen.candidate)["selected_sharpe"] == 2.5
    # The top entries under another name are not the candidate the run scored.
    top = record.agent("ensemble-3")
    assert not top.ensemble_scored and top.candidate == "pod000"
