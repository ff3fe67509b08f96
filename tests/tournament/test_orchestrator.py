"""The orchestrator on a real local Ray: pod deaths, generational mode, budgets."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from finpod.agents import read_checkpoint
from finpod.runs.rundir import read_metrics
from finpod.tournament import Leaderboard, run_tournament

from .conftest import write_strategy

pytestmark = pytest.mark.usefixtures("local_ray")


def assert_consistent(run_dir, candidates: int) -> Leaderboard:
    """Leaderboard on disk: sorted, ≤ K, every checkpoint valid, no stray files."""
    board = Leaderboard.load(run_dir)
    assert board.candidates_evaluated == candidates
    scores = [e.score for e in board.entries]
    assert scores == sorted(scores, reverse=True) and len(scores) <= board.top_k
    for e in board.entries:
        meta, _ = read_checkpoint(run_dir / e.checkpoint)
        assert meta["algorithm"] == e.algorithm
        assert e.history and e.history[-1]["score"] == pytest.approx(e.score)
    files = {f"checkpoints/{p.name}" for p in (run_dir / "checkpoints").iterdir()}
    assert files == {e.checkpoint for e in board.entries}
    return board


def test_a_pod_actor_killed_mid_run_is_replaced_and_the_board_stays_consistent(
    tmp_path, tiny_dataset
):
    import ray

    strategy = write_strategy(tmp_path / "s.toml", pod_steps=512, epochs=4, top_k=3)
    victim = "p00001"
    killed = threading.Event()

    def kill_when_training(actor) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            info = ray.get(actor.progress.remote())
            if info.get("pod_id") == victim:  # inside train(): mid-run
                ray.kill(actor, no_restart=True)
                killed.set()
                return
            time.sleep(0.005)

    def on_event(kind, payload):
        if kind == "start" and payload["pod_id"] == victim:
            threading.Thread(
                target=kill_when_training, args=(payload["actor"],), daemon=True
            ).start()

    result = run_tournament(
        strategy, tiny_dataset, pods=2, budget="5 pods", runs=tmp_path / "runs", on_event=on_event
    )
    assert killed.is_set()
    assert result.summary.pods_failed == 1 and result.summary.pods_trained == 5
    board = assert_consistent(result.run_dir, candidates=5)
    assert board.progress.pods_failed == 1
    assert victim not in {e.pod_id for e in board.entries}
    metric_pods = {row[0] for row in read_metrics(result.run_dir / "metrics.csv")}
    assert victim not in metric_pods and len(metric_pods) == 5
    log = (result.run_dir / "train.log").read_text()
    assert f"pod {victim} died" in log
    assert (result.run_dir / "learning_curves.png").stat().st_size > 0
    assert_reproducible_run_dir(result.run_dir, tiny_dataset, result.config)


def assert_reproducible_run_dir(run_dir, dataset, config) -> None:
    """run.json and strategy.toml say everything needed to rerun and to backtest."""
    import json

    from finpod.data import load_manifest
    from finpod.strategy import load_strategy
    from finpod.tournament.launch import resolve

    info = json.loads((run_dir / "run.json").read_text())
    assert {"run_id", "created", "strategy", "dataset", "seed", "versions"} <= set(info)
    assert info["run_id"] == run_dir.name
    assert info["dataset"]["hash"] == load_manifest(dataset)["hash"]
    assert {"torch", "ray", "finpod"} <= set(info["versions"])
    again, _, seed = resolve(load_strategy(run_dir / "strategy.toml"))
    assert again == config and seed == info["seed"]


def test_generational_mode_continues_the_elite_and_perturbs_copies_of_it(tmp_path, tiny_dataset):
    strategy = write_strategy(
        tmp_path / "s.toml",
        pod_steps=128,
        epochs=1,
        top_k=10,
        extra='mode = "generational"\ngeneration_size = 3\nkeep_fraction = 0.33\nperturb = 0.5\n',
    )
    started, finished = [], {}

    def on_event(kind, payload):
        if kind == "start":
            started.append(payload["spec"])
        elif kind == "finish":
            finished[payload["pod_id"]] = payload["result"]

    result = run_tournament(
        strategy, tiny_dataset, pods=2, budget="6 pods", runs=tmp_path / "runs", on_event=on_event
    )
    assert_consistent(result.run_dir, candidates=6)
    first, second = started[:3], started[3:]
    assert all(s.parent is None for s in first)
    best = max((finished[s.pod_id] for s in first), key=lambda r: r.score)
    assert [s.parent for s in second] == [best.pod_id] * 3
    assert all(s.algorithm == best.algorithm for s in second)  # children keep the algorithm
    assert second[0].hparams == best.hparams  # the elite continues unperturbed
    assert all(s.hparams != best.hparams for s in second[1:])
    assert all(s.lineage == [best.pod_id] for s in second)
    # The scheduler owns its state: the generation count is in its own file.
    state = json.loads((Path(result.run_dir) / "scheduler.json").read_text())
    assert state["mode"] == "generational" and state["generation"] == 1


def test_an_env_step_budget_stops_the_run_at_that_many_steps(tmp_path, tiny_dataset):
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=256, epochs=1)
    result = run_tournament(
        strategy, tiny_dataset, pods=2, budget="700 steps", runs=tmp_path / "runs"
    )
    board = Leaderboard.load(result.run_dir)
    # learn() rounds each pod up to whole rollouts (horizon 16 × 4 envs = 64 steps).
    assert 700 <= board.progress.env_steps < 700 + 2 * 64
    assert board.candidates_evaluated == result.summary.pods_trained == 3
