"""The cross-sectional policy family: one network per ticker, with pooled context."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from finpod.agents import make_agent
from finpod.agents.cross_section import TickerLayout
from finpod.agents.registry import make_population
from finpod.env import EnvConfig, VecTradingEnv, rollout
from finpod.errors import FinpodError

N, F, TAIL = 6, 3, 1
D = 2 + N * (2 + F) + TAIL
HP = {
    "net": "cross_sectional",
    "ticker_features": F,
    "actor_hidden": [16, 16],
    "critic_hidden": [16, 16],
    "log_std_init": -1.0,
}


def _permute(obs: torch.Tensor, perm: torch.Tensor, n: int = N, f: int = F) -> torch.Tensor:
    """``obs`` with its tickers reordered by ``perm`` (weights, price z, features)."""
    out = obs.clone()
    out[:, 2 : 2 + n] = obs[:, 2 : 2 + n][:, perm]
    out[:, 2 + n : 2 + 2 * n] = obs[:, 2 + n : 2 + 2 * n][:, perm]
    feats = obs[:, 2 + 2 * n : 2 + n * (2 + f)].reshape(-1, n, f)
    out[:, 2 + 2 * n : 2 + n * (2 + f)] = feats[:, perm].reshape(-1, n * f)
    return out


def _trained_agent():
    """An agent whose head is not at its near-zero initialisation (so tilts differ)."""
    agent = make_agent("ppo", HP, D, N, "cpu", seed=1)
    with torch.no_grad():
        for key, p in agent.weights().items():
            if key.startswith("actor."):
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(5)) * 0.3)
    return agent


def _actor(agent, obs):
    """The policy's mean and log std ``(B, N)`` (the population of one, member 0)."""
    mean, log_std = agent.population._policy(obs.unsqueeze(0))
    return mean[0], log_std[0]


def _critic(agent, obs):
    return agent.population._value(obs.unsqueeze(0))[0]


def test_permuting_tickers_permutes_the_tilts_and_keeps_the_value():
    agent = _trained_agent()
    obs = torch.randn(7, D, generator=torch.Generator().manual_seed(0))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    mean, _ = _actor(agent, obs)
    mean_p, _ = _actor(agent, _permute(obs, perm))
    assert mean.abs().max() > 1e-2  # the check is not vacuous
    torch.testing.assert_close(mean_p, mean[:, perm], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(_critic(agent, _permute(obs, perm)), _critic(agent, obs))


def test_population_members_of_the_cross_sectional_policy_act_as_their_single_agents():
    hps = [{**HP, "learning_rate": 1e-3 * (i + 1)} for i in range(3)]
    pop = make_population("ppo", hps, D, N, "cpu", seeds=[4, 5, 6])
    obs = torch.randn(3 * 5, D, generator=torch.Generator().manual_seed(2))
    got = pop.act(obs, deterministic=True)
    for k, hp in enumerate(hps):
        single = make_agent("ppo", hp, D, N, "cpu", seed=4 + k)
        want = single.act(obs[5 * k : 5 * (k + 1)], deterministic=True)
        torch.testing.assert_close(got[5 * k : 5 * (k + 1)], want)


def test_an_unlisted_ticker_gets_no_tilt_and_no_say_in_the_others():
    agent = _trained_agent()
    obs = torch.randn(4, D, generator=torch.Generator().manual_seed(3))
    layout = TickerLayout(N, F, TAIL)
    listed = obs.clone()
    # All in cash (a weight token is N·w, so holdings would read differently in a smaller
    # universe); ticker 2 not listed: no holding, no price, no feature (what the env shows).
    listed[:, 2 : 2 + N] = 0.0
    listed[:, 2 + N + 2] = 0.0
    listed[:, 2 + 2 * N + 2 * F : 2 + 2 * N + 3 * F] = 0.0
    mean, _ = _actor(agent, listed)
    assert torch.equal(mean[:, 2], torch.zeros(4))
    # The others' tilts are what a 5-ticker universe without it gives (same weights: the
    # network's size does not depend on N).
    keep = [0, 1, 3, 4, 5]
    small = torch.cat(
        [
            listed[:, :2],
            listed[:, 2 : 2 + N][:, keep],
            listed[:, 2 + N : 2 + 2 * N][:, keep],
            listed[:, 2 + 2 * N : 2 + N * (2 + F)].reshape(4, N, F)[:, keep].reshape(4, -1),
            listed[:, 2 + N * (2 + F) :],
        ],
        dim=1,
    )
    five = make_agent("ppo", HP, small.shape[1], 5, "cpu", seed=1)
    with torch.no_grad():
        for key, value in agent.weights().items():
            five.weights()[key].copy_(value)
    torch.testing.assert_close(_actor(five, small)[0], mean[:, keep], rtol=1e-5, atol=1e-6)
    assert layout.split(listed)[2][:, 2].eq(0).all()


def test_a_ticker_before_its_listing_holds_no_weight(market):
    """End to end: an active-mode account driven by the cross-sectional policy never holds a
    ticker on the bars it is not tradable (the env masks it, the policy gives it no tilt)."""
    m = market.slice(0, 120)
    tradable = m.tradable.clone()
    tradable[:60, 1] = False
    m = dataclasses.replace(m, tradable=tradable)
    config = EnvConfig(action_mode="active", max_active_weight=0.2, active_budget=0.5)
    env = VecTradingEnv(m, config, num_envs=1, seed=0)
    hp = {**HP, "ticker_features": m.num_features}
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    with torch.no_grad():
        for key, p in agent.weights().items():
            if key.startswith("actor."):
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(5)) * 0.5)
    result = rollout(lambda o: agent.act(o, deterministic=True), m, config)
    held = result.holdings.iloc[:60, 1]
    assert (held == 0).all()
    assert (result.holdings.iloc[61:, 1] > 0).any()  # it trades once listed


def test_an_ambiguous_observation_asks_for_ticker_features():
    # 3 tickers: 2 + 3·(2 + 2) + 0 = 2 + 3·(2 + 1) + 3: two readings.
    with pytest.raises(FinpodError, match="ticker_features"):
        TickerLayout.infer(14, 3, None)
    assert TickerLayout.infer(14, 3, 2) == TickerLayout(3, 2, 0)
    assert TickerLayout.infer(2 + 20 * 13 + 1, 20, None) == TickerLayout(20, 11, 1)


def test_an_unknown_network_family_is_refused():
    with pytest.raises(FinpodError, match="net must be one of"):
        make_agent("ppo", {"net": "transformer"}, D, N)


@pytest.mark.parametrize(("mode", "net"), [("active", "cross_sectional"), ("weights", "mlp")])
def test_a_strategy_that_names_no_network_gets_the_cross_sectional_one_when_benchmark_relative(
    market, mode, net
):
    from finpod.agents import ALGORITHMS
    from finpod.agents.cross_section import hparams_for_env
    from finpod.agents.hparams import build_hparams

    env = VecTradingEnv(market.slice(0, 100), EnvConfig(action_mode=mode), num_envs=2)
    filled = dataclasses.asdict(build_hparams(ALGORITHMS["ppo"][0], {}))  # as a strategy holds
    hp = hparams_for_env(ALGORITHMS["ppo"][0], filled, env)
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim)
    assert (hp.get("net") or "mlp") == net
    encoder = any(k.startswith("actor.encoder.") for k in agent.state_dict())
    assert encoder == (net == "cross_sectional")


# ----- the off-policy learners use the same family -----------------------------------
OFF = {
    "net": "cross_sectional",
    "ticker_features": F,
    "actor_hidden": [16, 16],
    "critic_hidden": [16, 16],
    "learning_starts": 16,
    "batch_size": 16,
    "buffer_size": 256,
}


def _shaken(algo: str, seed: int = 1):
    """An off-policy agent whose networks are away from their near-zero initialisation."""
    agent = make_agent(algo, OFF, D, N, "cpu", seed=seed)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in agent.weights().values():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    return agent


@pytest.mark.parametrize("algo", ["sac", "td3", "ddpg"])
def test_off_policy_tilts_are_permutation_equivariant_and_q_invariant(algo):
    agent = _shaken(algo)
    obs = torch.randn(7, D, generator=torch.Generator().manual_seed(0))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    act = agent.act(obs, deterministic=True)
    act_p = agent.act(_permute(obs, perm), deterministic=True)
    assert act.abs().max() > 1e-2
    torch.testing.assert_close(act_p, act[:, perm], rtol=1e-5, atol=1e-6)
    pop = agent.population
    x, a = obs.unsqueeze(0), act.unsqueeze(0)
    q = pop._q("q1", x, a)
    q_p = pop._q("q1", _permute(obs, perm).unsqueeze(0), a[:, :, perm])
    torch.testing.assert_close(q_p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_an_unlisted_ticker_gets_no_deterministic_tilt_off_policy(algo):
    agent = _shaken(algo)
    obs = torch.randn(4, D, generator=torch.Generator().manual_seed(3))
    obs[:, 2 + 2] = obs[:, 2 + N + 2] = 0.0
    obs[:, 2 + 2 * N + 2 * F : 2 + 2 * N + 3 * F] = 0.0
    assert torch.equal(agent.act(obs, deterministic=True)[:, 2], torch.zeros(4))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_an_off_policy_cross_sectional_population_trains_and_exports_its_members(algo, market):
    """Three members of the cross-sectional family on a benchmark-relative env take
    gradient steps, and an exported member carries its trained (finite) weights."""
    m = market.slice(0, 120)
    config = EnvConfig(action_mode="active", max_active_weight=0.2, active_budget=0.5)
    hp = {**OFF, "ticker_features": m.num_features, "gradient_steps": 2}
    seeds = [4, 5, 6]
    pop_env = VecTradingEnv(m, config, num_envs=3 * 2, seed=0)
    pop = make_population(algo, [hp] * 3, pop_env.obs_dim, pop_env.action_dim, "cpu", seeds)
    pop.learn(pop_env, 48)
    assert int(pop.updates()[0]) > 0
    member = pop.export_member(1).state_dict()
    fresh = make_agent(algo, hp, pop_env.obs_dim, pop_env.action_dim, "cpu", seed=5)
    assert any(not torch.equal(member[k], v) for k, v in fresh.state_dict().items() if "." in k)
    for key, value in member.items():
        if key.startswith(("actor.encoder", "q1.head")):
            assert torch.isfinite(value).all(), key
