"""PPO's advantages and first update against a reference computed by hand.

A scripted env of one account runs one rollout of five steps: a terminal step at t = 1
and a time-limit truncation at t = 3 (its last observation bootstraps the reward). The
advantages PPO feeds its update are checked against GAE written out step by step, and the
first minibatch's losses against what they must be while the policy has not moved yet
(ratio 1): ``policy_loss = −mean(A)``, ``value_loss = ½·mean(A²)``.
"""

from __future__ import annotations

import pytest
import torch

from finpod.agents.ppo import PPO, PPOParams

GAMMA, LAMBDA = 0.9, 0.8
REWARDS = [1.0, 2.0, 3.0, 4.0, 5.0]
TERMINATED = [False, True, False, False, False]
TRUNCATED = [False, False, False, True, False]


class ScriptedEnv:
    """One env, obs ``(1, 2)``; step t returns ``REWARDS[t]`` and the flags above. After an
    ended episode the next obs is a reset obs and ``info["final_obs"]`` the last one."""

    num_envs, obs_dim, action_dim = 1, 2, 1

    def __init__(self) -> None:
        self.t = 0

    def obs(self, x: float) -> torch.Tensor:
        return torch.tensor([[x, -0.5 * x]])

    def reset(self, seed: int | None = None) -> torch.Tensor:
        return self.obs(0.0)

    def step(self, action: torch.Tensor):
        t, self.t = self.t, self.t + 1
        terminated = torch.tensor([TERMINATED[t]])
        truncated = torch.tensor([TRUNCATED[t]])
        info = {}
        nxt = self.obs(0.1 * (t + 1))
        if TERMINATED[t] or TRUNCATED[t]:
            info["final_obs"] = nxt
            nxt = self.obs(-1.0 - t)  # the next episode's first obs
        return nxt, torch.tensor([REWARDS[t]]), terminated, truncated, info


@pytest.fixture
def run():
    """(agent before learning, the observations seen, what ``_update`` received, stats)."""
    params = PPOParams(
        horizon=5,
        minibatch_size=5,
        update_epochs=1,
        gamma=GAMMA,
        gae_lambda=LAMBDA,
        norm_adv=False,
        actor_hidden=(4,),
        critic_hidden=(4,),
        learning_rate=1e-3,
    )
    agent = PPO(params, 2, 1, torch.device("cpu"), seed=0)
    env = ScriptedEnv()
    pop = agent.population
    before = {k: v.clone() for k, v in pop.params.items()}
    seen: dict = {}
    update = pop._update

    def record(*batch):
        seen["batch"] = [b.clone() for b in batch]
        return update(*batch)

    pop._update = record
    stats = pop.learn(env, 5)
    pop._update = update
    after = {k: v.clone() for k, v in pop.params.items()}
    for k, v in before.items():
        pop.params[k].data.copy_(v)
    return pop, seen["batch"], stats, after


def _value(pop, *rows: list[float]) -> list[float]:
    obs = torch.tensor([list(r) for r in rows]).reshape(1, len(rows), 2)
    with torch.no_grad():
        return [float(v) for v in pop._value(obs).reshape(-1)]


def test_gae_masks_terminal_steps_and_bootstraps_truncated_ones(run):
    pop, (obs, _, _, adv, ret, val), _, _ = run
    obs = obs.reshape(5, 2)
    # What each step saw: o0 = reset, o1 after step 0, o2 = reset after the terminal
    # step 1, o3 after step 2, o4 = reset after the truncated step 3; o5 after step 4.
    o = [[0.0, 0.0], [0.1, -0.05], [-2.0, 1.0], [0.3, -0.15], [-4.0, 2.0]]
    torch.testing.assert_close(obs, torch.tensor(o))
    v = _value(pop, *o)
    (v5,) = _value(pop, [0.5, -0.25])
    (v_final3,) = _value(pop, [0.4, -0.2])  # step 3's last obs, before the reset
    torch.testing.assert_close(val.reshape(-1), torch.tensor(v))
    g, gl = GAMMA, GAMMA * LAMBDA
    # δ_t = r_t + γ·V(next)·(1 − done_t) − V(o_t); the truncated step's reward carries
    # γ·V(final obs) and its next value is masked like a terminal's.
    d0 = 1.0 + g * v[1] - v[0]
    d1 = 2.0 - v[1]  # terminal: no bootstrap
    d2 = 3.0 + g * v[3] - v[2]
    d3 = 4.0 + g * v_final3 - v[3]  # truncated: bootstrap from its own last obs
    d4 = 5.0 + g * v5 - v[4]
    a4 = d4
    a3 = d3  # the episode ended at step 3: nothing flows back from step 4
    a2 = d2 + gl * a3
    a1 = d1  # terminal
    a0 = d0 + gl * a1
    want = torch.tensor([a0, a1, a2, a3, a4])
    torch.testing.assert_close(adv.reshape(-1), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret.reshape(-1), want + torch.tensor(v), rtol=1e-5, atol=1e-5)


def test_first_update_losses_are_the_hand_computed_ones_at_ratio_one(run):
    _, (_, _, _, adv, _, _), stats, _ = run
    a = adv.reshape(-1).double()
    assert float(stats["approx_kl"][0]) == pytest.approx(0.0, abs=1e-7)
    assert float(stats["clip_frac"][0]) == 0.0
    assert float(stats["policy_loss"][0]) == pytest.approx(float(-a.mean()), rel=1e-5)
    assert float(stats["value_loss"][0]) == pytest.approx(float(0.5 * (a * a).mean()), rel=1e-5)


def test_the_update_moves_the_weights(run):
    pop, _, _, after = run
    moved = [k for k, v in after.items() if not torch.equal(v, pop.params[k])]
    assert moved, "one update step left every weight where it was"
