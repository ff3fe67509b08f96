"""Leaderboard: top-K by validation score, atomic persistence, rank-weighted parents."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.runs import leaderboard as lb_module
from finpod.runs.leaderboard import Entry, Leaderboard, checkpoint_name


def _entry(i: int, score: float) -> Entry:
    pid = f"p{i:05d}"
    return Entry(
        pid,
        "ppo",
        {"learning_rate": 1e-3},
        score,
        checkpoint_name(pid),
        history=[{"env_steps": 10, "score": score}],
    )


def _files(run: Path) -> set[str]:
    return (
        {f"checkpoints/{p.name}" for p in (run / "checkpoints").iterdir()}
        if (run / "checkpoints").exists()
        else set()
    )


@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(
        st.one_of(
            st.floats(-5, 5, allow_nan=False), st.just(float("nan")), st.sampled_from([0.5, 1.0])
        ),
        min_size=1,
        max_size=25,
    ),
    k=st.integers(1, 6),
)
def test_board_holds_the_k_best_finite_scores_and_only_their_checkpoints(
    tmp_path_factory, scores, k
):
    run = tmp_path_factory.mktemp("run")
    board = Leaderboard(run, k, "sharpe")
    for i, s in enumerate(scores):
        board.record(_entry(i, s), f"ckpt-{i}".encode())
    finite = [(s, i) for i, s in enumerate(scores) if math.isfinite(s)]
    # Best first; among equal scores the earlier pod ranks higher.
    expected = [f"p{i:05d}" for s, i in sorted(finite, key=lambda t: (-t[0], t[1]))[:k]]
    assert [e.pod_id for e in board.entries] == expected
    assert board.candidates_evaluated == len(scores)
    assert _files(run) == {e.checkpoint for e in board.entries}
    for e in board.entries:
        assert (run / e.checkpoint).read_bytes() == f"ckpt-{int(e.pod_id[1:])}".encode()
    on_disk = json.loads((run / "leaderboard.json").read_text())
    assert [e["pod_id"] for e in on_disk["entries"]] == expected
    assert on_disk["candidates_evaluated"] == len(scores)


def test_json_round_trip_keeps_entries_history_and_progress(tmp_path):
    board = Leaderboard(tmp_path, 3, "sortino")
    for i, s in enumerate([0.3, 1.2, -0.4, 0.9]):
        e = _entry(i, s)
        e.lineage = ["p00000"] if i else []
        e.parent = "p00000" if i else None
        board.record(e, b"x")
    board.progress.next_pod = 9
    board.progress.env_steps = 1234
    board.save()
    again = Leaderboard.load(tmp_path)
    assert again.score_name == "sortino" and again.top_k == 3
    assert [e.to_json() for e in again.entries] == [e.to_json() for e in board.entries]
    assert again.progress == board.progress
    assert again.candidates_evaluated == 4


def test_a_write_that_dies_midway_leaves_the_previous_board_intact(tmp_path, monkeypatch):
    board = Leaderboard(tmp_path, 2, "sharpe")
    board.record(_entry(0, 1.0), b"a")
    board.record(_entry(1, 2.0), b"b")
    before = (tmp_path / "leaderboard.json").read_text()

    def crash(*_args, **_kwargs):
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(lb_module, "atomic_write_json", crash)
    with pytest.raises(KeyboardInterrupt):
        board.record(_entry(2, 3.0), b"c")  # evicts p00000, dies before the JSON lands
    assert (tmp_path / "leaderboard.json").read_text() == before
    on_disk = Leaderboard.load(tmp_path)
    for e in on_disk.entries:  # every entry on disk still points at its complete checkpoint
        assert (tmp_path / e.checkpoint).read_bytes() in (b"a", b"b")
    removed = on_disk.remove_orphan_checkpoints()
    assert [p.name for p in removed] == ["p00002.safetensors"]
    assert _files(tmp_path) == {e.checkpoint for e in on_disk.entries}


def test_missing_checkpoint_entries_are_dropped_on_resume(tmp_path):
    board = Leaderboard(tmp_path, 3, "sharpe")
    for i in range(3):
        board.record(_entry(i, float(i)), b"z")
    (tmp_path / checkpoint_name("p00001")).unlink()
    again = Leaderboard.load(tmp_path)
    problems = again.drop_missing_checkpoints()
    assert len(problems) == 1 and "p00001" in problems[0]
    assert [e.pod_id for e in Leaderboard.load(tmp_path).entries] == ["p00002", "p00000"]


def test_rank_weighted_sampling_prefers_better_entries_and_skips_none(tmp_path):
    board = Leaderboard(tmp_path, 4, "sharpe")
    for i, s in enumerate([0.1, 0.4, 0.3, 0.2]):
        board.record(_entry(i, s), b"")
    rng = np.random.default_rng(0)
    draws = [board.sample_parent(rng).pod_id for _ in range(8000)]
    freq = [draws.count(e.pod_id) / len(draws) for e in board.entries]
    expected = np.array([4, 3, 2, 1]) / 10
    assert all(f > 0 for f in freq)
    assert freq == sorted(freq, reverse=True)
    np.testing.assert_allclose(freq, expected, atol=0.03)
