"""Learner fusion (fused = mean of learners) and what a pod trains on and starts from."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.errors import FinpodError
from finpod.tournament.fusion import fuse_state_dicts
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod import Pod, PodWorker

HP = {
    "horizon": 16,
    "minibatch_size": 32,
    "update_epochs": 1,
    "actor_hidden": [8],
    "critic_hidden": [8],
}


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_fused_floats_are_the_mean_and_integers_come_from_the_first(n, seed):
    g = torch.Generator().manual_seed(seed)
    sds = [
        {
            "w": torch.randn(3, 4, generator=g),
            "half": torch.randn(5, generator=g).to(torch.float16),
            "counter": torch.tensor(i * 10, dtype=torch.int64),
            "rng": torch.randint(0, 255, (6,), generator=g, dtype=torch.uint8),
        }
        for i in range(n)
    ]
    fused = fuse_state_dicts(sds)
    torch.testing.assert_close(fused["w"], torch.stack([s["w"] for s in sds]).mean(0))
    torch.testing.assert_close(
        fused["half"], torch.stack([s["half"].double() for s in sds]).mean(0).half()
    )
    assert fused["half"].dtype == torch.float16
    assert int(fused["counter"]) == 0 and torch.equal(fused["rng"], sds[0]["rng"])


def test_fusing_different_layouts_is_refused():
    with pytest.raises(FinpodError, match="different state layout"):
        fuse_state_dicts([{"a": torch.zeros(2)}, {"b": torch.zeros(2)}])
    with pytest.raises(FinpodError, match="shape or dtype"):
        fuse_state_dicts([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}])


@pytest.fixture(scope="module")
def pod(tiny_dataset):
    from finpod.data import load_split
    from finpod.env import EnvConfig

    torch.set_num_threads(1)
    return Pod(
        load_split(tiny_dataset, "train"),
        load_split(tiny_dataset, "validation"),
        EnvConfig(episode_length=40),
        "cpu",
    )


def _spec(**kw):
    base = dict(
        pod_id="p00000",
        algorithm="ppo",
        hparams=HP,
        seed=11,
        steps=256,
        epochs=1,
        num_envs=4,
        num_learners=2,
    )
    return PodSpec(**{**base, **kw})


def test_after_an_epoch_every_learner_holds_the_mean_of_the_learners(pod):
    spec = _spec(num_learners=3)
    envs = pod.make_envs(spec)
    learners = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, None)
    start = learners[0].state_dict()
    _, before = pod.run_epoch(learners, envs, 64, epoch_seed=1)
    assert before is not None and len(before) == 3
    weights = [k for k, v in start.items() if v.is_floating_point() and not k.startswith("optim.")]
    moments = [k for k in start if k.endswith(("exp_avg", "exp_avg_sq"))]
    assert weights and moments
    # The shards differ, so the learners ended the epoch in different places ...
    assert not torch.equal(before[0][weights[0]], before[1][weights[0]])
    # ... and the fused agent is exactly their mean, optimizer moments included.
    for learner in learners:
        state = learner.state_dict()
        for key in weights + moments:
            mean = torch.stack([sd[key].double() for sd in before]).mean(0).to(state[key].dtype)
            torch.testing.assert_close(state[key], mean, rtol=0, atol=1e-7)
    # Env steps add up over the learners.
    gained = sum(int(sd["counter.env_steps"]) for sd in before) - 3 * int(
        start["counter.env_steps"]
    )
    assert learners[0].env_steps == int(start["counter.env_steps"]) + gained


def test_a_child_starts_from_its_parents_weights_and_moments_with_its_own_hparams(pod):
    parent = pod.train(_spec(num_learners=1, steps=128))
    child_hp = {**parent.hparams, "learning_rate": 1.234e-3}
    spec = _spec(pod_id="p00001", hparams=child_hp, seed=99, num_learners=1, parent="p00000")
    envs = pod.make_envs(spec)
    (agent,) = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, parent.checkpoint)
    from finpod.tournament.pod_results import (
        state_from_checkpoint_bytes as _state_from_checkpoint_bytes,
    )

    parent_sd = _state_from_checkpoint_bytes(parent.checkpoint)
    child_sd = agent.state_dict()
    for key, value in parent_sd.items():
        if key != "rng.state":
            assert torch.equal(child_sd[key], value), key
    assert agent.env_steps == parent.env_steps > 0
    lrs = {float(opt.lr[0]) for opt in agent.population.optims.values()}
    assert lrs == {1.234e-3}


def test_a_corrupt_parent_checkpoint_is_refused(pod):
    parent = pod.train(_spec(num_learners=1, steps=64))
    broken = bytearray(parent.checkpoint)
    broken[-5] ^= 0xFF
    spec = _spec(pod_id="p00001", num_learners=1, parent="p00000")
    with pytest.raises(FinpodError, match="checksum|corrupt"):
        pod.train(spec, bytes(broken))


def test_pods_read_only_the_train_and_validation_splits(tiny_dataset, local_ray):
    from finpod.env import EnvConfig
    from finpod.tournament.dataplane import DataPlane

    plane = DataPlane.publish(tiny_dataset)
    assert sorted(plane.refs) == ["train", "validation"]  # the backtest split never ships
    worker = PodWorker(plane.ref_list(), EnvConfig(episode_length=40), "cpu", 1)
    assert worker.ready()["error"] == ""
    result, _ = worker.train(_spec(num_learners=1, steps=64))
    assert len(result.history) == 1 and result.history[0]["score"] == result.score
    assert (
        worker.pod.valid_market.split == "validation" and worker.pod.train_market.split == "train"
    )


_SAC_HP = {
    "actor_hidden": [8],
    "critic_hidden": [8],
    "learning_starts": 16,
    "batch_size": 16,
    "buffer_size": 512,
}


@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_concurrent_learners_end_exactly_where_sequential_ones_do(pod, algorithm):
    hparams = _SAC_HP if algorithm == "sac" else HP
    spec = _spec(num_learners=2, algorithm=algorithm, hparams=hparams)
    results = []
    for concurrent in (False, True):
        pod.concurrent_learners = concurrent
        envs = pod.make_envs(spec)
        learners = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, None)
        _, before = pod.run_epoch(learners, envs, 64, epoch_seed=1)
        results.append((before, learners[0].state_dict()))
    pod.concurrent_learners = True
    (seq_before, seq_fused), (par_before, par_fused) = results
    for seq, par in zip(seq_before, par_before, strict=True):
        assert seq.keys() == par.keys()
        for key in seq:
            assert torch.equal(seq[key], par[key]), key
    for key in seq_fused:
        assert torch.equal(seq_fused[key], par_fused[key]), key
