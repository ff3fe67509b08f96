"""Under square-root costs the agent sees what trading each name costs for an account of
its current value, from past bars."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.core import account_state, observe, observe_functional, transition
from finpod.env.diagnostics import observation_stats
from finpod.env.ensemble import EnsemblePolicy, Member
from finpod.env.impact import IMPACT_FEATURE_SPAN
from finpod.env.tables import ObsLayout, build_tables
from finpod.paper.decide import RunAgent, decide

from .markets import make_market
from .test_impact import with_volume

SQRT = EnvConfig(cost_model="sqrt", impact_coefficient=1.0)
CPU = torch.device("cpu")


def impact_column(market, config: EnvConfig) -> np.ndarray:
    """(T, N) the last per-ticker column of the observation's features slice."""
    layout = ObsLayout.for_env(market, config)
    n, f = layout.num_stocks, layout.num_features
    static = build_tables(market, config, CPU).static_obs  # [prices (N), features (N·F), …]
    return static[:, n : n + n * f].reshape(-1, n, f)[..., -1].numpy()


def obs_impact(market, config: EnvConfig, obs: torch.Tensor) -> np.ndarray:
    """(E, N) the ``impact`` columns of observations ``obs`` (E, obs_dim)."""
    layout = ObsLayout.for_env(market, config)
    n, f = layout.num_stocks, layout.num_features
    return obs[:, layout.features].reshape(-1, n, f)[..., -1].double().numpy()


def accounts(market, config: EnvConfig, t: int, scale: list[float]):
    """(tables, state) of accounts at bar ``t`` holding 10 shares of each name and $30,000,
    each row times its ``scale``."""
    tables = build_tables(market, config, CPU)
    k = torch.tensor(scale, dtype=torch.float64)
    holdings = 10.0 * k.unsqueeze(1).expand(-1, market.num_stocks)
    state = account_state(torch.full((len(scale),), t), 30_000.0 * k, holdings, tables)
    return tables, state


def spread_market(bars: int = 40):
    # Shares traded per bar spread 10,000× across three names.
    market = make_market(num_bars=bars, num_stocks=3)
    return with_volume(market, np.tile([1e7, 1e5, 1e3], (bars, 1)))


def thinner_and_dearer_after(market, t: int):
    """``market`` with the bars after ``t`` changed: 1,000× less volume, prices × 1.5."""
    volume = market.volume.clone()
    volume[t + 1 :] *= 1e-3
    close = market.close.clone()
    close[t + 1 :] *= 1.5
    return replace(market, volume=volume, close=close)


def test_under_square_root_costs_each_ticker_observes_what_trading_it_costs():
    market = spread_market()
    linear = ObsLayout.for_env(market, EnvConfig())
    sqrt = ObsLayout.for_env(market, SQRT)
    assert sqrt.num_features == linear.num_features + 1
    assert sqrt.obs_dim == linear.obs_dim + market.num_stocks
    col = impact_column(market, SQRT)[5:]
    # The thinner the name, the higher it reads.
    assert np.all(col[:, 2] > col[:, 1]) and np.all(col[:, 1] > col[:, 0])
    assert "feature:impact" in observation_stats(market, SQRT).index


def test_a_larger_starting_account_reads_a_higher_cost_in_the_same_name():
    market = spread_market()
    small = impact_column(market, SQRT)[5:]
    big = impact_column(market, replace(SQRT, initial_cash=100_000_000.0))[5:]
    assert np.allclose(big - small, 1 / 1.5, atol=1e-4)  # √100 = 10× the fraction


def test_the_impact_observation_at_t_uses_no_bar_after_t():
    market = spread_market()
    t = 25
    later = thinner_and_dearer_after(market, t)
    a, b = impact_column(market, SQRT), impact_column(later, SQRT)
    assert np.array_equal(a[: t + 1], b[: t + 1])
    assert not np.allclose(a[t + 2 :], b[t + 2 :])


def test_two_accounts_100x_apart_at_the_same_bar_read_half_log10_100_apart():
    market = spread_market()
    tables, state = accounts(market, SQRT, 20, [1.0, 100.0])
    assert torch.allclose(state.value[1] / state.value[0], torch.tensor(100.0, dtype=torch.float64))
    for obs in (observe(state, tables, SQRT), observe_functional(state, tables, SQRT)):
        small, big = obs_impact(market, SQRT, obs)
        assert np.all(np.abs(big) < 2.0) and np.all(np.abs(small) < 2.0)  # not clipped
        np.testing.assert_allclose(
            big - small, 0.5 * np.log10(100.0) / IMPACT_FEATURE_SPAN, atol=1e-5
        )


def test_the_impact_observation_prices_the_accounts_value_not_its_starting_cash():
    market = spread_market()

    def seen(config: EnvConfig, scale: float = 1.0) -> np.ndarray:
        tables, state = accounts(market, config, 20, [scale])
        return obs_impact(market, config, observe(state, tables, config))[0]

    # log10(rate · √V) whatever initial_cash: the same account under two starting sizes.
    np.testing.assert_allclose(seen(SQRT), seen(replace(SQRT, initial_cash=5e4)), atol=1e-5)
    # An account worth its starting cash reads the bar's table.
    value = float(accounts(market, SQRT, 20, [1.0])[1].value[0])
    np.testing.assert_allclose(
        seen(SQRT), impact_column(market, replace(SQRT, initial_cash=value))[20], atol=1e-5
    )
    # A large enough account reads the cap.
    assert np.all(seen(SQRT, 1e9) == 2.0)


def test_an_env_observation_at_t_uses_no_bar_after_t():
    # The account's value moves the impact columns; bars after t move neither.
    market = spread_market()
    t = 25
    later = thinner_and_dearer_after(market, t)
    action = torch.tensor([[0.6, 0.3, 0.1]])
    seen = []
    for m in (market, later):
        env = VecTradingEnv(m, replace(SQRT, action_mode="weights"), random_start=False)
        obs = [env.reset()]
        for _ in range(t + 2):
            obs.append(env.step(action)[0])
        seen.append(torch.cat(obs))
    a, b = seen
    assert torch.equal(a[: t + 1], b[: t + 1])
    assert not np.allclose(
        obs_impact(market, SQRT, a[t + 2 :]), obs_impact(market, SQRT, b[t + 2 :])
    )
    # The account grew or shrank from its start, and the columns read its value.
    level = build_tables(market, SQRT, CPU).impact_level[: t + 1].double().numpy()
    shift = a[: t + 1, :1].double().numpy() * 0.5 / (np.log(10.0) * IMPACT_FEATURE_SPAN)
    assert np.abs(shift).max() > 1e-3
    np.testing.assert_allclose(obs_impact(market, SQRT, a[: t + 1]), level + shift, atol=1e-5)


def test_under_linear_costs_the_account_value_changes_no_feature():
    market = spread_market()
    linear = EnvConfig()
    tables, state = accounts(market, linear, 20, [1.0, 100.0])
    assert tables.impact_level is None and tables.impact_columns is None
    n = market.num_stocks
    for obs in (observe(state, tables, linear), observe_functional(state, tables, linear)):
        assert torch.equal(obs[:, 2 + n :], tables.static_obs[[20, 20]])


def test_an_ensemble_member_reads_the_impact_of_the_shared_accounts_value():
    market = spread_market()
    seen = []

    def member(obs):
        seen.append(obs.clone())
        return torch.ones((obs.shape[0], market.num_stocks))

    config = replace(SQRT, action_mode="weights")
    # The member's own starting cash differs from the ensemble account's.
    members = [Member(member, config), Member(member, replace(config, initial_cash=5e4))]
    policy = EnsemblePolicy(members, market)
    tables, state = accounts(market, policy.config, 20, [1.0, 100.0])
    policy.bar = 20
    policy(observe(state, tables, policy.config))
    want = obs_impact(market, config, observe(state, tables, config))
    for obs in seen:
        np.testing.assert_allclose(obs_impact(market, config, obs), want, atol=1e-5)


def test_paper_trading_observes_the_impact_of_the_live_accounts_value():
    market = spread_market()
    agent = RunAgent(
        "run",
        "best",
        ["p"],
        replace(SQRT, action_mode="weights"),
        list(market.tickers),
        "1d",
        "XNYS",
        lambda obs: torch.zeros((obs.shape[0], market.num_stocks)),
    )
    window = market.slice(0, 21)  # the live window ends at the decision bar
    shares = torch.full((market.num_stocks,), 10.0)
    small = decide(agent, window, 30_000.0, shares, start_value=1e6)
    big = decide(agent, window, 3_000_000.0, shares * 100.0, start_value=1e6)
    same = decide(agent, window, 3_000_000.0, shares * 100.0, start_value=3e4)
    a, b, c = (obs_impact(market, SQRT, d.observation.unsqueeze(0))[0] for d in (small, big, same))
    np.testing.assert_allclose(b - a, 0.5 * np.log10(100.0) / IMPACT_FEATURE_SPAN, atol=1e-5)
    np.testing.assert_allclose(b, c, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_account_sized_impact_observation_is_the_same_on_cuda():
    market = spread_market()
    tables, state = accounts(market, SQRT, 20, [0.01, 1.0, 100.0])
    cpu = observe(state, tables, SQRT)
    cuda = torch.device("cuda")
    gpu_tables = build_tables(market, SQRT, cuda)
    gpu_state = type(state)(*[x.to(cuda) for x in state])
    torch.testing.assert_close(observe(gpu_state, gpu_tables, SQRT).cpu(), cpu)


def test_paper_orders_under_square_root_costs_are_the_envs_filled_at_the_decision_close():
    # The env's step from bar 20 on a market whose bar 21 closes where bar 20 did: the
    # order is sent at bar 20 and pays the impact rate of bars ≤ 20.
    market = spread_market(22)
    close = market.close.clone()
    close[21] = close[20]
    market = replace(market, close=close)
    config = replace(
        SQRT,
        action_mode="weights",
        fill_price="close",
        initial_cash=1e5,
        integer_shares=False,
        dtype="float64",
    )
    tables = build_tables(market, config, CPU)
    # All in the thinnest name, to be sold for the two others: the buys spend the
    # proceeds net of costs, so the impact rate sets their size.
    shares = torch.tensor([[0.0, 0.0, 4000.0]], dtype=torch.float64)
    cash = torch.tensor([1000.0], dtype=torch.float64)
    state = account_state(torch.tensor([20]), cash, shares, tables)
    action = torch.tensor([[0.1, 0.9, 0.0]])
    _, step = transition(state, action, tables, config)
    agent = RunAgent(
        "run", "best", ["p"], config, list(market.tickers), "1d", "XNYS", lambda obs: action
    )
    paper = decide(agent, market.slice(0, 21), 1000.0, shares[0], start_value=1e5)
    assert float(step.impact[0]) > 100.0
    torch.testing.assert_close(paper.trade, step.trade[0], rtol=0, atol=1e-9)
