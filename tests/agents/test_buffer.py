"""Replay buffer and truncation handling of the off-policy collection loop."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.agents import make_agent
from finpod.agents.buffer import ReplayBuffer


@settings(max_examples=40, deadline=None)
@given(capacity=st.integers(1, 20), batches=st.lists(st.integers(1, 6), min_size=1, max_size=12))
def test_ring_buffer_keeps_exactly_the_latest_transitions(capacity, batches):
    buf = ReplayBuffer(capacity, 1, 1, torch.device("cpu"))
    written = []
    counter = 0
    for b in batches:
        if b > capacity:
            continue
        ids = torch.arange(counter, counter + b, dtype=torch.float32)
        counter += b
        buf.add(ids[:, None], ids[:, None], ids, ids[:, None], torch.zeros(b, dtype=torch.bool))
        written.extend(ids.tolist())
    expected = sorted(written[-capacity:]) if written else []
    assert buf.size == len(expected)
    assert sorted(buf.reward[: buf.size].tolist()) == expected


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

    from finpod.agents.buffer import ReplayBuffer
    from finpod.errors import FinpodError

    obs_dim = 1000
    # Twice the free RAM, counted in transitions of this size.
    capacity = 2 * psutil.virtual_memory().available // (4 * (2 * obs_dim + 3)) + 1
    with pytest.raises(FinpodError, match="buffer_size"):
        ReplayBuffer(capacity, obs_dim, 1, torch.device("cpu"))
