"""Populations: K pods trained by one pod actor, each still a pod to the tournament."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from finpod.runs import read_metrics
from finpod.tournament import Leaderboard, run_tournament

from .conftest import run_on_cluster, write_strategy


def _markets(dataset):
    from finpod.data import load_split

    return load_split(dataset, "train"), load_split(dataset, "validation")


def test_batched_scoring_gives_each_member_its_own_single_account_rollout(tiny_dataset):
    """Account k of the K-account validation env earns exactly what a one-account rollout
    of member k's policy earns (same controls, fills and costs): batching the evaluator
    cannot change a score."""
    from finpod.agents.validation import account_rollout, scoring_env
    from finpod.env import EnvConfig, VecTradingEnv, rollout

    _, valid = _markets(tiny_dataset)
    config = EnvConfig(
        action_mode="weights", decision_interval=3, no_trade_band=0.01, partial_adjustment=0.5
    )
    probe = VecTradingEnv(valid, config, num_envs=1, random_start=False)
    gen = torch.Generator().manual_seed(0)
    # Three different deterministic policies of the observation (linear, squashed).
    weights = [torch.randn(probe.obs_dim, probe.action_dim, generator=gen) for _ in range(3)]

    def policy(k):
        return lambda obs: torch.tanh(obs.float() @ weights[k])

    def act(obs):
        return torch.cat([policy(k)(obs[k : k + 1]) for k in range(3)])

    batched = account_rollout(act, scoring_env(valid, config, 3, torch.device("cpu"))).returns
    assert batched.shape == (3, valid.num_bars - 1)
    for k in range(3):
        single = rollout(policy(k), valid, config)
        np.testing.assert_allclose(batched[k], single.returns.to_numpy(), rtol=0, atol=1e-12)
    assert not np.allclose(batched[0], batched[1])  # the members really differ


def test_members_of_a_population_share_algorithm_architecture_and_controls():
    import tempfile
    from pathlib import Path

    from finpod.strategy import load_strategy
    from finpod.tournament.generator import Generator
    from finpod.tournament.launch import resolve

    with tempfile.TemporaryDirectory() as tmp:
        path = write_strategy(
            Path(tmp) / "s.toml",
            extra="""
            population = 6
            [search.env]
            no_trade_band = { low = 0.0, high = 0.05 }
            """,
        )
        text = path.read_text().replace("[search.ppo]", "[search.ppo]\nactor_hidden = [[8], [16]]")
        path.write_text(text)
        config, space, seed = resolve(load_strategy(path), None, None, None)
    board = Leaderboard(Path("/nonexistent"), 4, "sharpe")
    gen = Generator(space, config, seed, 4)
    seen_algorithms = set()
    for start in range(0, 60, 6):
        group = gen.next_group(board, start, 6)
        assert [s.pod_id for s in group] == [f"p{start + i:05d}" for i in range(6)]
        lead = group[0]
        seen_algorithms.add(lead.algorithm)
        for spec in group:
            assert spec.algorithm == lead.algorithm
            assert spec.env == lead.env
            assert gen.frozen_of(spec.algorithm, spec.hparams) == gen.frozen_of(
                lead.algorithm, lead.hparams
            )
        assert len({s.seed for s in group}) == 6
        if lead.algorithm == "ppo":
            assert len({s.hparams["learning_rate"] for s in group}) == 6
    assert seen_algorithms == {"ppo", "a2c"}


@pytest.mark.usefixtures("local_ray")
def test_a_population_run_records_every_member_as_a_pod(tmp_path, tiny_dataset):
    strategy = write_strategy(
        tmp_path / "s.toml", pod_steps=256, epochs=2, top_k=5, extra="population = 4"
    )
    result = run_tournament(strategy, tiny_dataset, pods=1, budget="12 pods", runs=tmp_path / "r")
    board = Leaderboard.load(result.run_dir)
    assert board.candidates_evaluated == 12 and result.summary.pods_trained == 12
    assert len(board.entries) == 5
    pods = {row[0] for row in read_metrics(result.run_dir / "metrics.csv")}
    assert len(pods) == 12
    info = json.loads((result.run_dir / "run.json").read_text())
    tp = info["throughput"]
    assert tp["env_steps"] == board.progress.env_steps > 0
    assert tp["env_steps_per_s"] == pytest.approx(tp["env_steps"] / tp["wall_s"], rel=1e-3)
    log = (result.run_dir / "train.log").read_text()
    assert log.count("start population of 4") == 3
    # Later populations breed from the board: some members are children of entries.
    assert any(e.parent for e in board.entries) or "child of" in log


def test_a_node_lost_mid_population_requeues_its_members_once(tmp_path, tiny_dataset, ray_tmp):
    """A population lost with its node is one node event; each of its members runs again
    under its own id, elsewhere, and is counted once."""
    import threading
    import time

    import ray

    from .test_failures import _cluster

    cluster = _cluster(ray_tmp, "pn")
    worker = cluster.add_node(num_cpus=1, temp_dir=str(ray_tmp / "pn"))
    strategy = write_strategy(
        tmp_path / "s.toml", pod_steps=16384, epochs=8, top_k=10, extra="population = 3"
    )
    on_worker: dict[str, object] = {}
    lost: list[str] = []
    finished: list[str] = []
    removed = threading.Event()

    def remove_mid_population() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not removed.is_set():
            actor = next(iter(on_worker.values()), None)
            if actor is not None:
                try:
                    info = ray.get(actor.progress.remote(), timeout=10)
                except Exception:  # noqa: BLE001 - the actor is still starting
                    info = {}
                if info.get("pod_id") and 1 <= info.get("epoch", 0) <= 5:
                    lost.extend(sorted(on_worker))
                    cluster.remove_node(worker)
                    removed.set()
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=remove_mid_population, daemon=True)

    def on_event(kind, payload):
        if kind == "start" and payload["node_id"] == worker.node_id and not removed.is_set():
            on_worker[payload["pod_id"]] = payload["actor"]
            if not watcher.is_alive():
                watcher.start()
        if kind == "finish":
            finished.append(payload["pod_id"])

    result = run_on_cluster(cluster, strategy, tiny_dataset, tmp_path / "runs", "6 pods", on_event)
    assert removed.is_set() and len(lost) == 3
    summary = result.summary
    assert summary.node_events == 1 and summary.pods_failed == 0
    assert summary.pods_requeued == 3
    assert set(lost) <= set(finished)
    assert len(finished) == len(set(finished)) == 6
    board = Leaderboard.load(result.run_dir)
    assert board.candidates_evaluated == summary.pods_trained == 6
    rows = read_metrics(result.run_dir / "metrics.csv")
    for pod in lost:  # one learning curve per member, not two
        assert sum(1 for r in rows if r[0] == pod and r[3:5] == ("validation", "sharpe")) == 8
