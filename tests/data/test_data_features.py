"""Features: causal, O(1)-scaled, correct against plain reference formulas."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.data import FEATURES, from_frame, load_split
from finpod.data.calendar import session_of
from finpod.data.features import compute_features, turbulence_daily
from finpod.data.synthetic_market import synthetic_bars

from .conftest import make_daily


def _features(bars):
    return compute_features(bars.close, bars.high, bars.low, bars.timestamps, bars.bar)


@settings(max_examples=12, deadline=None)
@given(t=st.integers(0, 318), seed=st.integers(0, 1000), scale=st.floats(0.2, 5.0))
def test_perturbing_future_bars_leaves_past_features_unchanged(t, seed, scale):
    bars = synthetic_bars(12, 320, seed=3, late_listings=3)
    base = _features(bars)
    rng = np.random.default_rng(seed)
    for name in ("open", "high", "low", "close"):
        arr = getattr(bars, name)
        arr[t + 1 :] = (
            arr[t + 1 :]
            * np.float32(scale)
            * np.exp(0.05 * rng.standard_normal(arr[t + 1 :].shape)).astype(np.float32)
        )
    bars.high[t + 1 :] = np.maximum.reduce(
        [bars.high[t + 1 :], bars.open[t + 1 :], bars.close[t + 1 :]]
    )
    bars.low[t + 1 :] = np.minimum.reduce(
        [bars.low[t + 1 :], bars.open[t + 1 :], bars.close[t + 1 :]]
    )
    after = _features(bars)
    np.testing.assert_array_equal(base[: t + 1], after[: t + 1])
    # The perturbation is visible afterwards (the test can fail).
    assert not np.array_equal(base[t + 1 :], after[t + 1 :])


def test_turbulence_needs_a_long_daily_history_and_is_causal():
    bars = synthetic_bars(8, 400, seed=1)
    turb = turbulence_daily(bars.close)
    assert (turb[:252] == 0).all() and (turb[253:] > 0).all()
    close = bars.close.copy()
    close[300:] *= 1.7
    np.testing.assert_array_equal(turbulence_daily(close)[:300], turb[:300])
    # Around 1 on ordinary days (χ²_N / N), large on a crash day.
    assert 0.5 < float(np.median(turb[260:])) < 2.0
    close = bars.close.copy()
    close[350:] *= 0.8
    assert turbulence_daily(close)[350] > 5 * np.median(turb[260:])


def test_daily_feature_visible_on_minute_bars_only_after_the_close():
    bars = synthetic_bars(6, None, years=1.1, bar="30min", seed=2)
    feats = _features(bars)
    turb = feats[:, 0, FEATURES.index("turbulence")]
    sess = session_of(bars.timestamps)
    starts = np.flatnonzero(np.r_[True, sess[1:] != sess[:-1]])
    ends = np.r_[starts[1:] - 1, len(sess) - 1]
    daily = turbulence_daily(bars.close[ends])
    for k in range(len(starts)):
        seg = turb[starts[k] : ends[k] + 1]
        assert (seg == seg[0]).all()  # constant within a session
        assert seg[0] == (daily[k - 1] if k else 0.0)  # the previous session's value
    # Changing the last bar of a session leaves that session's turbulence alone.
    k = len(starts) - 3
    close = bars.close.copy()
    close[ends[k]] *= 1.3
    t2 = compute_features(close, bars.high, bars.low, bars.timestamps, bars.bar)[:, 0, -1]
    np.testing.assert_array_equal(t2[: ends[k] + 1], turb[: ends[k] + 1])
    assert not np.array_equal(t2[ends[k] + 1 :], turb[ends[k] + 1 :])


def test_features_match_reference_formulas():
    df = make_daily(tickers=("AAA",), n=120, seed=5)
    m = from_frame(df)
    f = {n: m.features[:, 0, i].double().numpy() for i, n in enumerate(m.feature_names)}
    c = df["close"].to_numpy()
    h, lo = df["high"].to_numpy(), df["low"].to_numpy()
    v = math.sqrt(252)
    t = 100
    assert f["log_return"][t] == pytest.approx(math.log(c[t] / c[t - 1]) * v, rel=1e-4)
    assert f["close_30_sma"][t] == pytest.approx(
        (c[t - 29 : t + 1].mean() / c[t] - 1) * v, rel=1e-4
    )
    assert f["close_60_sma"][t] == pytest.approx(
        (c[t - 59 : t + 1].mean() / c[t] - 1) * v, rel=1e-4
    )
    w = c[t - 19 : t + 1]
    assert f["boll_ub"][t] == pytest.approx(
        ((w.mean() + 2 * w.std(ddof=1)) / c[t] - 1) * v, rel=1e-4
    )
    tp = (h + lo + c) / 3
    win = tp[t - 29 : t + 1]
    cci = (tp[t] - win.mean()) / (0.015 * np.abs(win - win.mean()).mean())
    assert f["cci_30"][t] == pytest.approx(cci / 100, rel=1e-4)
    # RSI with Wilder smoothing, written as a loop.
    d = np.diff(c)
    up = dn = 0.0
    wsum = 0.0
    a = 1 / 30
    for k, x in enumerate(d[:t]):
        wsum = (1 - a) * wsum + 1
        up = up + (max(x, 0) - up) / wsum if k else max(x, 0)
        dn = dn + (max(-x, 0) - dn) / wsum if k else max(-x, 0)
    assert f["rsi_30"][t] == pytest.approx(up / (up + dn), rel=1e-3)
    # Warm-up: neutral values until the window is full.
    assert f["close_60_sma"][58] == 0 and f["rsi_30"][5] == 0.5


def test_sample_features_are_o1(sample_dir):
    m = load_split(sample_dir, "train")
    f = m.features[m.tradable]
    assert torch.isfinite(f).all()
    assert f.abs().max() <= 20
    q = torch.quantile(f.abs()[::7].float(), 0.99, dim=0)
    limits = torch.tensor([10.0 if n == "turbulence" else 6.0 for n in m.feature_names])
    assert (q < limits).all(), dict(zip(m.feature_names, q.tolist(), strict=True))


def test_feature_names_documented_in_manifest(sample_dir):
    from finpod.data import load_manifest

    man = load_manifest(sample_dir)
    assert man["features"] == list(FEATURES)
    assert set(man["feature_scaling"]) == set(FEATURES)


def test_late_listing_features_neutral_before_listing():
    df = make_daily(n=100)
    df = df[~((df["tic"] == "CCC") & (df.groupby("tic").cumcount() < 40))]
    m = from_frame(df)
    j = m.tickers.index("CCC")
    names = m.feature_names
    pre = m.features[:40, j]
    assert (pre[:, names.index("rsi_30")] == 0.5).all()
    assert (pre[:, names.index("macd")] == 0).all()
    # A window that starts before the listing is not computed from invented prices.
    assert (m.features[40:99, j, names.index("close_60_sma")] == 0).all()
    assert (m.features[99:, j, names.index("close_60_sma")] != 0).all()
    assert isinstance(m.timestamps, pd.DatetimeIndex)


def test_turbulence_matches_direct_mahalanobis():
    bars = synthetic_bars(15, 330, seed=9, late_listings=0)
    turb = turbulence_daily(bars.close, window=60)
    c = bars.close.astype(np.float64)
    r = np.diff(np.log(c), axis=0, prepend=np.nan)
    for d in (61, 100, 200, 329):
        x = r[d - 60 : d]
        dev = r[d] - x.mean(0)
        ref = dev @ np.linalg.solve(np.cov(x.T), dev) / 15
        assert turb[d] == pytest.approx(min(ref, 20.0), rel=1e-5)


def test_turbulence_ignores_tickers_without_a_full_window():
    bars = synthetic_bars(6, 200, seed=4, late_listings=2)
    turb = turbulence_daily(bars.close, window=40)
    listed = ~np.isnan(bars.close)
    full = listed[:, :4].all()
    assert full
    d = 120
    ok = np.array([listed[d - 41 : d + 1, j].all() for j in range(6)])
    r = np.diff(np.log(bars.close.astype(np.float64)), axis=0, prepend=np.nan)[:, ok]
    x = r[d - 40 : d]
    dev = r[d] - x.mean(0)
    ref = dev @ np.linalg.solve(np.cov(x.T), dev) / ok.sum()
    assert turb[d] == pytest.approx(ref, rel=1e-5)


@settings(max_examples=10, deadline=None)
@given(cut=st.integers(5, 70), seed=st.integers(0, 100), drop=st.booleans())
def test_whole_pipeline_is_causal(cut, seed, drop):
    """Changing or removing raw rows after bar t leaves prices, masks and features ≤ t alone."""
    df = make_daily(tickers=("AAA", "BBB", "CCC", "DDD"), n=80, seed=1)
    base = from_frame(df, min_coverage=0.0)
    t_cut = base.timestamps[cut].strftime("%Y-%m-%d")
    later = df["date"] > t_cut
    rng = np.random.default_rng(seed)
    other = df.copy()
    factor = np.exp(0.2 * rng.standard_normal(int(later.sum())))
    for col in ("open", "high", "low", "close"):
        other.loc[later, col] = other.loc[later, col] * factor
    if drop:  # and make holes after t (AAA keeps the grid's last day)
        holes = later & (rng.random(len(df)) < 0.3) & (other["tic"] != "AAA")
        other = other[~holes]
    after = from_frame(other, min_coverage=0.0)
    k = cut + 1
    assert base.timestamps[:k].equals(after.timestamps[:k])
    for name in ("open", "close", "tradable", "features"):
        assert torch.equal(getattr(base, name)[:k], getattr(after, name)[:k]), name
