"""Agent contract: actions in bounds, deterministic seeding, flat state dicts, hparams."""

from __future__ import annotations

import math

import pytest
import torch
from agents_small import SMALL

from finpod.agents import ALGORITHMS, make_agent
from finpod.errors import FinpodError

ALL = sorted(ALGORITHMS)


def test_registry_has_the_five_algorithms():
    assert set(ALL) == {"ppo", "a2c", "sac", "td3", "ddpg"}


@pytest.mark.parametrize("algo", ALL)
def test_learn_on_trading_env_counts_steps_and_changes_weights(algo, trading_env):
    agent = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    before = {k: v.clone() for k, v in agent.state_dict().items()}
    stats = agent.learn(trading_env, 200)
    assert agent.env_steps >= 200
    assert agent.updates > 0
    assert all(isinstance(v, float) for v in stats.values())
    after = agent.state_dict()
    assert not torch.equal(
        before["actor" + _first_param(after)], after["actor" + _first_param(after)]
    )
    obs = trading_env.reset(seed=1)
    for det in (True, False):
        a = agent.act(obs, deterministic=det)
        assert a.shape == (trading_env.num_envs, trading_env.action_dim)
        assert bool((a.abs() <= 1.0).all())


def _first_param(sd):
    return next(k for k in sd if k.startswith("actor.")).removeprefix("actor")


@pytest.mark.parametrize("algo", ALL)
def test_same_seed_same_run_different_seed_different_run(algo, trading_env):
    def run(seed):
        env = type(trading_env)(trading_env.market, trading_env.config, num_envs=4, seed=0)
        agent = make_agent(algo, SMALL[algo], env.obs_dim, env.action_dim, "cpu", seed)
        stats = agent.learn(env, 120)
        return stats, agent.state_dict()

    s1, sd1 = run(3)
    s2, sd2 = run(3)
    s3, sd3 = run(4)
    assert s1.keys() == s2.keys()
    assert all(
        math.isclose(s1[k], s2[k], rel_tol=0, abs_tol=0)
        or (math.isnan(s1[k]) and math.isnan(s2[k]))
        for k in s1
    )
    assert all(torch.equal(sd1[k], sd2[k]) for k in sd1)
    assert not all(torch.equal(sd1[k], sd3[k]) for k in sd1 if k != "rng.state")


@pytest.mark.parametrize("algo", ALL)
def test_state_dict_is_flat_ordered_and_holds_optimizer_moments_and_counters(algo, trading_env):
    agent = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    sd0 = agent.state_dict()
    agent.learn(trading_env, 100)
    sd1 = agent.state_dict()
    assert list(sd0) == list(sd1)  # same keys, same order before and after learning
    assert all(isinstance(v, torch.Tensor) for v in sd1.values())
    assert any(k.endswith(".exp_avg_sq") for k in sd1)
    assert (
        sd1["counter.env_steps"].dtype == torch.int64
        and int(sd1["counter.env_steps"]) == agent.env_steps
    )
    moments = [k for k in sd1 if k.endswith(".exp_avg")]
    assert any(not torch.equal(sd0[k], sd1[k]) for k in moments)  # moments are live state


@pytest.mark.parametrize("algo", ALL)
def test_averaged_state_dicts_load_into_a_working_agent(algo, trading_env):
    """Model fusion: the mean of the floating tensors of two agents is a valid agent."""
    a = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    b = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 1)
    a.learn(trading_env, 100)
    sa, sb = a.state_dict(), b.state_dict()
    fused = {k: (sa[k] + sb[k]) / 2 if sa[k].is_floating_point() else sa[k] for k in sa}
    c = make_agent(algo, SMALL[algo], trading_env.obs_dim, trading_env.action_dim, "cpu", 2)
    c.load_state_dict(fused)
    assert all(torch.equal(c.state_dict()[k], fused[k]) for k in fused)
    c.learn(trading_env, 100)
    assert all(
        bool(torch.isfinite(v).all()) for v in c.state_dict().values() if v.is_floating_point()
    )


@pytest.mark.parametrize("algo", ALL)
def test_set_hparams_changes_optimizer_learning_rates(algo):
    agent = make_agent(algo, SMALL[algo], 5, 2, "cpu", 0)
    for opt_name, field in agent.lr_fields.items():
        agent.set_hparams({field: 0.0123})
        assert getattr(agent.hparams, field) == 0.0123
        assert float(agent.population.optims[opt_name].lr[0]) == 0.0123
    with pytest.raises(FinpodError, match="actor_hidden"):
        agent.set_hparams({"actor_hidden": [8]})
    with pytest.raises(FinpodError, match="nonsense"):
        agent.set_hparams({"nonsense": 1})


def test_make_agent_rejects_unknown_algorithm_and_keys_naming_them():
    with pytest.raises(FinpodError, match="'rainbow'"):
        make_agent("rainbow", None, 3, 1)
    with pytest.raises(FinpodError, match="lerning_rate"):
        make_agent("ppo", {"lerning_rate": 1e-3}, 3, 1)
    with pytest.raises(FinpodError, match="gamma"):
        make_agent("ppo", {"gamma": 1.5}, 3, 1)
    with pytest.raises(FinpodError, match="horizon"):
        make_agent("ppo", {"horizon": "long"}, 3, 1)


def test_load_state_dict_rejects_a_different_architecture():
    a = make_agent("ppo", {"actor_hidden": [8]}, 3, 1)
    b = make_agent("ppo", {"actor_hidden": [16]}, 3, 1)
    with pytest.raises(FinpodError, match="shape"):
        b.load_state_dict(a.state_dict())
    with pytest.raises(FinpodError, match="does not fit"):
        make_agent("sac", None, 3, 1).load_state_dict(a.state_dict())
