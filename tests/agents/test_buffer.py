"""Replay buffer and truncation handling of the off-policy collection loop."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.agents import make_agent


@settings(max_examples=40, deadline=None)
@given(capacity=st.integers(1, 20), batches=st.lists(st.integers(1, 6), min_size=1, max_size=12))
def test_ring_buffer_keeps_exactly_the_latest_transitions(capacity, batches):
    hp = {"buffer_size": capacity, "actor_hidden": [4], "critic_hidden": [4]}
    pop = make_agent("sac", hp, 1, 1, "cpu", 0).population
    pop._ensure_buffer(1)
    written = []
    counter = 0
    for b in batches:
        if b > capacity:
            continue
        ids = torch.arange(counter, counter + b, dtype=torch.float32)
        counter += b
        rows = {"obs": ids[None, :, None], "action": ids[None, :, None], "reward": ids[None]}
        rows |= {"next_obs": ids[None, :, None], "terminated": torch.zeros(1, b)}
        pop._add(rows)
        written.extend(ids.tolist())
    expected = sorted(written[-capacity:]) if written else []
    assert pop.buffer_size == len(expected)
    assert sorted(pop.buffer["reward"][0, : pop.buffer_size].tolist()) == expected


class CountingEnv:
    """obs = steps since reset; episodes truncate after ``length`` steps; reward 1."""

    def __init__(self, num_envs=2, length=3):
        self.num_envs, self.obs_dim, self.action_dim = num_envs, 1, 1
        self.device = torch.device("cpu")
        self.length = length
        self.t = torch.zeros(num_envs)

    def reset(self, seed=None):
        self.t = torch.zeros(self.num_envs)
        return self.t[:, None].clone()

    def step(self, action):
        self.t = self.t + 1
        trunc = self.t >= self.length
        final = self.t[:, None].clone()
        self.t = torch.where(trunc, torch.zeros_like(self.t), self.t)
        return (
            self.t[:, None].clone(),
            torch.ones(self.num_envs),
            torch.zeros(self.num_envs, dtype=torch.bool),
            trunc,
            {"final_obs": final},
        )


def test_off_policy_stores_final_obs_and_bootstraps_truncation():
    env = CountingEnv(length=3)
    agent = make_agent(
        "sac", {"learning_starts": 10_000, "buffer_size": 64, "batch_size": 8}, 1, 1, "cpu", 0
    )
    agent.learn(env, 24)
    buf = agent.buffer
    obs, nxt, term = buf.obs[: buf.size, 0], buf.next_obs[: buf.size, 0], buf.terminated[: buf.size]
    assert torch.equal(nxt, obs + 1)  # the true next obs, never the reset obs
    assert float(term.sum()) == 0.0  # truncation is not termination


def test_a_buffer_too_large_for_memory_is_refused_before_allocating():
    import psutil
    import pytest

    from finpod.errors import FinpodError

    obs_dim = 1000
    # Twice the free RAM, counted in transitions of this size.
    capacity = 2 * psutil.virtual_memory().available // (4 * (2 * obs_dim + 3)) + 1
    agent = make_agent("sac", {"buffer_size": int(capacity)}, obs_dim, 1, "cpu", 0)
    with pytest.raises(FinpodError, match="buffer_size"):
        agent.import_buffer(_filled_sac_dims(obs_dim, 1))


def _filled_sac(seed=0, buffer_size=64, steps=40, obs_dim=1):
    env = CountingEnv(length=5)
    hp = {"learning_starts": 8, "buffer_size": buffer_size, "batch_size": 4}
    agent = make_agent("sac", {**hp, "actor_hidden": [4], "critic_hidden": [4]}, 1, 1, "cpu", seed)
    agent.learn(env, steps)
    return agent


def test_export_then_import_gives_an_identical_buffer_in_the_same_order():
    src = _filled_sac(steps=100, buffer_size=30)  # 100 transitions wrap a 30-row ring
    data = src.export_buffer()
    assert data["obs"].shape == (30, 1) and data["terminated"].dtype == bool
    assert all(a.flags["C_CONTIGUOUS"] for a in data.values())
    dst = make_agent(
        "sac", {"buffer_size": 30, "actor_hidden": [4], "critic_hidden": [4]}, 1, 1, "cpu", 1
    )
    dst.import_buffer(data)
    again = dst.export_buffer()
    assert data.keys() == again.keys()
    for key in data:
        assert (data[key] == again[key]).all(), key
    # Oldest first: the ring's write position is where the oldest row sits.
    buf = src.buffer
    oldest = buf.pos % buf.capacity
    assert float(data["reward"][0]) == float(buf.reward[oldest])
    assert (data["obs"][:, 0] == torch.roll(buf.obs[:, 0], -oldest).numpy()).all()


def test_importing_into_a_smaller_buffer_keeps_the_newest_rows():
    src = _filled_sac(steps=40, buffer_size=64)
    data = src.export_buffer()
    dst = make_agent(
        "sac", {"buffer_size": 16, "actor_hidden": [4], "critic_hidden": [4]}, 1, 1, "cpu", 1
    )
    dst.import_buffer(data)
    got = dst.export_buffer()
    assert dst.buffer.size == 16 and dst.buffer.capacity == 16
    for key in data:
        assert (got[key] == data[key][-16:]).all(), key


def test_a_buffer_of_another_observation_size_is_refused():
    import pytest

    from finpod.errors import FinpodError

    data = _filled_sac().export_buffer()
    other = make_agent("sac", {"buffer_size": 16}, 3, 1, "cpu", 0)
    with pytest.raises(FinpodError, match="observation size 3"):
        other.import_buffer(data)
    with pytest.raises(FinpodError, match="lacks 'reward'"):
        other.import_buffer({k: v for k, v in data.items() if k != "reward"})


def test_loading_a_state_dict_keeps_the_replay_buffer():
    agent = _filled_sac()
    before = agent.export_buffer()
    other = _filled_sac(seed=3)
    agent.load_state_dict(other.state_dict())
    after = agent.export_buffer()
    assert agent.buffer is not None and agent.buffer.size == before["reward"].shape[0]
    for key in before:
        assert (before[key] == after[key]).all(), key


def test_buffer_nbytes_is_the_allocated_size_at_capacity():
    agent = make_agent("sac", {"buffer_size": 100}, 7, 2, "cpu", 0)
    expected = 4 * 100 * (2 * 7 + 2 + 2)
    assert agent.buffer_nbytes() == expected
    agent.import_buffer(_filled_sac_dims(7, 2))
    buf = agent.buffer
    allocated = sum(
        getattr(buf, f).numel() * getattr(buf, f).element_size()
        for f in ("obs", "action", "reward", "next_obs", "terminated")
    )
    assert buf.capacity == 100
    assert allocated == expected


def _filled_sac_dims(obs_dim, action_dim, n=10):
    import numpy as np

    rng = np.random.default_rng(0)
    return {
        "obs": rng.standard_normal((n, obs_dim), dtype=np.float32),
        "action": rng.uniform(-1, 1, (n, action_dim)).astype(np.float32),
        "reward": rng.standard_normal(n, dtype=np.float32),
        "next_obs": rng.standard_normal((n, obs_dim), dtype=np.float32),
        "terminated": rng.random(n) < 0.1,
    }
