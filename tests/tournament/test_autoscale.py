"""``--pods auto`` on a cluster with no room for a pod asks the autoscaler and waits."""

from __future__ import annotations

import json

from finpod.tournament import Leaderboard

from .conftest import run_on_cluster, write_strategy


def test_a_cluster_without_room_gets_one_pods_request_and_the_run_waits_for_a_node(
    tmp_path, tiny_dataset, ray_tmp
):
    import ray
    from ray.autoscaler._private.constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.cluster_utils import Cluster
    from ray.experimental.internal_kv import _internal_kv_get

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "temp_dir": str(ray_tmp / "a"), "include_dashboard": False},
    )
    # A pod needs 2 CPUs; the head has 1: nothing fits until a node joins.
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=256, epochs=1)
    strategy.write_text(strategy.read_text().replace("cpus_per_pod = 1.0", "cpus_per_pod = 2.0"))
    requests: list = []

    def on_event(kind, payload):
        if kind == "waiting" and not requests:
            requests.append(json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL)))
            # Play the autoscaler: provide the node asked for.
            cluster.add_node(num_cpus=2, temp_dir=str(ray_tmp / "a"))

    result = run_on_cluster(cluster, strategy, tiny_dataset, tmp_path / "runs", "2 pods", on_event)
    assert requests == [[{"CPU": 2.0}]]
    assert Leaderboard.load(result.run_dir).candidates_evaluated == 2
    assert "waiting for a node with 2 CPU(s)" in (result.run_dir / "train.log").read_text()
