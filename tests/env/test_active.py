"""Benchmark-relative ("active") action mode: the reference, its bounds, its rewards."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from finpod.backtest.benchmarks import EqualWeightRebalanced, benchmark_config
from finpod.env import EnvConfig, VecTradingEnv, rollout
from finpod.env.core import active_targets
from finpod.env.execution import within_budget
from finpod.errors import FinpodError

from .markets import make_market


def zero_policy(n: int):
    return lambda obs: torch.zeros(obs.shape[0], n)


@pytest.mark.parametrize("start", ["cash", "reference"])
def test_zero_action_holds_the_equal_weight_portfolio_bar_for_bar(start):
    # Four names always tradable: the benchmark's float32 weights (1/4) are exact, so the
    # whole-share accounts must agree to the share and the cent.
    market = make_market(30, 4, seed=3)
    config = EnvConfig(action_mode="active", start=start, cost_rate=0.002, slippage=0.001)
    agent = rollout(zero_policy(4), market, config)
    bench = rollout(
        EqualWeightRebalanced(market, every="session"), market, benchmark_config(config)
    )
    pd.testing.assert_frame_equal(agent.holdings, bench.holdings)
    pd.testing.assert_series_equal(agent.returns, bench.returns)
    assert agent.holdings.iloc[0].gt(0).all() == (start == "reference")
    if start == "reference":  # invested from bar 0: equal dollars (to a share) per name
        dollars = agent.positions.iloc[0].drop("cash")
        assert (dollars.max() - dollars.min()) < market.close[0].max().item()


def test_zero_action_follows_the_point_in_time_universe():
    # Listings and untradable bars change the equal-weight universe bar by bar; fractional
    # shares so the benchmark's float32 weights (1/3) only differ in the 7th digit.
    market = make_market(30, 5, seed=4, listing=[0, 0, 6, 12, 0], untradable=0.1)
    config = EnvConfig(action_mode="active", integer_shares=False, start="reference")
    agent = rollout(zero_policy(5), market, config)
    bench = rollout(
        EqualWeightRebalanced(market, every="session"), market, benchmark_config(config)
    )
    np.testing.assert_allclose(agent.holdings, bench.holdings, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(agent.returns, bench.returns, rtol=0, atol=1e-9)
    assert (agent.holdings.iloc[:7, 2] == 0).all() and (agent.holdings.iloc[7:, 2] > 0).any()


@pytest.mark.parametrize(
    "controls",
    [
        {},
        {"no_trade_band": 0.02, "partial_adjustment": 0.5},
        {"decision_interval": 3, "band_target": "target", "no_trade_band": 0.01},
    ],
)
def test_active_reward_of_a_zero_action_is_zero_and_tracks_the_reference(controls):
    market = make_market(25, 3, seed=5)
    config = EnvConfig(
        action_mode="active", reward="active_log_return", start="reference", **controls
    )
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    env.reset()
    for _ in range(10):
        _, reward, *_ = env.step(torch.zeros(2, 3))
        assert torch.equal(reward, torch.zeros(2)), reward
        torch.testing.assert_close(env.state.ref_value, env.state.value, rtol=0, atol=0)


def test_active_reward_is_log_return_minus_the_reference_account_in_units_of_reward_scale():
    market = make_market(12, 3, seed=6)
    config = EnvConfig(
        action_mode="active", reward="active_log_return", max_active_weight=0.2, dtype="float64"
    )
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    action = torch.tensor([[1.0, -1.0, 0.0]])
    for _ in range(5):
        v0, r0 = env.state.value.clone(), env.state.ref_value.clone()
        _, reward, *_ = env.step(action)
        want = torch.log(env.state.value / v0) - torch.log(env.state.ref_value / r0)
        torch.testing.assert_close(reward.double(), 100.0 * want, rtol=1e-6, atol=1e-7)
    assert env.state.value.item() != env.state.ref_value.item()  # the tilt did something


# -- bounds ---------------------------------------------------------------------------------


@st.composite
def tilt_cases(draw):
    n = draw(st.integers(1, 8))
    e = 3
    a = draw(arrays(np.float64, (e, n), elements=st.floats(-1.0, 1.0), fill=st.nothing()))
    ok = draw(arrays(np.bool_, (e, n), elements=st.booleans(), fill=st.nothing()))
    raw = draw(arrays(np.float64, (e, n), elements=st.floats(0.0, 1.0), fill=st.nothing())) * ok
    total = draw(st.floats(0.5, 1.0))
    ref = raw / np.maximum(raw.sum(1, keepdims=True), 1e-9) * total
    config = EnvConfig(
        action_mode="active",
        max_active_weight=draw(st.sampled_from([0.0, 0.01, 0.05, 0.3, 1.0])),
        active_budget=draw(st.sampled_from([0.0, 0.02, 0.2, 1.0])),
        max_cash_weight=draw(st.sampled_from([0.0, 0.1, 1.0])),
    )
    return torch.tensor(a), torch.tensor(ref), torch.tensor(ok, dtype=torch.float64), config


@settings(max_examples=300, deadline=None)
@given(tilt_cases())
def test_active_targets_respect_every_bound(case):
    a, ref, ok, config = case
    w = active_targets(a.clone(), ref, ok, config)
    tol = 1e-9
    m, cash = config.max_active_weight, config.max_cash_weight
    assert (w >= -tol).all(), "long only"
    stock, ref_stock = w.sum(1), ref.sum(1)
    assert (stock <= ref_stock + tol).all(), "tilts are self-financing: no leverage"
    assert (ref_stock - stock <= cash * ref_stock + tol).all(), "cash only as a bounded tilt"
    assert ((w - ref).abs() <= m + cash * ref + tol).all(), "per-name active weight"
    share = 0.5 * ((w - ref).abs().sum(1) + (ref_stock - stock))
    assert (share <= config.active_budget + tol).all(), "active-risk budget"
    assert (w[ok == 0] <= ref[ok == 0] + tol).all(), "no tilt into ineligible names"
    assert torch.equal(active_targets(torch.zeros_like(a), ref, ok, config), ref)
    # Without a cash tilt or a binding budget the per-name bound is exactly ±m.
    free = replace(config, active_budget=1.0, max_cash_weight=0.0)
    w = active_targets(a.clone(), ref, ok, free)
    assert ((w - ref).abs() <= m + tol).all(), "per-name active weight, unconstrained budget"
    assert (w.sum(1) - ref.sum(1)).abs().max() <= tol, "self-financing"


def flat_market(bars: int, n: int, bar: str):
    """Prices constant over time (10 … 90 across names): with no costs and fractional
    shares a weight is exactly what was traded."""
    market = make_market(bars, n, num_features=1, seed=1, bar=bar)
    price = torch.tensor(np.linspace(10.0, 90.0, n), dtype=torch.float32).expand(bars, n)
    return replace(market, open=price.clone(), close=price.clone())


#: An active account on a flat market: starts at the reference, no costs, exact weights.
FLAT_ACTIVE = dict(
    action_mode="active", start="reference", cost_rate=0.0, integer_shares=False, dtype="float64"
)


@st.composite
def flat_price_scenarios(draw):
    # Constant prices, no costs, fractional shares: a weight is exactly what was traded,
    # so the realised holdings can be checked against the bounds at every bar.
    intraday = draw(st.booleans())
    n = draw(st.integers(2, 6))
    bars = 14 if intraday else draw(st.integers(4, 12))
    market = flat_market(bars, n, "30min" if intraday else "1d")
    schedule = draw(st.sampled_from(["every", "interval", "times"] if intraday else ["every"]))
    config = EnvConfig(
        **FLAT_ACTIVE,
        max_active_weight=draw(st.sampled_from([0.01, 0.05, 0.3])),
        active_budget=draw(st.sampled_from([0.05, 0.3, 1.0])),
        decision_interval=draw(st.integers(2, 4)) if schedule == "interval" else 1,
        decision_times=["10:00", "15:20"] if schedule == "times" else [],
        no_trade_band=draw(st.sampled_from([0.0, 0.005, 0.05])),
        band_target=draw(st.sampled_from(["edge", "target"])),
        partial_adjustment=draw(st.sampled_from([1.0, 0.5, 0.3])),
        turnover_penalty=draw(st.sampled_from([0.0, 0.01])),
        fill_price=draw(st.sampled_from(["open", "close"])),
    )
    actions = draw(
        arrays(
            np.float32, (bars - 1, 2, n), elements=st.floats(-1.0, 1.0, width=32), fill=st.nothing()
        )
    )
    return market, config, actions


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_price_scenarios())
def test_held_tilts_stay_inside_the_bounds_under_every_execution_control(scenario):
    market, config, actions = scenario
    n = market.num_stocks
    env = VecTradingEnv(market, config, num_envs=2, random_start=False)
    env.reset()
    ref = torch.full((n,), 1.0 / n, dtype=torch.float64)
    for a in actions:
        env.step(torch.from_numpy(a))
        w = env.state.position / env.state.value.unsqueeze(1)
        assert (w >= -1e-12).all()
        assert ((w - ref).abs() <= config.max_active_weight + 1e-9).all(), (w - ref).abs().max()
        # The active-risk budget, cash counted as one more position: ½(Σ|w − r| + |Σw − Σr|).
        active_share = 0.5 * ((w - ref).abs().sum(1) + (w - ref).sum(1).abs())
        assert (active_share <= config.active_budget + 1e-9).all(), active_share.max()
        assert (env.state.cash >= -1e-6).all()


def test_a_no_trade_band_never_holds_the_account_outside_its_active_budget():
    # A tilt to T004, then one from T004 to T003, with the band's edge as the target:
    # names inside the band keep their weight while the others trade all but a band's
    # width, and without the budget check on the weights the order leaves, the account
    # held an active share of 5.25 % against its 5 % budget after the second tilt.
    n, bars = 5, 14
    market = flat_market(bars, n, "30min")
    config = EnvConfig(
        **FLAT_ACTIVE,
        max_active_weight=0.3,
        active_budget=0.05,
        no_trade_band=0.005,
        band_target="edge",
    )
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    ref = torch.full((n,), 1.0 / n, dtype=torch.float64)
    actions = [[0.0] * 5] * 10 + [[0, 0, 0, 0, 1.0], [0, 0, 0, 0.5, -0.5], [0.0] * 5]
    shares = []
    for a in actions:
        env.step(torch.tensor([a]))
        w = env.state.position / env.state.value.unsqueeze(1)
        shares.append(float(0.5 * ((w - ref).abs().sum() + (w - ref).sum().abs())))
    assert max(shares) <= config.active_budget + 1e-9, shares
    assert shares[10] > 0.02  # the first tilt traded


def test_the_active_budget_counts_cash_from_a_cash_start_with_costs():
    # From cash, a zero action with partial adjustment 0.5 asks for half the reference:
    # an active share of ½(Σ|w − r| + |Σw − Σr|) = ½(0.5 + 0.5) = 0.5, cash being the other
    # half of it. The 5 % budget scales the active part to 0.1 of itself, so the first fill
    # invests exactly 95 % of the cash (costs come on top); a share that left cash out
    # (0.25) would scale to 0.2 and invest 90 %, an active share of 10 %.
    n = 4
    market = flat_market(8, n, "1d")
    config = EnvConfig(
        **{**FLAT_ACTIVE, "start": "cash", "cost_rate": 0.002},
        partial_adjustment=0.5,
        active_budget=0.05,
        max_active_weight=0.3,
    )
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    ref = torch.full((1, n), 1.0 / n, dtype=torch.float64)
    cash0 = float(config.initial_cash)
    shares = []
    for bar in range(6):
        env.step(torch.zeros(1, n))
        w = env.state.position / env.state.value.unsqueeze(1)
        active = w - ref
        shares.append(float(0.5 * (active.abs().sum() + active.sum().abs())))
        if bar == 0:
            invested = float(env.state.position.sum())
            assert invested == pytest.approx((1 - config.active_budget) * cash0, rel=1e-12)
            cost = cash0 - invested - float(env.state.cash)
            assert cost == pytest.approx(config.cost_rate * invested, rel=1e-9)
    assert max(shares) <= config.active_budget + 1e-12, shares
    assert shares[0] > 0.048  # the budget binds: 5 % before the cost, 4.82 % after
    assert all(b < a for a, b in zip(shares, shares[1:], strict=False)), shares  # converges
    # The same bound on within_budget itself, cash counted as a position.
    w = within_budget(0.5 * ref, ref, 0.05)
    torch.testing.assert_close(w, 0.95 * ref, rtol=0, atol=1e-15)


# -- reference files and settings -----------------------------------------------------------


def write_reference(tmp_path, rows: dict, name="ref.csv", **columns) -> str:
    frame = pd.DataFrame({"date": list(rows), **columns})
    path = tmp_path / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return str(path)


@pytest.mark.parametrize("name", ["ref.csv", "ref.parquet"])
def test_zero_action_holds_a_reference_file_as_of_each_bar(tmp_path, name):
    market = make_market(12, 3, seed=7)
    dates = ["2019-12-31", "2020-01-08"]
    path = write_reference(
        tmp_path, dict.fromkeys(dates), name, T000=[0.5, 0.0], T001=[0.5, 0.2], T002=[0.0, 0.7]
    )
    config = EnvConfig(
        action_mode="active", reference=path, start="reference", integer_shares=False
    )
    out = rollout(zero_policy(3), market, config)
    weights = out.positions.div(out.account_value, axis=0)
    early = weights.loc[:"2020-01-07"]
    late = weights.loc["2020-01-09":]  # filled at the bar after the row applies
    np.testing.assert_allclose(early[["T000", "T001", "T002"]].iloc[0], [0.5, 0.5, 0.0], atol=1e-9)
    np.testing.assert_allclose(late[["T000", "T001", "T002"]].iloc[-1], [0.0, 0.2, 0.7], atol=0.02)
    assert late["cash"].iloc[-1] == pytest.approx(0.1, abs=0.02)


@pytest.mark.parametrize(
    ("columns", "dates", "message"),
    [
        ({"T000": [0.5], "ZZZ": [0.1]}, ["2019-01-01"], "not in the dataset"),
        ({"T000": [-0.1]}, ["2019-01-01"], "negative"),
        ({"T000": [0.7], "T001": [0.7]}, ["2019-01-01"], "sum to"),
        ({"T000": [None]}, ["2019-01-01"], "empty"),
        ({"T000": [0.5]}, ["2021-01-01"], "starts at"),
    ],
)
def test_bad_reference_files_fail_in_one_line(tmp_path, columns, dates, message):
    market = make_market(6, 3, seed=8)
    path = write_reference(tmp_path, dict.fromkeys(dates), **columns)
    with pytest.raises(FinpodError, match=message) as err:
        VecTradingEnv(market, EnvConfig(action_mode="active", reference=path))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("action_mode", "tilt"),
        ("start", "invested"),
        ("reference", "ew"),
        ("max_active_weight", 1.5),
        ("active_budget", -0.1),
        ("max_cash_weight", "a lot"),
    ],
)
def test_bad_active_settings_are_refused_naming_the_key(key, value):
    with pytest.raises(FinpodError, match=key.split("_")[0]):
        EnvConfig(**{key: value})


@pytest.mark.slow
def test_compiled_active_step_matches_eager():
    market = make_market(16, 4, num_features=1, seed=9, bar="30min")
    config = EnvConfig(
        action_mode="active",
        reward="active_log_return",
        start="reference",
        no_trade_band=0.01,
        partial_adjustment=0.5,
        flat_at_close=True,
        max_cash_weight=0.2,
        episode_length=6,
    )
    eager = VecTradingEnv(market, config, num_envs=4, seed=0)
    compiled = VecTradingEnv(market, config, num_envs=4, seed=0, compile=True)
    torch.testing.assert_close(eager.reset(), compiled.reset())
    gen = torch.Generator().manual_seed(0)
    for _ in range(12):
        action = torch.rand(4, 4, generator=gen) * 2 - 1
        oe, re, *_, ie = eager.step(action)
        oc, rc, *_, ic = compiled.step(action)
        torch.testing.assert_close(oc, oe, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(rc, re, rtol=1e-4, atol=1e-4)
        assert torch.equal(ic["holdings"], ie["holdings"])
    assert compiled._step_fn is not eager._step_fn
