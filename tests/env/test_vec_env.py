"""Episodes, seeding, auto-reset, observation slices, rewards and input errors."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from finpod.env import EnvConfig, ObsLayout, VecTradingEnv
from finpod.errors import FinpodError

from .markets import make_market, reference_price_z


def run(env, actions):
    out = []
    for action in actions:
        out.append(env.step(action))
    return out


def test_same_seed_same_episodes_other_seed_other_starts():
    market = make_market(60, 3)
    config = EnvConfig(episode_length=10)
    actions = [torch.rand(8, 3) * 2 - 1 for _ in range(25)]
    a = VecTradingEnv(market, config, num_envs=8, seed=1)
    b = VecTradingEnv(market, config, num_envs=8, seed=1)
    c = VecTradingEnv(market, config, num_envs=8, seed=2)
    assert torch.equal(a.reset(), b.reset())
    for (oa, ra, *_), (ob, rb, *_) in zip(run(a, actions), run(b, actions), strict=True):
        assert torch.equal(oa, ob) and torch.equal(ra, rb)
    c.reset()
    assert not torch.equal(a.reset(seed=7), c.reset(seed=8))
    assert torch.equal(a.reset(seed=7), c.reset(seed=7))


def test_random_starts_stay_inside_the_split_and_episodes_have_fixed_length():
    market = make_market(30, 2)
    config = EnvConfig(episode_length=12)
    env = VecTradingEnv(market, config, num_envs=64, seed=0)
    env.reset()
    starts = env.state.t.clone()
    assert starts.min() >= 0 and starts.max() <= 30 - 1 - 12
    assert len(set(starts.tolist())) > 5  # random, not all the same window
    for step in range(12):
        obs, _, terminated, truncated, info = env.step(torch.zeros(64, 2))
        assert not terminated.any()
        assert truncated.all() == (step == 11)
    assert torch.equal(info["bar"], starts + 12)
    # Auto-reset: fresh accounts now, the final observation kept the old bar's features.
    layout = env.layout
    assert torch.all(obs[:, layout.cash] == 1.0)
    assert not torch.equal(obs, info["final_obs"])


def test_evaluation_episodes_cover_the_whole_split():
    market = make_market(15, 2)
    env = VecTradingEnv(market, EnvConfig(), num_envs=3, random_start=False)
    env.reset()
    assert env.state.t.tolist() == [0, 0, 0]
    results = run(env, [torch.zeros(3, 2)] * 14)
    assert [bool(r[3].all()) for r in results] == [False] * 13 + [True]


def test_observation_slices_are_what_the_layout_says():
    market = make_market(10, 3, num_features=2, listing=[0, 4, 0])
    config = EnvConfig(dtype="float64", fill_price="close")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    obs, _, _, _, info = env.step(torch.tensor([[0.7, 0.7, 0.2]]))
    layout = ObsLayout(3, 2)
    assert obs.shape == (1, layout.obs_dim) == (1, env.obs_dim)
    value = info["account_value"][0]
    close = market.close.double()
    assert obs[0, layout.value].item() == pytest.approx(math.log(value / config.initial_cash))
    assert obs[0, layout.cash].item() == pytest.approx(float(info["cash"][0] / value))
    weights = info["holdings"][0] * close[1] / value
    torch.testing.assert_close(obs[0, layout.holdings].double(), weights, rtol=1e-6, atol=1e-7)
    prices = obs[0, layout.prices]
    assert prices[1] == 0.0  # ticker 1 lists at bar 4: no price yet, not a price of 0
    # Stationary z-score of the price against its trailing mean, not log(p / first p).
    want = reference_price_z(close.numpy(), 1, 0)
    assert prices[0].item() == pytest.approx(want, rel=1e-5)
    torch.testing.assert_close(obs[0, layout.features], market.features[1].flatten())
    assert torch.isfinite(obs).all()


@pytest.mark.parametrize("reward", ["value_change", "log_return"])
def test_reward_is_the_scaled_change_of_account_value(reward):
    market = make_market(12, 3)
    config = EnvConfig(reward=reward, reward_scale=50.0, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=4, random_start=False)
    env.reset()
    before = torch.full((4,), config.initial_cash, dtype=torch.float64)
    for _ in range(8):
        _, r, _, _, info = env.step(torch.rand(4, 3) * 2 - 1)
        after = info["account_value"]
        if reward == "value_change":
            want = 50.0 * (after - before) / config.initial_cash
        else:
            want = 50.0 * torch.log(after / before)
        torch.testing.assert_close(r.double(), want, rtol=1e-5, atol=1e-6)
        before = after


def test_risk_adjusted_rewards_penalize_what_they_should():
    market = make_market(40, 3, seed=12)
    actions = [torch.rand(2, 3) * 2 - 1 for _ in range(39)]
    plain = VecTradingEnv(market, EnvConfig(), num_envs=2, random_start=False)
    dd = VecTradingEnv(market, EnvConfig(reward="drawdown_penalty"), num_envs=2, random_start=False)
    dsr = VecTradingEnv(
        market, EnvConfig(reward="differential_sharpe"), num_envs=2, random_start=False
    )
    for env in (plain, dd, dsr):
        env.reset()
    penalized = False
    for action in actions:
        _, r_plain, _, _, info = plain.step(action)
        _, r_dd, _, _, _ = dd.step(action)
        _, r_dsr, _, _, _ = dsr.step(action)
        assert torch.all(r_dd <= r_plain + 1e-6)  # a drawdown only ever costs
        penalized |= bool((r_dd < r_plain - 1e-6).any())
        assert torch.isfinite(r_dsr).all()
    assert penalized


def test_bankrupt_account_terminates_and_resets_alone():
    market = make_market(8, 1, seed=1)
    close = market.close.clone()
    open_ = market.open.clone()
    close[2:] *= 100.0  # the shorted stock explodes
    open_[2:] *= 100.0
    market = replace(market, close=close, open=open_)
    config = EnvConfig(initial_cash=1_000.0, allow_short=True, allow_negative_cash=True)
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    env.reset()
    env.step(torch.tensor([[-1.0], [0.0]]))  # env 0 shorts 100 shares
    obs, _, terminated, truncated, info = env.step(torch.zeros(2, 1))
    assert terminated.tolist() == [True, False] and not truncated.any()
    assert info["account_value"][0] < 0
    assert obs[0, env.layout.cash].item() == 1.0  # env 0 starts over
    assert torch.equal(obs[1], info["final_obs"][1])  # env 1 goes on
    assert env.state.t.tolist() == [0, 2]


def test_bad_inputs_raise_readable_errors(market):
    with pytest.raises(FinpodError, match="episode_length"):
        VecTradingEnv(market, EnvConfig(episode_length=500))
    with pytest.raises(FinpodError, match="fill_price"):
        EnvConfig(fill_price="vwap")
    with pytest.raises(FinpodError, match="cost_rate"):
        EnvConfig(cost_rate=-0.1)
    with pytest.raises(FinpodError, match="nonsense"):
        EnvConfig.from_dict({"nonsense": 1})
    env = VecTradingEnv(market, EnvConfig(), num_envs=2)
    with pytest.raises(FinpodError, match="reset"):
        env.step(torch.zeros(2, 3))
    env.reset()
    with pytest.raises(FinpodError, match="shape"):
        env.step(torch.zeros(3, 3))
    with pytest.raises(FinpodError, match="at least 2"):
        VecTradingEnv(market.slice(0, 1), EnvConfig())


def test_env_config_round_trips_through_a_dict():
    config = EnvConfig(action_mode="weights", cost_rate=0.001, episode_length=50)
    assert EnvConfig.from_dict(config.to_dict()) == config


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("action_mode", ["shares", "weights", "active"])
def test_cpu_and_cuda_give_identical_results(action_mode):
    market = make_market(50, 5, num_features=3, listing=[0, 0, 10, 0, 30], untradable=0.1)
    config = EnvConfig(action_mode=action_mode, episode_length=20, dtype="float64")
    if action_mode == "active":  # with the reference account and an invested start
        config = EnvConfig(
            action_mode="active",
            episode_length=20,
            dtype="float64",
            reward="active_log_return",
            start="reference",
            max_active_weight=0.1,
        )
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(16, 5, generator=gen) * 2 - 1 for _ in range(45)]
    cpu = VecTradingEnv(market, config, num_envs=16, seed=3)
    gpu = VecTradingEnv(market.to("cuda"), config, num_envs=16, seed=3)
    torch.testing.assert_close(cpu.reset(), gpu.reset().cpu(), rtol=0, atol=0)
    for action in actions:
        oc, rc, tc, uc, ic = cpu.step(action)
        og, rg, tg, ug, ig = gpu.step(action.cuda())
        torch.testing.assert_close(og.cpu(), oc, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(rg.cpu(), rc, rtol=1e-6, atol=1e-6)
        assert torch.equal(tg.cpu(), tc) and torch.equal(ug.cpu(), uc)
        assert torch.equal(ig["holdings"].cpu(), ic["holdings"])  # whole shares: exact
        torch.testing.assert_close(ig["cash"].cpu(), ic["cash"], rtol=1e-12, atol=1e-9)


@pytest.mark.slow
def test_compiled_step_matches_eager():
    market = make_market(30, 4, num_features=2)
    config = EnvConfig(episode_length=10)
    eager = VecTradingEnv(market, config, num_envs=8, seed=0)
    compiled = VecTradingEnv(market, config, num_envs=8, seed=0, compile=True)
    torch.testing.assert_close(eager.reset(), compiled.reset())
    for _ in range(15):
        action = torch.rand(8, 4) * 2 - 1
        oe, re, *_, ie = eager.step(action)
        oc, rc, *_, ic = compiled.step(action)
        torch.testing.assert_close(oc, oe, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(rc, re, rtol=1e-4, atol=1e-4)
        assert torch.equal(ic["holdings"], ie["holdings"])
    assert compiled._step_fn is not eager._step_fn  # still compiled: no silent fallback


def test_prices_on_non_tradable_bars_are_never_used():
    market = make_market(8, 2, seed=3)
    close, open_, tradable = market.close.clone(), market.open.clone(), market.tradable.clone()
    close[3, 0] = open_[3, 0] = 1e6  # a bogus print on a bar the cleaner flagged
    tradable[3, 0] = False
    market = replace(market, close=close, open=open_, tradable=tradable)
    env = VecTradingEnv(market, EnvConfig(dtype="float64"), num_envs=1, random_start=False)
    env.reset()
    for _ in range(3):
        obs, _, _, _, info = env.step(torch.tensor([[0.5, 0.5]]))
    assert int(info["bar"][0]) == 3
    assert info["trade"][0, 0] == 0.0  # no fill on the flagged bar
    held = info["holdings"][0].double()
    marked = held[0] * close[2, 0].double() + held[1] * close[3, 1].double()
    assert float(info["account_value"][0]) == pytest.approx(float(info["cash"][0] + marked))
    marks = close.double().numpy().copy()
    marks[3, 0] = marks[2, 0]  # the mark carries the last tradable close
    want = reference_price_z(marks, 3, 0)
    assert obs[0, env.layout.prices][0].item() == pytest.approx(want, rel=1e-4, abs=1e-6)


def test_nan_or_out_of_range_actions_cannot_corrupt_the_account(market):
    env = VecTradingEnv(market, EnvConfig(dtype="float64"), num_envs=1, random_start=False)
    env.reset()
    action = torch.tensor([[float("nan"), 5.0, -float("inf")]])
    obs, reward, _, _, info = env.step(action)
    assert info["trade"][0].tolist() == [0.0, 100.0, 0.0]  # NaN: no trade; 5 → clipped to 1
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
