"""A segment cut short (the budget's end, the wall-time cap) is marked as such, and is never
an ensemble member or a challenger on one score."""

from __future__ import annotations

from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.tournament.ensemble_candidate import ensemble_members
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod_results import PodResult
from finpod.tournament.updater import entry_of


def _spec(epochs: int = 2) -> PodSpec:
    return PodSpec(
        pod_id="p00001", algorithm="ppo", hparams={}, seed=0, steps=1000, epochs=epochs,
        num_envs=4, num_learners=1,
    )  # fmt: skip


def _result(steps_done: int, epochs_done: int) -> PodResult:
    return PodResult(
        pod_id="p00001", algorithm="ppo", hparams={}, score=1.0,
        history=[{"env_steps": steps_done, "score": 1.0}], env_steps=steps_done,
        steps_done=steps_done, checkpoint=b"", epochs_done=epochs_done,
    )  # fmt: skip


def test_a_segment_that_trained_fewer_steps_than_a_segment_is_partial():
    assert entry_of(_result(1000, 2), _spec(), segment_steps=1000).partial is False
    assert entry_of(_result(400, 2), _spec(), segment_steps=1000).partial is True


def test_a_segment_that_reached_fewer_validation_points_is_partial():
    assert entry_of(_result(1000, 1), _spec(epochs=2), segment_steps=1000).partial is True


def test_the_ensemble_takes_complete_entries_only(tmp_path):
    board = Leaderboard(tmp_path, 10, "information_ratio")
    board.entries = [
        Entry("p00009", "ppo", {}, 9.0, "c9", partial=True),
        Entry("p00003", "ppo", {}, 5.0, "c3"),
        Entry("p00004", "ppo", {}, 4.0, "c4"),
        Entry("p00005", "ppo", {}, 3.0, "c5"),
    ]
    assert [e.pod_id for e in ensemble_members(board, 2)] == ["p00003", "p00004"]
