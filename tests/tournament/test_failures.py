"""The failure model on real loopback clusters: node loss, quarantine, non-finite pods."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from finpod.errors import FinpodError
from finpod.runs.candidates import load_candidates
from finpod.runs.rundir import read_metrics
from finpod.tournament import Leaderboard, run_tournament
from finpod.tournament.failures import QUARANTINE_AFTER, FailurePolicy

from .conftest import run_on_cluster, write_strategy


def _cluster(ray_tmp, name: str, head_cpus: int = 1):
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    return Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": head_cpus,
            "temp_dir": str(ray_tmp / name),
            "include_dashboard": False,
        },
    )


def test_failures_with_one_cause_stop_the_run_but_node_losses_never_do():
    policy = FailurePolicy(max_failures=3)
    for _ in range(10):
        assert policy.node_lost("n1") is False or policy.node_events == 1
    assert policy.node_events == 1
    policy.pod_failed("pod p00001 failed: boom at 0x7f00")
    policy.pod_failed("pod p00002 failed: another thing")
    policy.pod_failed("pod p00003 failed: boom at 0x7f08")
    policy.check()  # causes alternate: no stop
    policy.pod_failed("pod p00004 failed: boom at 0x7f10")
    policy.pod_failed("pod p00005 failed: boom at 0x7f18")
    with pytest.raises(FinpodError, match="3 pods failed in a row with the same cause"):
        policy.check()
    policy.succeeded()
    policy.check()


def test_a_node_is_quarantined_after_its_actors_fail_to_start_repeatedly():
    policy = FailurePolicy(max_failures=8)
    reasons = [policy.start_failed("bad", "ImportError: no torch") for _ in range(QUARANTINE_AFTER)]
    assert reasons[-1] is not None and "no torch" in reasons[-1]
    assert policy.is_quarantined("bad") and not policy.is_quarantined("good")
    with pytest.raises(FinpodError, match="every node that fits a pod is quarantined"):
        policy.all_quarantined(["bad"])
    policy.all_quarantined(["bad", "good"])


def test_a_node_lost_mid_pod_is_one_event_and_its_pods_are_requeued(
    tmp_path, tiny_dataset, ray_tmp
):
    import ray

    cluster = _cluster(ray_tmp, "n")
    worker = cluster.add_node(num_cpus=2, temp_dir=str(ray_tmp / "n"))
    # Pods long enough (8 epochs of several seconds in all) that two of them are sure to
    # overlap on the worker even when actors start seconds apart on a loaded machine.
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=32768, epochs=8, top_k=20)
    running: dict[str, object] = {}  # pod id → actor, pods on the worker right now
    lost: list[str] = []
    removed = threading.Event()
    finished: list[str] = []

    def remove_when_two_train() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pods = dict(running)
            if len(pods) >= 2:
                try:
                    infos = ray.get([a.progress.remote() for a in pods.values()], timeout=10)
                except Exception:  # noqa: BLE001 - an actor still starting
                    infos = []
                # Both mid-training, well before their end (8 epochs): none can report first.
                if infos and all(i.get("pod_id") in pods and i["epoch"] <= 5 for i in infos):
                    lost.extend(sorted(running))
                    cluster.remove_node(worker)
                    removed.set()
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=remove_when_two_train, daemon=True)

    def on_event(kind, payload):
        if kind == "start" and payload["node_id"] == worker.node_id and not removed.is_set():
            running[payload["pod_id"]] = payload["actor"]
            if not watcher.is_alive() and not removed.is_set():
                watcher.start()
        if kind == "finish":
            running.pop(payload["pod_id"], None)
            finished.append(payload["pod_id"])

    result = run_on_cluster(cluster, strategy, tiny_dataset, tmp_path / "runs", "5 pods", on_event)
    assert removed.is_set() and len(lost) >= 2
    summary = result.summary
    assert summary.node_events == 1
    assert summary.pods_requeued == len(lost) and summary.pods_failed == 0
    # The lost pods ran again (same ids) and each was counted once.
    assert set(lost) <= set(finished)
    assert len(finished) == len(set(finished)) == 5
    board = Leaderboard.load(result.run_dir)
    assert board.candidates_evaluated == summary.pods_trained == 5
    rows = read_metrics(result.run_dir / "metrics.csv")
    for pod in lost:  # one learning curve per pod, not two
        assert sum(1 for r in rows if r[0] == pod and r[3:5] == ("validation", "sharpe")) == 8
    log = (result.run_dir / "train.log").read_text()
    assert log.count(f"node {worker.node_id[:8]} lost") == 1


def test_a_node_whose_pod_actors_cannot_start_is_quarantined_and_the_run_finishes(
    tmp_path, tiny_dataset, ray_tmp
):
    # A node with a broken package: its pod actors fail in their constructor.
    broken = tmp_path / "broken"
    (broken / "empyrical").mkdir(parents=True)
    (broken / "empyrical" / "__init__.py").write_text(
        "raise ImportError('empyrical is broken on this node')\n"
    )
    cluster = _cluster(ray_tmp, "q")
    bad = cluster.add_node(
        num_cpus=2, temp_dir=str(ray_tmp / "q"), env_vars={"PYTHONPATH": str(broken)}
    )
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=256, epochs=1, top_k=10)
    quarantined: list[str] = []

    def on_event(kind, payload):
        if kind == "quarantine":
            quarantined.append(payload["node_id"])

    result = run_on_cluster(cluster, strategy, tiny_dataset, tmp_path / "runs", "4 pods", on_event)
    assert quarantined == [bad.node_id]
    assert "empyrical is broken" in result.summary.quarantined[bad.node_id]
    assert bad.node_id not in result.summary.nodes
    assert Leaderboard.load(result.run_dir).candidates_evaluated == 4
    log = (result.run_dir / "train.log").read_text()
    assert f"quarantined node {bad.node_id}" in log and "empyrical is broken" in log
    nodes = json.loads((result.run_dir / "run.json").read_text())["nodes"]
    assert bad.node_id not in nodes and len(nodes) == 1
    assert {"finpod", "ray", "torch", "python"} <= set(next(iter(nodes.values())))


def test_a_diverging_pod_fails_as_non_finite_and_never_scores(tmp_path, tiny_dataset, local_ray):
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=512, epochs=2, top_k=20)
    text = strategy.read_text().replace(
        "[search.ppo]\nlearning_rate = { low = 1e-4, high = 3e-3, log = true }",
        "[search.ppo]\nlearning_rate = 100.0",  # Adam steps of 100: PPO blows up to NaN
    )
    # Seed 7 draws a2c, a2c, ppo for the first fresh pods; with 4 fresh pods the third is
    # fresh whenever pods 0 and 1 finish, so a PPO pod is always drawn.
    text = text.replace("fresh_pods = 2\n", "fresh_pods = 4\n")
    strategy.write_text(text)
    finished: dict[str, str] = {}

    def on_event(kind, payload):
        if kind == "start":
            finished[payload["pod_id"]] = payload["spec"].algorithm

    result = run_tournament(
        strategy, tiny_dataset, pods=2, budget="6 pods", runs=tmp_path / "runs", on_event=on_event
    )
    diverged = {p for p, algo in finished.items() if algo == "ppo"}
    assert diverged, "no PPO pod was drawn"
    assert result.summary.pods_non_finite == len(diverged)
    board = Leaderboard.load(result.run_dir)
    assert not diverged & {e.pod_id for e in board.entries}
    assert all(e.algorithm == "a2c" for e in board.entries)
    assert board.candidates_evaluated == 6 == result.summary.pods_trained
    assert board.progress.pods_failed == len(diverged)
    log = (result.run_dir / "train.log").read_text()
    for pod in diverged:
        assert f"pod {pod} failed: non-finite" in log
    recorded = load_candidates(result.run_dir)  # scored pods only, with their returns
    assert len(recorded) == 6 and not diverged & set(recorded.ids)
    assert np.isfinite(recorded.returns).all()


def test_a_ray_major_minor_mismatch_is_fatal_and_other_versions_only_warn():
    from finpod.tournament.failures import version_mismatch

    driver = {"ray": "2.60.0", "torch": "2.13.0", "finpod": "0.1.0", "python": "3.11.7"}
    assert version_mismatch(driver, dict(driver)) == ("", [])
    fatal, _ = version_mismatch(driver, {**driver, "ray": "2.59.1"})
    assert fatal == "runs Ray 2.59.1, the driver Ray 2.60.0"
    fatal, differ = version_mismatch(driver, {**driver, "ray": "2.60.2", "torch": "2.12.0"})
    assert fatal == "" and differ == ["torch 2.12.0 (driver 2.13.0)"]
