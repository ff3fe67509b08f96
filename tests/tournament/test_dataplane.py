"""The data plane: pods read the driver's splits from Ray's object store, never its paths."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from finpod.data import load_split
from finpod.runs.candidates import load_candidates
from finpod.tournament import Leaderboard
from finpod.tournament.dataplane import DataPlane, market_from_payload, market_to_payload

from .conftest import run_on_cluster, write_strategy


def test_a_split_round_trips_through_a_payload_unchanged(tiny_dataset):
    market = load_split(tiny_dataset, "validation")
    back = market_from_payload(market_to_payload(market))
    for name in ("open", "close", "features", "tradable"):
        assert np.array_equal(getattr(back, name).numpy(), getattr(market, name).numpy())
    assert back.timestamps.equals(market.timestamps)
    assert back.tickers == market.tickers and back.feature_names == market.feature_names
    assert (back.bar, back.split) == (market.bar, market.split)


def test_the_backtest_split_is_never_packed_for_pods(tiny_dataset):
    with pytest.raises(ValueError, match="never shipped"):
        market_to_payload(load_split(tiny_dataset, "backtest"))


def test_cpu_pods_read_the_object_store_copy_without_copying(tiny_dataset, local_ray):
    ray = local_ray
    plane = DataPlane.publish(tiny_dataset)
    assert set(plane.refs) == {"train", "validation"}
    payload = ray.get(plane.refs["train"])
    market = market_from_payload(payload)
    # Same memory as the object store's (read-only) array: one copy per node.
    assert not payload["close"].flags.writeable
    assert market.close.data_ptr() == payload["close"].__array_interface__["data"][0]
    assert market.features.data_ptr() == payload["features"].__array_interface__["data"][0]


def test_a_node_joining_after_the_dataset_was_removed_trains_pods_that_enter_the_board(
    tmp_path, tiny_dataset, ray_tmp
):
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    data = tmp_path / "ds"
    shutil.copytree(tiny_dataset, data)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "temp_dir": str(ray_tmp / "d"), "include_dashboard": False},
    )
    # A board wide enough that every scored pod stays on it: the head node may finish many
    # short pods before the new node has joined.
    strategy = write_strategy(tmp_path / "s.toml", pod_steps=256, epochs=1, top_k=1000)
    joined: list[str] = []
    on_new_node: list[str] = []

    def on_event(kind, payload):
        if kind == "start" and not joined:
            # The driver has loaded and shipped the dataset: remove it, then grow the cluster.
            shutil.rmtree(data)
            joined.append(cluster.add_node(num_cpus=1, temp_dir=str(ray_tmp / "d")).node_id)
        if kind == "finish" and joined and payload["node_id"] == joined[0]:
            on_new_node.append(payload["pod_id"])

    # 600 s is a cap only
    result = run_on_cluster(
        cluster,
        strategy,
        data,
        tmp_path / "runs",
        "600s",
        on_event,
        stop=lambda: len(on_new_node) >= 2,
    )
    assert not data.exists()
    assert len(on_new_node) >= 2, "no pod finished on the node that joined later"
    assert result.summary.pods_failed == 0
    board = Leaderboard.load(result.run_dir)
    assert set(on_new_node) <= {e.pod_id for e in board.entries}
    assert set(on_new_node) <= set(load_candidates(result.run_dir).ids)
    assert board.candidates_evaluated == result.summary.pods_trained


def test_training_and_scoring_a_pod_never_write_into_the_shared_arrays(tiny_dataset, local_ray):
    from finpod.env import EnvConfig
    from finpod.tournament.dataplane import fetch_splits
    from finpod.tournament.generator import PodSpec
    from finpod.tournament.pod import Pod

    plane = DataPlane.publish(tiny_dataset)
    train, validation = fetch_splits(plane.ref_list(), "cpu")
    pod = Pod(train, validation, EnvConfig(episode_length=40), "cpu")
    hp = {"horizon": 16, "minibatch_size": 64, "actor_hidden": [8], "critic_hidden": [8]}
    result = pod.train(PodSpec("p00000", "ppo", hp, 1, 256, 2, 4, 1))
    assert not result.failure and result.returns is not None
    for split, market in (("train", train), ("validation", validation)):
        fresh = load_split(tiny_dataset, split)
        for name in ("open", "close", "features", "tradable"):
            assert np.array_equal(getattr(market, name).numpy(), getattr(fresh, name).numpy())
