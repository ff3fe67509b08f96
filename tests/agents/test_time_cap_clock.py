"""A time-capped ``learn`` stops at its deadline, not at once and not never: the deadline
and the learners' check read one clock (see :mod:`finpod.agents.deadline`)."""

from __future__ import annotations

import time

import pytest
import torch
from agents_small import SMALL

from finpod.agents import deadline, make_agent
from finpod.agents.callbacks import MIN_RESERVE_S, TimeBudget
from finpod.agents.learners import AgentLearner
from finpod.agents.loop import run_loop

#: The cap of the job below; its learning deadline is MIN_RESERVE_S earlier.
CAP_S = 4.0
#: Env steps of one PPO rollout below (horizon 8 × 4 envs): what a deadline that fires at
#: once still lets through.
ROLLOUT = 32


@pytest.mark.timeout(120)  # a deadline that never fires would train for hours
@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_a_time_capped_learn_trains_until_its_deadline_and_stops_there(trading_env, algorithm):
    agent = make_agent(
        algorithm, SMALL[algorithm], trading_env.obs_dim, trading_env.action_dim, "cpu", 0
    )
    t0 = time.perf_counter()
    try:
        run_loop(
            AgentLearner(agent, trading_env),
            None,
            ids=["a"],
            steps_per_segment=10**9,
            segments=1,
            callbacks=[TimeBudget(lambda wall, done: False, CAP_S, t0)],
            t0=t0,
        )
    finally:
        deadline.set_deadline(None)
    wall = time.perf_counter() - t0
    learned_until = CAP_S - MIN_RESERVE_S
    # Stopped at the deadline (one update past it at most), not before it ...
    assert learned_until - 0.5 <= wall <= CAP_S + 2.0, wall
    # ... having learned all along: many rollouts, not the one a deadline already passed
    # lets through.
    assert agent.env_steps >= 20 * ROLLOUT, agent.env_steps
    assert torch.isfinite(agent.act(torch.zeros(1, trading_env.obs_dim))).all()
