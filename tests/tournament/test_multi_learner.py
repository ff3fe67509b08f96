"""A pod's L learners: their devices, their threads, and fusion across devices that keeps
each learner's replay buffer."""

from __future__ import annotations

import pytest
import torch

from finpod.agents import make_agent
from finpod.tournament.fusion import fuse_learners, learner_devices, threads_per_learner
from finpod.tournament.generator import PodSpec

SAC_HP = {
    "actor_hidden": [8],
    "critic_hidden": [8],
    "learning_starts": 16,
    "batch_size": 16,
    "buffer_size": 512,
}


# ----- devices and threads --------------------------------------------------------------------


def test_learners_run_on_the_cpu_without_gpus():
    cpu = torch.device("cpu")
    assert learner_devices(3, None, cpu) == [cpu] * 3
    assert learner_devices(2, [0, 1], cpu) == [cpu] * 2  # a CPU pod ignores GPU ids
    assert learner_devices(2, [], "cuda") == [torch.device("cuda")] * 2


def test_each_learner_gets_its_own_gpu_when_the_pod_has_enough(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    devs = learner_devices(2, [0, 1], torch.device("cuda"))
    assert devs == [torch.device("cuda", 0), torch.device("cuda", 1)]
    # More ids than learners: the first L.
    assert learner_devices(2, [0, 1, 2, 3], "cuda") == devs


def test_learners_share_when_the_pod_has_fewer_gpus_than_learners(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # A fractional gpus_per_pod: Ray hands the actor one GPU id, every learner shares it.
    assert learner_devices(3, [0], "cuda") == [torch.device("cuda", 0)] * 3
    assert learner_devices(4, [0, 1], "cuda") == [
        torch.device("cuda", 0),
        torch.device("cuda", 1),
        torch.device("cuda", 0),
        torch.device("cuda", 1),
    ]


def test_ray_gpu_ids_map_to_the_ordinals_torch_sees(monkeypatch):
    # Ray gave this actor physical GPUs 5 and 7 and made only them visible: cuda:0, cuda:1.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert learner_devices(2, [7, 5], "cuda") == [torch.device("cuda", 1), torch.device("cuda", 0)]


@pytest.mark.parametrize(
    ("cpus", "learners", "threads"), [(1, 1, 1), (4, 1, 4), (4, 2, 2), (5, 2, 2), (2, 4, 1)]
)
def test_threads_per_learner_split_the_pods_cpus(cpus, learners, threads):
    assert threads_per_learner(cpus, learners) == threads


# ----- fusion across learners -------------------------------------------------------------------


class CountingEnv:
    """obs = a per-env ramp; reward 1; never ends (enough to fill a replay buffer)."""

    def __init__(self, num_envs=4, obs_dim=3, offset=0.0):
        self.num_envs, self.obs_dim, self.action_dim = num_envs, obs_dim, 2
        self.device = torch.device("cpu")
        self.offset = offset
        self.t = torch.zeros(num_envs)

    def reset(self, seed=None):
        self.t = torch.arange(self.num_envs, dtype=torch.float32) + self.offset
        return self._obs()

    def _obs(self):
        return self.t[:, None].repeat(1, self.obs_dim) / 100.0

    def step(self, action):
        self.t = self.t + 1
        obs = self._obs()
        return (
            obs,
            action.sum(1).float(),
            torch.zeros(self.num_envs, dtype=torch.bool),
            torch.zeros(self.num_envs, dtype=torch.bool),
            {"final_obs": obs},
        )


def _learners(devices, seed=0):
    first = make_agent("sac", SAC_HP, 3, 2, devices[0], seed)
    learners = [first]
    for dev in devices[1:]:
        twin = make_agent("sac", SAC_HP, 3, 2, dev, seed)
        twin.load_state_dict(first.state_dict())
        learners.append(twin)
    return learners


def _train_shards(learners):
    for i, learner in enumerate(learners):
        learner.generator.manual_seed(100 + i)
        learner.learn(CountingEnv(offset=10.0 * i), 48)


def _check_fused(learners, before):
    weights = [k for k in before[0] if k.startswith(("actor.", "q1.")) and "optim" not in k]
    moments = [k for k in before[0] if k.endswith(("exp_avg", "exp_avg_sq"))]
    assert weights and moments
    assert not torch.equal(before[0][weights[0]].cpu(), before[1][weights[0]].cpu())
    for learner in learners:
        state = learner.state_dict()
        for key in weights + moments:
            mean = torch.stack([sd[key].double().cpu() for sd in before]).mean(0).float()
            torch.testing.assert_close(state[key].cpu(), mean, rtol=0, atol=1e-7)
        # ... and every tensor stays on the learner's own device.
        pop = learner.population
        assert all(p.device == learner.device for p in pop.params.values())
        for opt in pop.optims.values():
            assert all(m.device == learner.device for m in opt.exp_avg + opt.exp_avg_sq)
    steps = [int(sd["counter.env_steps"]) for sd in before]
    updates = [int(sd["counter.updates"]) for sd in before]
    assert min(steps) > 0 and min(updates) > 0
    # Every shard's steps and updates count (the learners started the epoch at 0).
    assert all(lr.env_steps == sum(steps) and lr.updates == sum(updates) for lr in learners)


def test_fusion_averages_weights_and_adam_moments_on_each_learners_device():
    devices = learner_devices(2, None, torch.device("cpu"))
    learners = _learners(devices)
    _train_shards(learners)
    before = fuse_learners(learners, start_env_steps=0, start_updates=0)
    _check_fused(learners, before)


def test_sac_learners_keep_their_replay_buffers_across_fusion():
    learners = _learners([torch.device("cpu"), torch.device("cpu")])
    _train_shards(learners)
    buffers = [lr.export_buffer() for lr in learners]
    assert all(b["reward"].shape[0] == 48 for b in buffers)
    assert not (buffers[0]["obs"] == buffers[1]["obs"]).all()  # each learner its own shard
    fuse_learners(learners, start_env_steps=0, start_updates=0)
    for learner, before in zip(learners, buffers, strict=True):
        assert learner.buffer is not None and learner.buffer.size == 48
        after = learner.export_buffer()
        for key in before:
            assert (after[key] == before[key]).all(), key
    # The next epoch adds to the kept buffer instead of refilling it from nothing.
    learners[0].learn(CountingEnv(), 8)
    assert learners[0].buffer.size == 56


def test_sac_pod_with_two_learners_keeps_buffers_across_its_epoch_fusion(tiny_dataset):
    from finpod.data import load_split
    from finpod.env import EnvConfig
    from finpod.tournament.pod import Pod

    torch.set_num_threads(1)
    pod = Pod(
        load_split(tiny_dataset, "train"),
        load_split(tiny_dataset, "validation"),
        EnvConfig(episode_length=40),
        "cpu",
    )
    spec = PodSpec("p00000", "sac", SAC_HP, 11, 256, 2, 4, 2)
    envs = pod.make_envs(spec)
    learners = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, None)
    pod.run_epoch(learners, envs, 64, epoch_seed=1)
    kept = [lr.export_buffer() for lr in learners]
    assert all(k["reward"].shape[0] == 64 for k in kept)
    pod.run_epoch(learners, envs, 64, epoch_seed=2)
    for learner, first in zip(learners, kept, strict=True):
        assert learner.buffer.size == 128
        now = learner.export_buffer()
        for key in first:
            assert (now[key][:64] == first[key]).all(), key


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fusion_across_gpus():
    n = torch.cuda.device_count()
    devices = learner_devices(2, list(range(n)), torch.device("cuda"))
    learners = _learners(devices)
    _train_shards(learners)
    before = fuse_learners(learners, start_env_steps=0, start_updates=0)
    _check_fused(learners, before)
