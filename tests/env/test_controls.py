"""Execution controls: decision schedule, no-trade band, partial adjustment, turnover
penalty, flat-at-close, calendar observation, and their settings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from finpod.env import EnvConfig, ObsLayout, VecTradingEnv
from finpod.errors import FinpodError

from .markets import make_market, session_positions
from .test_accounting import reference_marks

#: 30-minute bars of 2020-11-24, 11-25 (13 bars each), 11-27 (half day: 7 bars), 11-30.
INTRADAY_BARS = 46


def intraday(num_stocks: int = 3, seed: int = 0, **kw):
    return make_market(INTRADAY_BARS, num_stocks, num_features=1, seed=seed, bar="30min", **kw)


def run(env, actions):
    """info of every step (host copies) with the observation the step was decided on."""
    obs = env.reset()
    out = []
    for action in actions:
        before = {"obs": obs, "holdings": env.state.holdings.clone(), "value": env.state.value}
        before["mark"] = env.state.mark.clone()
        obs, reward, _, _, info = env.step(action)
        out.append({**info, "reward": reward, "before": before})
    return out


# -- settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("decision_interval", 0),
        ("decision_interval", 1.5),
        ("decision_times", "09:35"),
        ("decision_times", ["9:75"]),
        ("decision_times", ["08:00"]),
        ("no_trade_band", -0.1),
        ("no_trade_band", 1.0),
        ("band_target", "middle"),
        ("partial_adjustment", 0.0),
        ("partial_adjustment", 1.5),
        ("turnover_penalty", -1.0),
        ("flat_at_close", "yes"),
        ("calendar_features", "auto"),
        ("price_window", 1),
    ],
)
def test_bad_control_values_are_refused_naming_the_key(key, value):
    with pytest.raises(FinpodError, match=key):
        EnvConfig(**{key: value})


def test_times_and_interval_cannot_be_combined():
    with pytest.raises(FinpodError, match="decision_times"):
        EnvConfig(decision_times=["10:00"], decision_interval=5)


def test_settings_round_trip_and_old_settings_load_with_controls_off():
    config = EnvConfig(
        decision_times=["15:50", "09:35"],
        no_trade_band=0.05,
        band_target="target",
        partial_adjustment=0.5,
        turnover_penalty=0.001,
        flat_at_close=True,
        calendar_features=True,
        price_window=30,
    )
    assert EnvConfig.from_dict(config.to_dict()) == config
    old = {"cost_rate": 0.001, "action_mode": "weights", "episode_length": 100}
    loaded = EnvConfig.from_dict(old)
    assert loaded.decision_interval == 1 and loaded.decision_times == []
    assert loaded.no_trade_band == 0.0 and loaded.partial_adjustment == 1.0
    assert loaded.turnover_penalty == 0.0 and loaded.flat_at_close is False
    assert not loaded.has_schedule
    assert loaded == EnvConfig(cost_rate=0.001, action_mode="weights", episode_length=100)


@pytest.mark.parametrize(
    "settings_",
    [{"flat_at_close": True}, {"decision_times": ["10:00"]}, {"calendar_features": True}],
)
def test_intraday_only_controls_refuse_daily_bars(settings_):
    with pytest.raises(FinpodError, match=next(iter(settings_))):
        VecTradingEnv(make_market(10, 2), EnvConfig(**settings_))


def test_obs_layout_grows_by_calendar_and_schedule_only_when_on():
    daily, bars30 = make_market(10, 2), intraday(2)
    assert VecTradingEnv(daily, EnvConfig()).obs_dim == ObsLayout(2, 2).obs_dim
    env = VecTradingEnv(bars30, EnvConfig())
    assert env.layout == ObsLayout(2, 1, calendar=3, schedule=0)
    env = VecTradingEnv(bars30, EnvConfig(decision_interval=2, calendar_features=False))
    assert env.layout == ObsLayout(2, 1, calendar=0, schedule=1)
    assert env.obs_dim == ObsLayout(2, 1).obs_dim + 1


# -- accounting under every control ------------------------------------------------------


@st.composite
def controlled(draw):
    is_intraday = draw(st.booleans())
    num_stocks = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 10_000))
    if is_intraday:
        market = intraday(num_stocks, seed=seed, untradable=draw(st.sampled_from([0.0, 0.2])))
    else:
        market = make_market(
            draw(st.integers(4, 12)),
            num_stocks,
            num_features=1,
            seed=seed,
            untradable=draw(st.sampled_from([0.0, 0.2])),
        )
    t, n = market.num_bars, num_stocks
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        market = replace(market, buyable=torch.tensor(rng.random((t, n)) > 0.3))
    if draw(st.booleans()):
        gone = np.zeros((t, n), dtype=bool)
        j = int(rng.integers(n))
        gone[int(rng.integers(1, t)) :, j] = True
        tradable = market.tradable & ~torch.tensor(gone)
        market = replace(market, delisted=torch.tensor(gone), tradable=tradable)
    schedule = draw(
        st.sampled_from(["every", "interval", "times"] if is_intraday else ["every", "interval"])
    )
    config = EnvConfig(
        initial_cash=draw(st.sampled_from([2_000.0, 1_000_000.0])),
        action_mode=draw(st.sampled_from(["shares", "weights", "active"])),
        max_active_weight=draw(st.sampled_from([0.05, 0.5])),
        max_cash_weight=draw(st.sampled_from([0.0, 0.3])),
        max_shares=draw(st.sampled_from([1, 100])),
        fill_price=draw(st.sampled_from(["open", "close"])),
        cost_rate=draw(st.sampled_from([0.0, 0.002])),
        slippage=draw(st.sampled_from([0.0, 0.001])),
        integer_shares=draw(st.booleans()),
        decision_interval=draw(st.integers(2, 5)) if schedule == "interval" else 1,
        decision_times=["10:00", "15:20"] if schedule == "times" else [],
        no_trade_band=draw(st.sampled_from([0.0, 0.02, 0.2])),
        band_target=draw(st.sampled_from(["edge", "target"])),
        partial_adjustment=draw(st.sampled_from([1.0, 0.5, 0.3])),
        turnover_penalty=draw(st.sampled_from([0.0, 0.01])),
        flat_at_close=is_intraday and draw(st.booleans()),
        dtype="float64",
    )
    actions = draw(arrays(np.float32, (t - 1, 2, n), elements=st.floats(-1.0, 1.0, width=32)))
    return market, config, actions


def expected_decisions(market, config) -> tuple[np.ndarray, np.ndarray]:
    """(T,) bool: bars whose order is executed, bars where the env goes flat (by hand)."""
    t = market.num_bars
    if market.bar == "1d":
        return np.arange(t) % config.decision_interval == 0, np.zeros(t, dtype=bool)
    index, left = session_positions(market)
    end = np.array([(s.hour * 60 + s.minute + 30) for s in market.timestamps])
    if config.decision_times:
        decide = np.zeros(t, dtype=bool)
        for text in config.decision_times:
            hh, mm = map(int, text.split(":"))
            decide |= (end >= hh * 60 + mm) & (end - 30 < hh * 60 + mm)
    else:
        decide = index % config.decision_interval == 0
    flat = (left <= 1) if config.flat_at_close else np.zeros(t, dtype=bool)
    return decide | flat, flat


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(controlled())
def test_accounts_stay_consistent_under_every_control(scenario):
    market, config, actions = scenario
    env = VecTradingEnv(market, config, num_envs=2, seed=0, random_start=False)
    steps = run(env, [torch.from_numpy(a) for a in actions])
    marks = reference_marks(market.close.double().numpy(), market.tradable.numpy())
    base = (market.open if config.fill_price == "open" else market.close).double().numpy()
    tradable = market.tradable.numpy()
    buyable = None if market.buyable is None else market.buyable.numpy()
    delisted = None if market.delisted is None else market.delisted.numpy()
    execute, flat = expected_decisions(market, config)
    cash = np.full(2, config.initial_cash)
    holdings = np.zeros((2, market.num_stocks))
    value = cash.copy()
    for t, info in enumerate(steps):
        new_cash, new_holdings = info["cash"].numpy(), info["holdings"].numpy()
        trade, new_value = info["trade"].numpy(), info["account_value"].numpy()
        assert (new_cash >= 0).all() and (new_holdings >= -1e-12).all()
        np.testing.assert_allclose(new_holdings - holdings, trade, atol=1e-9)
        np.testing.assert_allclose(new_value, new_cash + new_holdings @ marks[t + 1], rtol=1e-12)
        gone = np.zeros(market.num_stocks, bool) if delisted is None else delisted[t + 1]
        # Delisted: the whole position is sold at the last valid close (the mark).
        np.testing.assert_allclose(new_holdings[:, gone], 0.0, atol=1e-12)
        price = np.where(gone, marks[t + 1], base[t + 1])
        exec_price = price * (1.0 + np.sign(trade) * config.slippage)
        notional = (np.abs(trade) * exec_price).sum(1)
        np.testing.assert_allclose(info["cost"].numpy(), config.cost_rate * notional, atol=1e-6)
        flow = -(trade * exec_price).sum(1) - config.cost_rate * notional
        np.testing.assert_allclose(new_cash, cash + flow, atol=1e-6 * config.initial_cash)
        # Only fillable (bar, ticker) trade; off the schedule only the env's own sells do.
        assert (trade[:, ~tradable[t + 1] & ~gone] == 0).all()
        if not execute[t]:
            assert (trade[:, ~gone] == 0).all(), f"traded on non-decision bar {t}"
        if flat[t]:
            assert (trade <= 0).all()
            # A flat order sells everything that can fill at the next bar.
            np.testing.assert_allclose(new_holdings[:, tradable[t + 1]], 0.0, atol=1e-12)
        if buyable is not None:
            assert (trade[:, ~buyable[t + 1] & ~gone] <= 0).all()
        if (
            config.no_trade_band > 0
            and execute[t]
            and not flat[t]
            and config.action_mode != "active"
        ):
            # No ticker inside the band trades (weights: |target − current weight| ≤ band;
            # shares: |action| ≤ band).
            a = actions[t].astype(np.float64)
            if config.action_mode == "weights":
                w = np.clip(a, 0.0, 1.0)
                w = w / np.maximum(w.sum(1, keepdims=True), 1.0)
                before = info["before"]
                position = (before["holdings"] * before["mark"]).numpy()
                gap = w - position / before["value"].numpy()[:, None]
            else:
                gap = a
            inside = np.abs(gap) < config.no_trade_band * (1 - 1e-6)
            assert (trade[inside & ~gone[None, :]] == 0).all(), "traded inside the band"
        # Reward: the change of value less the turnover penalty, scaled.
        turnover = notional / value
        want = (new_value - value) / config.initial_cash - config.turnover_penalty * turnover
        np.testing.assert_allclose(
            info["reward"].numpy(), config.reward_scale * want, rtol=1e-5, atol=1e-5
        )
        cash, holdings, value = new_cash, new_holdings, new_value


# -- decision schedule ---------------------------------------------------------------------


def test_with_interval_k_holdings_change_only_on_decision_bars_daily():
    market = make_market(20, 3, seed=4)
    config = EnvConfig(decision_interval=3, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=4, random_start=False)
    gen = torch.Generator().manual_seed(0)
    steps = run(env, [torch.rand(4, 3, generator=gen) * 2 - 1 for _ in range(19)])
    traded = [bool(s["trade"].abs().sum() > 0) for s in steps]
    assert traded == [t % 3 == 0 for t in range(19)]


def test_intraday_interval_counts_from_each_session_open():
    market = intraday(2, seed=1)
    config = EnvConfig(decision_interval=4, max_shares=5, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    actions = [torch.ones(1, 2)] * 45  # always buy: every executed order trades
    traded = [t for t, s in enumerate(run(env, actions)) if s["trade"].abs().sum() > 0]
    index, _ = session_positions(market)
    assert traded == [t for t in range(45) if index[t] % 4 == 0]
    assert index[26] == 0 and 26 in traded  # the half day starts a new count


def test_decision_times_pick_the_first_bar_ending_at_or_after_each_time():
    market = intraday(2, seed=1)
    config = EnvConfig(decision_times=["10:00", "15:45"], max_shares=5, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    actions = [torch.ones(1, 2)] * 45
    steps = run(env, actions)
    decided = [
        market.timestamps[t].strftime("%m-%d %H:%M")
        for t, s in enumerate(steps)
        if s["trade"].abs().sum() > 0
    ]
    # Bars are stamped at their start: the 09:30 bar ends at 10:00, the 15:30 bar at 16:00;
    # the half day (closes 13:00) has no bar ending at or after 15:45.
    assert decided == [
        "11-24 09:30",
        "11-24 15:30",
        "11-25 09:30",
        "11-25 15:30",
        "11-27 09:30",
        "11-30 09:30",
    ]


def test_schedule_slice_says_which_orders_count():
    market = make_market(12, 2)
    env = VecTradingEnv(market, EnvConfig(decision_interval=4), num_envs=1, random_start=False)
    steps = run(env, [torch.zeros(1, 2)] * 11)
    flags = [float(s["before"]["obs"][0, env.layout.schedule_slice]) for s in steps]
    assert flags == [1.0 if t % 4 == 0 else 0.0 for t in range(11)]


# -- band, partial adjustment, penalty ------------------------------------------------------


def as_action(weights: list[float]) -> torch.Tensor:
    """The weights as the env reads them (float32 actions, accounting in float64)."""
    return torch.tensor(weights, dtype=torch.float32).double()


def weights_after_setup(config, target0, target1, seed=11):
    """Holdings at target0 (set at bar 0), then one step toward target1 at bar 1."""
    market = make_market(6, 4, seed=seed)
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    env.step(torch.tensor([target0], dtype=torch.float32))
    state = env.state
    weights = (state.position / state.value.unsqueeze(1))[0]
    before = (state.holdings[0].clone(), state.value[0].item(), state.mark[0].clone(), weights)
    if callable(target1):
        target1 = target1(weights.tolist())
    _, reward, _, _, info = env.step(torch.tensor([target1], dtype=torch.float32))
    return before, info


def test_band_leaves_tickers_inside_it_untouched_and_trades_others_to_the_edge():
    config = EnvConfig(
        action_mode="weights",
        integer_shares=False,
        cost_rate=0.0,
        no_trade_band=0.05,
        dtype="float64",
    )
    moves = [0.03, -0.2, 0.0, 0.2]  # inside, outside, inside, outside the 0.05 band
    picked = []

    def target_of(w):
        picked.append([wi + m for wi, m in zip(w, moves, strict=True)])
        return picked[0]

    (held, value, mark, w), info = weights_after_setup(config, [0.3, 0.3, 0.2, 0.1], target_of)
    trade = info["trade"][0]
    target = as_action(picked[0])
    gap = target - w
    inside = gap.abs() <= 0.05
    assert inside.tolist() == [True, False, True, False]
    assert (trade[inside] == 0).all()
    edge = target - gap.clamp(-0.05, 0.05)
    want = edge * value / mark - held
    torch.testing.assert_close(trade[~inside], want[~inside], rtol=1e-9, atol=1e-9)


def test_band_target_mode_trades_all_the_way_to_the_target():
    config = EnvConfig(
        action_mode="weights",
        integer_shares=False,
        cost_rate=0.0,
        no_trade_band=0.05,
        band_target="target",
        dtype="float64",
    )
    target = as_action([0.33, 0.1, 0.2, 0.3])
    (held, value, mark, w), info = weights_after_setup(
        config, [0.3, 0.3, 0.2, 0.1], target.tolist()
    )
    outside = (target - w).abs() > 0.05
    want = (target * value / mark - held) * outside
    torch.testing.assert_close(info["trade"][0], want, rtol=1e-9, atol=1e-9)


def test_partial_adjustment_moves_exactly_the_fraction():
    config = EnvConfig(
        action_mode="weights",
        integer_shares=False,
        cost_rate=0.0,
        partial_adjustment=0.25,
        dtype="float64",
    )
    target = as_action([0.1, 0.4, 0.0, 0.3])
    (held, value, mark, _), info = weights_after_setup(
        config, [0.3, 0.3, 0.2, 0.1], target.tolist()
    )
    torch.testing.assert_close(
        info["trade"][0], 0.25 * (target * value / mark - held), rtol=1e-9, atol=1e-9
    )


def test_partial_adjustment_in_shares_mode_scales_the_order():
    market = make_market(5, 3)
    config = EnvConfig(partial_adjustment=0.5, max_shares=10, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.35, 0.0]]))
    assert info["trade"][0].tolist() == [5.0, 1.0, 0.0]  # trunc(a · 10 · 0.5)


def test_shares_band_is_a_dead_zone_on_the_action():
    market = make_market(5, 4)
    config = EnvConfig(max_shares=100, no_trade_band=0.1, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    env.reset()
    _, _, _, _, info = env.step(torch.tensor([[0.09, 0.115, -0.05, 0.5]]))
    # |a| ≤ 0.1 orders nothing; outside the zone the order is the whole trunc(a · 100).
    assert info["trade"][0].tolist() == [0.0, 11.0, 0.0, 50.0]


def test_turnover_penalty_is_in_unscaled_reward_units_per_unit_of_turnover():
    market = make_market(10, 3)
    gen = torch.Generator().manual_seed(2)
    actions = [torch.rand(2, 3, generator=gen) * 2 - 1 for _ in range(9)]
    base = run(VecTradingEnv(market, EnvConfig(dtype="float64"), 2, random_start=False), actions)
    config = EnvConfig(turnover_penalty=0.01, reward_scale=100.0, dtype="float64")
    pen = run(VecTradingEnv(market, config, 2, random_start=False), actions)
    for a, b in zip(base, pen, strict=True):
        assert torch.equal(a["account_value"], b["account_value"])  # not charged to the account
        want = a["reward"].double() - 100.0 * 0.01 * a["turnover"]
        torch.testing.assert_close(b["reward"].double(), want, rtol=1e-5, atol=1e-6)
    assert any(a["turnover"].sum() > 0 for a in base)


# -- flat at close and the calendar ----------------------------------------------------------


@pytest.mark.parametrize("fill_price", ["open", "close"])
def test_flat_at_close_sells_at_the_second_to_last_bar_and_fills_at_the_last(fill_price):
    market = intraday(2, seed=3)
    config = EnvConfig(flat_at_close=True, max_shares=10, fill_price=fill_price, dtype="float64")
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    steps = run(env, [torch.ones(1, 2)] * (INTRADAY_BARS - 1))  # always buy
    index, left = session_positions(market)
    px = (market.open if fill_price == "open" else market.close).double()
    for t, s in enumerate(steps):
        trade = s["trade"][0]
        if left[t] == 1:  # the env's own sell order, filled at the session's last bar
            assert (trade < 0).all() and torch.equal(trade, -s["before"]["holdings"][0])
            torch.testing.assert_close(s["fill_price"][0], px[t + 1])
            assert left[t + 1] == 0  # the last bar of the session
            assert (s["holdings"][0] == 0).all()
        elif left[t] == 0:  # an order at the last bar would fill overnight: ignored
            assert (trade == 0).all()
        else:
            assert (trade == 10).all()
    # The half day (13:00 close, 7 bars) goes flat too: sold at its 6th, filled at its 7th.
    half = [t for t in range(INTRADAY_BARS) if market.timestamps[t].day == 27]
    assert len(half) == 7 and steps[half[5]]["trade"].sum() < 0


def test_calendar_slice_time_of_day_bars_left_and_first_bar_flag():
    market = intraday(2)
    env = VecTradingEnv(market, EnvConfig(), num_envs=1, random_start=False)
    steps = run(env, [torch.zeros(1, 2)] * (INTRADAY_BARS - 1))
    cal = torch.stack([s["before"]["obs"][0, env.layout.calendar_slice] for s in steps])
    index, left = session_positions(market)
    end = np.array([(s.hour * 60 + s.minute + 30 - 570) / 390 for s in market.timestamps])
    np.testing.assert_allclose(cal[:, 0].numpy(), end[:-1], rtol=1e-6)
    np.testing.assert_allclose(cal[:, 1].numpy(), left[:-1] / 13, rtol=1e-6)
    assert cal[:, 2].tolist() == [float(i == 0) for i in index[:-1]]
    assert cal[32, 0].item() == pytest.approx(210 / 390)  # half day's last bar ends 13:00


# -- point in time -------------------------------------------------------------------------


def test_not_buyable_blocks_buys_allows_sells_and_keeps_real_marks():
    market = make_market(10, 2, seed=6)
    buyable = torch.ones(10, 2, dtype=torch.bool)
    buyable[3:, 0] = False  # ticker 0 leaves the index at bar 3
    market = replace(market, buyable=buyable)
    env = VecTradingEnv(market, EnvConfig(max_shares=10, dtype="float64"), 1, random_start=False)
    steps = run(env, [torch.ones(1, 2)] * 4 + [torch.tensor([[-0.5, 0.0]])] * 5)
    trades = torch.stack([s["trade"][0, 0] for s in steps]).tolist()
    assert trades[:2] == [10.0, 10.0]  # bars 1, 2: buyable
    assert trades[2:4] == [0.0, 0.0]  # fills at bars 3, 4: buying blocked
    assert trades[4] == -5.0  # selling still works
    close = market.close.double()
    for t, s in enumerate(steps):
        held = s["holdings"][0]
        want = float(s["cash"][0] + (held * close[t + 1]).sum())
        assert float(s["account_value"][0]) == pytest.approx(want, rel=1e-12)


def test_delisted_position_becomes_cash_at_the_last_valid_close():
    from finpod.env import rollout

    market = make_market(10, 2, seed=8)
    gone = torch.zeros(10, 2, dtype=torch.bool)
    gone[6:, 1] = True  # last valid price of ticker 1 at bar 5
    close = market.close.clone()
    close[6:, 1] = close[5, 1]  # the data layer carries the last price
    tradable = market.tradable & ~gone
    market = replace(market, delisted=gone, tradable=tradable, close=close)
    config = EnvConfig(max_shares=10, cost_rate=0.002)
    out = rollout(lambda obs: torch.ones(1, 2), market, config)
    last = float(market.close[5, 1])
    assert out.holdings.iloc[5, 1] == 50.0 and (out.holdings.iloc[6:, 1] == 0).all()
    sale = out.transactions[out.transactions["reason"] == "delisted"]
    assert len(sale) == 1 and sale.index[0] == market.timestamps[6]
    assert sale["shares"].iloc[0] == -50.0 and sale["price"].iloc[0] == pytest.approx(last)
    assert sale["cost"].iloc[0] == pytest.approx(50 * last * 0.002)
    # Never frozen at a stale mark: after the sale the position is cash, not a price.
    assert out.positions.iloc[7:, 1].eq(0).all()


def test_score_annualizes_with_the_markets_calendar():
    from finpod.env import rollout, score

    market = replace(make_market(40, 2, seed=9), bars_per_year=100.0)
    out = rollout(lambda obs: torch.ones(1, 2), market, EnvConfig(max_shares=10))
    r = out.returns
    want = r.mean() / r.std(ddof=1) * np.sqrt(100.0)
    assert score(out, "sharpe") == pytest.approx(want, rel=1e-6)
    assert out.annualization == 100.0


# -- no look-ahead with the controls on ------------------------------------------------------

CONTROLLED = {
    "band_edge_partial": dict(action_mode="weights", no_trade_band=0.05, partial_adjustment=0.5),
    "band_target_interval": dict(
        action_mode="weights", no_trade_band=0.02, band_target="target", decision_interval=3
    ),
    "shares_band_penalty": dict(no_trade_band=0.001, turnover_penalty=0.01),
    "flat_at_close_times": dict(
        action_mode="weights", flat_at_close=True, decision_times=["10:00", "12:00"]
    ),
    "flat_at_close_shares": dict(flat_at_close=True, partial_adjustment=0.5),
}


@pytest.mark.parametrize("fill_price", ["open", "close"])
@pytest.mark.parametrize("name", sorted(CONTROLLED))
@pytest.mark.parametrize("t", [0, 10, 11, 12, 24, 31])
def test_bars_after_the_fill_bar_change_nothing_with_controls_on(name, fill_price, t):
    from .test_no_lookahead import perturb, trace

    market = intraday(4, seed=5)
    gen = torch.Generator().manual_seed(3)
    buyable = torch.rand(INTRADAY_BARS, 4, generator=gen) > 0.2
    gone = torch.zeros(INTRADAY_BARS, 4, dtype=torch.bool)
    gone[30:, 3] = True
    market = replace(market, buyable=buyable, delisted=gone, tradable=market.tradable & ~gone)
    config = EnvConfig(fill_price=fill_price, initial_cash=20_000.0, **CONTROLLED[name])
    actions = [torch.rand(2, 4, generator=gen) * 2 - 1 for _ in range(INTRADAY_BARS - 1)]
    base = trace(market, config, actions)
    changed = trace(perturb(market, range(t + 2, INTRADAY_BARS)), config, actions)
    for before, after in zip(base[: t + 2], changed[: t + 2], strict=True):
        for key, value in before.items():
            assert torch.equal(value, after[key]), key
    assert any(not torch.equal(b["obs"], c["obs"]) for b, c in zip(base, changed, strict=True))


# -- the stationary price observation ---------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    window=st.sampled_from([2, 5, 20]),
    listing=st.lists(st.integers(0, 12), min_size=3, max_size=3),
    untradable=st.sampled_from([0.0, 0.3]),
)
def test_price_observation_is_the_causal_trailing_z_score(seed, window, listing, untradable):
    from .markets import reference_price_z

    market = make_market(25, 3, seed=seed, listing=listing, untradable=untradable)
    env = VecTradingEnv(market, EnvConfig(price_window=window), 1, random_start=False)
    marks = reference_marks(market.close.double().numpy(), market.tradable.numpy())
    got = env.tables.static_obs[:, : market.num_stocks].double().numpy()
    want = np.array([[reference_price_z(marks, t, j, window) for j in range(3)] for t in range(25)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_compiled_step_matches_eager_with_controls_on():
    market = intraday(4, seed=2)
    config = EnvConfig(
        action_mode="weights",
        no_trade_band=0.02,
        partial_adjustment=0.5,
        turnover_penalty=0.001,
        decision_interval=2,
        flat_at_close=True,
        episode_length=20,
    )
    eager = VecTradingEnv(market, config, num_envs=8, seed=0)
    compiled = VecTradingEnv(market, config, num_envs=8, seed=0, compile=True)
    torch.testing.assert_close(eager.reset(), compiled.reset())
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        action = torch.rand(8, 4, generator=gen) * 2 - 1
        oe, re, *_, ie = eager.step(action)
        oc, rc, *_, ic = compiled.step(action)
        torch.testing.assert_close(oc, oe, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(rc, re, rtol=1e-4, atol=1e-4)
        assert torch.equal(ic["holdings"], ie["holdings"])
    assert compiled._step_fn is not eager._step_fn
