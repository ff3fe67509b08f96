"""Selection on active skill: in benchmark-relative mode pods are ranked by the information
ratio of their validation returns over the zero-tilt reference account, and the run records
that active series as each candidate's returns (so DSR and PBO measure the same score)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from tiny_strategy import tiny_tournament

from finpod.agents import load_checkpoint
from finpod.backtest.agents import recorded_env_config
from finpod.data import load_split
from finpod.env import rollout, score
from finpod.runs import load_candidates, read_run_info
from finpod.tournament import Leaderboard, run_tournament


def _active_strategy(population: int) -> str:
    """The tiny tournament trading active tilts, scored on the information ratio."""
    return tiny_tournament(
        hparams={"update_epochs": 2, "learning_rate": 3e-3},
        env={
            "action_mode": "active",
            "start": "reference",
            "max_active_weight": 0.2,
            "active_budget": 0.5,
            "reward": "active_log_return",
        },
        train={"score": "information_ratio"},
        tournament={
            "pod_steps": 512,
            "top_k": 6,
            "population": population,
            "score": "information_ratio",
        },
        tail='[search]\nalgorithms = ["ppo"]\n'
        "[search.ppo]\nlearning_rate = { low = 1e-3, high = 1e-2, log = true }\n",
    )


@pytest.mark.parametrize("population", [1, 2], ids=["pods", "population"])
def test_pods_are_ranked_by_the_information_ratio_of_their_active_returns(
    population, tmp_path, tiny_dataset, ray_tmp
):
    path = tmp_path / "s.toml"
    path.write_text(_active_strategy(population), encoding="utf-8")
    run = run_tournament(path, tiny_dataset, pods=1, budget="4 pods", runs=tmp_path / "r")
    board = Leaderboard.load(run.run_dir)
    assert board.score_name == "information_ratio"
    meta = read_run_info(run.run_dir)
    valid = load_split(tiny_dataset, "validation")
    candidates = load_candidates(run.run_dir)
    scores = []
    for entry in board.entries:
        agent = load_checkpoint(run.run_dir / entry.checkpoint, torch.device("cpu"))
        config, _ = recorded_env_config(run.run_dir, meta, entry)
        result = rollout(lambda o, a=agent: a.act(o, deterministic=True), valid, config)
        active = result.returns - result.reference_returns
        # The leaderboard score is the active series' information ratio, not the Sharpe.
        assert entry.score == pytest.approx(score(result, "information_ratio"), rel=1e-4)
        assert entry.score != pytest.approx(score(result, "sharpe"), rel=1e-2)
        # The recorded candidate returns are that active series.
        col = candidates.ids.index(entry.pod_id)
        recorded = candidates.returns[-len(active) :, col]
        np.testing.assert_allclose(recorded, active.to_numpy(), rtol=1e-4, atol=1e-6)
        scores.append(entry.score)
    assert scores == sorted(scores, reverse=True)
    assert float(np.std(scores)) > 0  # the candidates are told apart


def test_an_active_score_without_a_reference_is_one_line():
    from finpod.errors import FinpodError
    from finpod.scores import scored_series

    with pytest.raises(FinpodError, match="active_log_return"):
        scored_series(np.zeros(3), None, "information_ratio")


def test_pod_workers_run_at_the_drivers_priority(ray_tmp):
    """Ray starts workers at nice 15 unless told otherwise; a local tournament's pods must
    not be starved by every other process on the machine."""
    import ray

    from finpod.tournament.launch import connect_ray

    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_worker_niceness", None)
    started = connect_ray(None, 1)
    try:

        @ray.remote(num_cpus=1)
        def niceness() -> int:
            return os.nice(0)

        assert ray.get(niceness.remote()) == os.nice(0)
    finally:
        if started:
            ray.shutdown()


def test_the_eta_counts_running_epochs_and_stays_inside_the_cap():
    from finpod.tournament.budget import eta_seconds
    from finpod.tournament.settings import Budget

    steps = Budget("steps", 1000.0)
    running = [{"epoch": 2, "epochs": 4, "steps": 200}]  # half of a 200-step pod done
    # 300 steps finished + 100 running in 40 s: 600 left at 10 steps/s.
    assert eta_seconds(steps, 300.0, running, 40.0) == pytest.approx(60.0)
    assert eta_seconds(steps, 300.0, running, 40.0, time_cap=70.0) == pytest.approx(30.0)
    assert eta_seconds(steps, 0.0, [], 5.0) is None
    assert eta_seconds(Budget("time", 90.0), 0.0, [], 30.0) == pytest.approx(60.0)
