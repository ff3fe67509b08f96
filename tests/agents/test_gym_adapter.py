"""The gymnasium adapter scales actions to the env's bounds and reports final observations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from finpod.agents.gym_adapter import GymVecEnv


@pytest.mark.parametrize(("a", "torque"), [(-1.0, -2.0), (0.0, 0.0), (0.5, 1.0), (1.0, 2.0)])
def test_actions_are_scaled_from_unit_box_to_env_bounds(a, torque):
    env = GymVecEnv("Pendulum-v1", 2)
    env.reset(seed=0)
    env.step(torch.full((2, 1), a))
    applied = [e.unwrapped.last_u for e in env.env.envs]
    assert np.allclose(applied, torque)


def test_final_obs_is_the_last_obs_of_the_ended_episode():
    env = GymVecEnv("Pendulum-v1", 2, reward_scale=0.5)
    env.reset(seed=0)
    for t in range(200):
        obs, reward, term, trunc, info = env.step(torch.zeros(2, 1))
        assert torch.allclose(reward, 0.5 * info["raw_reward"])
        if t < 199:
            assert not bool(trunc.any()) and torch.equal(info["final_obs"], obs)
    assert bool(trunc.all())
    assert not torch.allclose(info["final_obs"], obs)  # obs is already the next episode's
    last = np.stack([e.unwrapped.state for e in env.env.envs])  # reset state now
    theta = np.arctan2(obs[:, 1].numpy(), obs[:, 0].numpy())
    assert np.allclose(theta, last[:, 0], atol=1e-5)
