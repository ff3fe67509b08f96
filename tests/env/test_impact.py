"""Square-root market impact: zero for no trade, √ of size, past bars only, the formula by
hand, linear costs unchanged, bad settings in one line."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data.market import MarketData
from finpod.env import EnvConfig, VecTradingEnv, rollout
from finpod.env.impact import MAX_IMPACT_FRACTION
from finpod.errors import FinpodError

from .markets import make_market


def with_volume(market: MarketData, volume: np.ndarray) -> MarketData:
    return replace(market, volume=torch.tensor(volume, dtype=torch.float32))


def step_costs(market: MarketData, config: EnvConfig, actions: list[np.ndarray]) -> list[dict]:
    """``info`` of each step of one account driven by ``actions`` from bar 0 (float64)."""
    env = VecTradingEnv(market, replace(config, dtype="float64"), random_start=False)
    env.reset()
    out = []
    for a in actions:
        _, _, _, _, info = env.step(torch.tensor(a, dtype=torch.float32).reshape(1, -1))
        out.append({k: v.clone() for k, v in info.items() if isinstance(v, torch.Tensor)})
    return out


SQRT = EnvConfig(cost_model="sqrt", impact_coefficient=0.8, cost_rate=0.001, max_shares=400)


def tiny_market() -> MarketData:
    """One ticker, six daily bars, prices and volumes small enough to follow by hand."""
    close = np.array([[50.0], [51.0], [49.5], [50.5], [52.0], [51.0]])
    open_ = close * 1.002
    volume = np.array([[1000.0], [1500.0], [800.0], [1200.0], [1000.0], [5e6]])
    market = make_market(num_bars=6, num_stocks=1)
    market = replace(
        market,
        open=torch.tensor(open_, dtype=torch.float32),
        close=torch.tensor(close, dtype=torch.float32),
    )
    return with_volume(market, volume)


def test_cost_at_a_fill_is_the_square_root_law_by_hand():
    market = tiny_market()
    steps = step_costs(market, SQRT, [np.zeros(1)] * 4 + [np.ones(1)])
    info = steps[-1]  # decided at bar 4, filled at bar 5's open
    close = market.close.double().numpy()[:, 0]
    vol = market.volume.double().numpy()[:, 0]
    # Bars 0..4 only: the fill bar's own volume (5e6) must not enter.
    rets = [math.log(close[i] / close[i - 1]) for i in range(1, 5)]
    sigma = math.sqrt(sum(r * r for r in rets) / len(rets))  # daily bars: B = 1
    adv = sum(close[i] * vol[i] for i in range(5)) / 5
    shares = 400.0
    q = shares * float(market.open.double()[5, 0])
    impact = 0.8 * sigma * math.sqrt(q / adv) * q
    assert float(info["trade"][0, 0]) == shares
    assert float(info["impact"][0]) == pytest.approx(impact, rel=1e-5)
    assert float(info["cost"][0]) == pytest.approx(0.001 * q + impact, rel=1e-5)
    assert float(info["fill_cost"][0, 0]) == pytest.approx(float(info["cost"][0]))
    # What the account paid is what the env reports.
    assert float(info["cash"][0]) == pytest.approx(1_000_000.0 - q - 0.001 * q - impact)


def test_no_trade_pays_no_impact():
    market = with_volume(make_market(num_bars=12, num_stocks=3), np.full((12, 3), 1e4))
    for info in step_costs(market, SQRT, [np.zeros(3)] * 8):
        assert float(info["impact"][0]) == 0.0 and float(info["cost"][0]) == 0.0
        assert torch.all(info["fill_cost"] == 0.0)


def test_impact_per_dollar_grows_as_the_square_root_of_the_order():
    market = with_volume(make_market(num_bars=12, num_stocks=1), np.full((12, 1), 1e6))
    config = replace(SQRT, cost_rate=0.0)
    small, large = (
        step_costs(market, config, [np.zeros(1)] * 6 + [np.full(1, a)])[-1] for a in (0.25, 1.0)
    )
    assert float(small["trade"][0, 0]) == 100 and float(large["trade"][0, 0]) == 400
    # Order 4 × larger: impact per dollar 2 × larger, impact in dollars 8 × larger.
    assert float(large["impact"][0]) / float(small["impact"][0]) == pytest.approx(8.0, rel=1e-6)


def test_cost_at_t_uses_no_bar_after_the_decision():
    rng = np.random.default_rng(4)
    market = with_volume(make_market(num_bars=30, num_stocks=3), rng.uniform(1e3, 1e5, (30, 3)))
    actions = [rng.uniform(-1, 1, 3) for _ in range(16)]  # the last fills at bar 16
    before = step_costs(market, SQRT, actions)[-1]
    later = replace(
        market,
        volume=torch.cat([market.volume[:16], market.volume[16:] * 10.0]),
        close=torch.cat([market.close[:16], market.close[16:] * 1.3]),
        open=torch.cat([market.open[:17], market.open[17:] * 0.7]),
    )
    after = step_costs(later, SQRT, actions)[-1]
    assert float(before["impact"][0]) > 0.0
    torch.testing.assert_close(after["fill_cost"], before["fill_cost"], rtol=0, atol=0)


def test_linear_costs_charge_the_rate_and_no_impact():
    market = with_volume(make_market(num_bars=12, num_stocks=3), np.full((12, 3), 10.0))
    config = EnvConfig(cost_rate=0.002)
    env = VecTradingEnv(market, config, random_start=False)
    assert env.tables.impact is None
    rng = np.random.default_rng(1)
    for info in step_costs(market, config, [rng.uniform(-1, 1, 3) for _ in range(8)]):
        traded = (info["trade"].abs() * info["fill_price"]).double()
        torch.testing.assert_close(info["fill_cost"], 0.002 * traded)
        assert float(info["impact"][0]) == 0.0 and "fill_impact" not in info


def test_thin_names_pay_more_per_dollar_and_the_table_adds_up():
    volume = np.tile([1e7, 1e2], (40, 1))  # ticker 1 trades a thousandth of ticker 0
    market = with_volume(make_market(num_bars=40, num_stocks=2, seed=2), volume)
    config = EnvConfig(action_mode="weights", cost_model="sqrt", cost_rate=0.0)
    result = rollout(lambda obs: torch.tensor([[0.5, 0.5]]), market, config)
    tx = result.transactions
    assert tx["cost"].sum() == pytest.approx(result.costs.sum())
    assert tx["impact"].sum() == pytest.approx(result.impact.sum())
    first = tx.loc[tx.index[0]].set_index("ticker")
    per_dollar = first["impact"] / (first["shares"].abs() * first["price"])
    assert per_dollar["T001"] > 10 * per_dollar["T000"]
    assert per_dollar.max() <= MAX_IMPACT_FRACTION + 1e-12


def test_square_root_costs_on_a_market_without_volume_is_one_line():
    with pytest.raises(FinpodError) as err:
        VecTradingEnv(make_market(), EnvConfig(cost_model="sqrt"))
    assert "volume" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cost_model": "squareroot"}, ("env.cost_model", "linear, sqrt")),
        ({"impact_coefficient": -0.5}, ("env.impact_coefficient", "≥ 0")),
        ({"impact_coefficient": "0.7"}, ("env.impact_coefficient", "without quotes")),
    ],
)
def test_a_bad_cost_setting_is_one_line(options, words):
    with pytest.raises(FinpodError) as err:
        EnvConfig(**options)
    text = f"{err.value.message} {err.value.hint}"
    assert "\n" not in text
    for w in words:
        assert w in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_costs_equal_cpu_costs():
    rng = np.random.default_rng(5)
    market = with_volume(make_market(num_bars=30, num_stocks=4), rng.uniform(1e2, 1e5, (30, 4)))
    actions = torch.tensor(rng.uniform(-1, 1, (29, 1, 4)), dtype=torch.float32)
    costs = {}
    for device in ("cpu", "cuda"):
        env = VecTradingEnv(
            market, replace(SQRT, dtype="float64"), random_start=False, device=device
        )
        env.reset()
        costs[device] = torch.stack([env.step(a.to(device))[4]["fill_cost"].cpu() for a in actions])
    torch.testing.assert_close(costs["cuda"], costs["cpu"], rtol=1e-9, atol=1e-9)


def test_split_liquidity_sees_the_sessions_before_the_split(tmp_path):
    from finpod.data import build_dataset, load_split

    ds = build_dataset("synthetic", tmp_path / "syn", n_tickers=3, n_bars=300, seed=1)
    whole = load_split(ds, "all")
    split = load_split(ds, "backtest")
    start = whole.timestamps.get_loc(split.timestamps[0])
    assert start > 20
    torch.testing.assert_close(split.liquidity, whole.liquidity[start : start + split.num_bars])
    torch.testing.assert_close(split.volume, whole.volume[start : start + split.num_bars])
    assert isinstance(split.timestamps, pd.DatetimeIndex)
