"""A two-node Ray cluster on loopback: pods run on both nodes, the pool follows the nodes."""

from __future__ import annotations

from finpod.tournament import Leaderboard

from .conftest import run_on_cluster, write_strategy


def test_pool_grows_when_a_node_joins_and_shrinks_when_it_leaves(tmp_path, tiny_dataset, ray_tmp):
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "temp_dir": str(ray_tmp / "c"), "include_dashboard": False},
    )
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=768, epochs=2, top_k=4)
    worker: list = []
    worker_id: list[str] = []
    removed: list[bool] = []
    targets: list[int] = []
    after_shrink: list[str] = []

    def on_event(kind, payload):
        if kind == "pool":
            targets.append(payload["target"])
        if kind == "finish" and removed and targets[-1] == 1:
            after_shrink.append(payload["pod_id"])
        if kind == "finish" and not worker:
            # The second node joins after the first pod: the pool must grow to 2.
            node = cluster.add_node(num_cpus=1, temp_dir=str(ray_tmp / "c"))
            worker.append(node)
            worker_id.append(node.node_id)
        elif kind == "finish" and worker_id and payload["node_id"] == worker_id[0] and not removed:
            # A pod finished on the new node: now the node leaves and the pool must shrink.
            cluster.remove_node(worker[0])
            removed.append(True)

    # 240 s is a cap only: the run stops once the pool has shrunk and run on
    result = run_on_cluster(
        cluster,
        strategy,
        tiny_dataset,
        tmp_path / "runs",
        "240s",
        on_event,
        stop=lambda: len(after_shrink) >= 2,
    )
    summary = result.summary
    assert summary.pool_sizes[:3] == [1, 2, 1], summary.pool_sizes
    assert removed, "no pod ever finished on the second node"
    assert len(summary.nodes) == 2 and all(n > 0 for n in summary.nodes.values())
    assert worker_id[0] in summary.nodes
    board = Leaderboard.load(result.run_dir)
    assert len(after_shrink) >= 2, "the run did not go on after the node left"
    assert board.candidates_evaluated == summary.pods_trained
    assert board.progress.pods_failed == summary.pods_failed
    for entry in board.entries:
        assert (result.run_dir / entry.checkpoint).is_file()
