"""Metrics against values worked out by hand and against empyrical where it is the source."""

from __future__ import annotations

import math

import empyrical as ep
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.backtest import metrics as m
from finpod.backtest import selection as sel


def _series(values, freq="B", start="2024-01-01"):
    idx = pd.date_range(start, periods=len(values), freq=freq, tz="America/New_York")
    return pd.Series(values, index=idx, dtype="float64")


R = _series([0.01, -0.02, 0.03, 0.0, 0.01])


def test_cumulative_return_compounds_by_hand():
    expected = 1.01 * 0.98 * 1.03 * 1.0 * 1.01 - 1.0
    assert m.cumulative_return(R) == pytest.approx(expected, rel=1e-12)


def test_sharpe_by_hand_daily_and_minute_annualization():
    mean = (0.01 - 0.02 + 0.03 + 0.0 + 0.01) / 5  # 0.006
    var = sum((x - mean) ** 2 for x in [0.01, -0.02, 0.03, 0.0, 0.01]) / 4
    per_bar = mean / math.sqrt(var)
    assert m.sharpe_ratio(R, "1d") == pytest.approx(per_bar * math.sqrt(252), rel=1e-12)
    assert m.sharpe_ratio(R, "1min") == pytest.approx(per_bar * math.sqrt(252 * 390), rel=1e-12)
    assert m.sharpe_ratio(R, "5min") == pytest.approx(per_bar * math.sqrt(252 * 78), rel=1e-12)


def test_annual_return_and_volatility_by_hand():
    total = 1.01 * 0.98 * 1.03 * 1.0 * 1.01
    assert m.annual_return(R, "1d") == pytest.approx(total ** (252 / 5) - 1, rel=1e-10)
    std = np.std([0.01, -0.02, 0.03, 0.0, 0.01], ddof=1)
    assert m.annual_volatility(R, "1h") == pytest.approx(std * math.sqrt(252 * 6.5), rel=1e-12)


def test_max_drawdown_and_drawdown_series_by_hand():
    r = _series([0.10, -0.50, 0.20, 0.50, -0.10])
    # equity 1.1, 0.55, 0.66, 0.99, 0.891; peak 1.1 → worst 0.55/1.1 - 1 = -0.5
    assert m.max_drawdown(r) == pytest.approx(-0.5)
    dd = m.drawdown_series(r)
    assert dd.iloc[0] == 0.0
    assert dd.iloc[3] == pytest.approx(0.99 / 1.1 - 1)
    assert dd.min() == pytest.approx(-0.5)


def test_sortino_by_hand():
    vals = [0.01, -0.02, 0.03, 0.0, 0.01]
    downside = math.sqrt(sum(min(x, 0.0) ** 2 for x in vals) / len(vals))
    expected = np.mean(vals) / downside * math.sqrt(252)
    assert m.sortino_ratio(R, "1d") == pytest.approx(expected, rel=1e-12)


def test_calmar_is_annual_return_over_drawdown():
    assert m.calmar_ratio(R, "1d") == pytest.approx(
        m.annual_return(R, "1d") / abs(m.max_drawdown(R)), rel=1e-12
    )


def test_beta_of_scaled_benchmark_is_the_scale_and_alpha_zero():
    rng = np.random.default_rng(0)
    bench = _series(rng.normal(0, 0.01, 300))
    strat = 2.0 * bench
    alpha, beta = m.alpha_beta(strat, bench, "1d")
    assert beta == pytest.approx(2.0, rel=1e-10)
    assert alpha == pytest.approx(0.0, abs=1e-10)


def test_alpha_beta_align_on_common_dates():
    rng = np.random.default_rng(1)
    bench = _series(rng.normal(0, 0.01, 50))
    strat = 0.5 * bench.iloc[10:]
    _, beta = m.alpha_beta(strat, bench, "1d")
    assert beta == pytest.approx(0.5, rel=1e-10)


def test_rolling_sharpe_and_beta_match_full_window_values():
    rng = np.random.default_rng(2)
    bench = _series(rng.normal(0, 0.01, 40))
    strat = _series(rng.normal(0.001, 0.01, 40))
    rs = m.rolling_sharpe(strat, 20, "1d")
    assert rs.iloc[:19].isna().all()
    assert rs.iloc[-1] == pytest.approx(m.sharpe_ratio(strat.iloc[-20:], "1d"), rel=1e-10)
    rb = m.rolling_beta(strat, bench, 20)
    assert rb.iloc[-1] == pytest.approx(
        m.alpha_beta(strat.iloc[-20:], bench.iloc[-20:])[1], rel=1e-8
    )


def test_monthly_returns_compound_within_month():
    idx = pd.DatetimeIndex(["2024-01-02", "2024-01-03", "2024-02-01"], tz="America/New_York")
    r = pd.Series([0.1, 0.1, -0.05], index=idx)
    table = m.monthly_returns(r)
    assert table.loc[2024, 1] == pytest.approx(0.21)
    assert table.loc[2024, 2] == pytest.approx(-0.05)
    assert np.isnan(table.loc[2024, 3])


def test_annual_turnover_by_hand():
    # 252 daily bars, $1M account, trading $10k a day → 2.52 M / 1 M per year
    idx = pd.date_range("2024-01-01", periods=252, freq="B")
    traded = pd.Series(10_000.0, index=idx)
    value = pd.Series(1_000_000.0, index=idx)
    assert m.annual_turnover(traded, value, "1d") == pytest.approx(2.52)
    # same trading on 126 bars is twice the yearly rate
    assert m.annual_turnover(traded.iloc[:126], value.iloc[:126], "1d") == pytest.approx(2.52)


def test_expected_max_sharpe_and_dsr_match_bailey_lopez_de_prado_example():
    # Bailey & López de Prado (2014), numerical example: annualized SR 2.5 over 1250 daily
    # obs, 100 trials whose annualized Sharpe variance is 0.5, skew -3, kurtosis 10
    # → E[max SR] ≈ 0.1132 per bar and DSR ≈ 0.9004.
    sr0 = sel.expected_max_sharpe(100, 0.5 / 250)
    assert sr0 == pytest.approx(0.1132, abs=5e-5)
    dsr = sel.probabilistic_sharpe_ratio(2.5 / math.sqrt(250), sr0, 1250, -3.0, 10.0)
    assert dsr == pytest.approx(0.9004, abs=5e-4)


def test_psr_by_hand_for_normal_returns():
    # skew 0, kurtosis 3: z = (SR - SR*) sqrt(T-1) / sqrt(1 + SR^2 / 2)
    sr, t = 0.1, 101
    z = 0.1 * 10 / math.sqrt(1 + 0.01 / 2)
    from scipy.stats import norm

    assert sel.probabilistic_sharpe_ratio(sr, 0.0, t, 0.0, 3.0) == pytest.approx(norm.cdf(z))


def test_deflated_sharpe_falls_as_trials_grow():
    rng = np.random.default_rng(3)
    r = _series(rng.normal(0.001, 0.01, 500))
    one = sel.deflated_sharpe_ratio(r, 1)
    many = [sel.deflated_sharpe_ratio(r, n, 0.5 / 252) for n in (2, 10, 100, 1000)]
    assert all(a > b for a, b in zip(many, many[1:], strict=False))
    # with one trial the deflated Sharpe is the plain PSR against 0
    r_np = r.to_numpy()
    from scipy import stats

    sr = r_np.mean() / r_np.std(ddof=1)
    psr = sel.probabilistic_sharpe_ratio(
        sr, 0.0, len(r_np), stats.skew(r_np), stats.kurtosis(r_np, fisher=False)
    )
    assert one == pytest.approx(psr)


def test_trial_variance_converts_annual_to_per_bar():
    v = sel.trial_sharpe_variance([1.0, 2.0, 3.0], "1d")
    assert v == pytest.approx(1.0 / 252)
    assert sel.trial_sharpe_variance([1.0], "1d") is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-0.2, 0.2, allow_nan=False), min_size=5, max_size=60),
    st.sampled_from(["1d", "1min", "15min", "1h"]),
)
def test_metrics_agree_with_empyrical(values, bar):
    r = _series(values)
    ppy = {"1d": 252, "1min": 252 * 390, "15min": 252 * 26, "1h": 252 * 6.5}[bar]
    got = m.performance_metrics(r, bar)
    np.testing.assert_allclose(got["sharpe"], ep.sharpe_ratio(r, annualization=ppy), rtol=1e-9)
    np.testing.assert_allclose(
        got["annual_return"], ep.annual_return(r, annualization=ppy), rtol=1e-9
    )
    np.testing.assert_allclose(got["max_drawdown"], ep.max_drawdown(r), rtol=1e-9)
    np.testing.assert_allclose(got["cumulative_return"], ep.cum_returns_final(r), rtol=1e-9)
    assert got["max_drawdown"] <= 0.0
    assert got["cumulative_return"] >= -1.0


def test_psr_of_a_series_is_the_probabilistic_sharpe_against_zero():
    from scipy import stats

    rng = np.random.default_rng(1)
    r = _series(rng.normal(0.0008, 0.01, 400))
    x = r.to_numpy()
    sr = x.mean() / x.std(ddof=1)
    expected = sel.probabilistic_sharpe_ratio(
        sr, 0.0, len(x), stats.skew(x), stats.kurtosis(x, fisher=False)
    )
    assert sel.probabilistic_sharpe(r) == pytest.approx(expected)
    assert math.isnan(sel.probabilistic_sharpe(_series([0.01] * 10)))  # no spread: undefined


def test_pbo_is_about_one_half_for_pure_noise_candidates():
    rng = np.random.default_rng(7)
    values = [
        sel.probability_of_backtest_overfitting(rng.normal(0.0, 0.01, (256, 20))).pbo
        for _ in range(40)
    ]
    assert np.mean(values) == pytest.approx(0.5, abs=0.08)


def test_pbo_is_about_zero_when_one_candidate_truly_dominates():
    rng = np.random.default_rng(8)
    r = rng.normal(0.0, 0.01, (256, 20))
    r[:, 5] += 0.006  # per-bar Sharpe 0.6 against 0 for the others
    res = sel.probability_of_backtest_overfitting(r)
    assert res.pbo <= 0.01
    assert res.num_partitions == 16 and len(res.logits) == 12870 and res.bars_used == 256


def test_pbo_logit_is_the_out_of_sample_rank_of_the_in_sample_winner():
    # two candidates, two blocks: in-sample winner A is worst out of sample → logit < 0
    a = np.array([0.03, 0.01, -0.02, -0.01])
    b = np.array([0.01, 0.00, 0.02, 0.03])
    res = sel.probability_of_backtest_overfitting(np.stack([a, b], axis=1), num_partitions=2)
    assert res.num_partitions == 2 and len(res.logits) == 2
    # split 1: IS = block 0 → A wins, OOS rank 1 of 2 → ω = 1/3; split 2: IS = block 1 → B
    # wins, OOS (block 0) rank 1 of 2 → ω = 1/3. Both overfit.
    np.testing.assert_allclose(res.logits, [math.log(0.5)] * 2)
    assert res.pbo == 1.0


def test_dsr_of_the_selection_uses_validation_returns_and_candidate_sharpes(tmp_path):
    from finpod.runs.candidates import load_candidates, record_candidate

    rng = np.random.default_rng(4)
    val = rng.normal(0.0, 0.01, (120, 10))
    val[:, 2] += 0.002
    for j in range(10):
        record_candidate(tmp_path, f"pod{j}", val[:, j], score=float(val[:, j].mean()))
    cands = load_candidates(tmp_path)
    backtest = _series(rng.normal(0.0005, 0.01, 60))
    out = sel.selection_statistics(backtest, cands, num_trials=3, annualization=252.0)
    sharpes = val.mean(0) / val.std(0, ddof=1)
    assert out["num_trials"] == 10 and out["selection_split"] == "validation"
    assert out["selected_candidate"] == "pod2" and out["validation_bars"] == 120
    assert out["trial_sharpe_variance"] == pytest.approx(np.var(sharpes, ddof=1))
    assert out["dsr"] == pytest.approx(
        sel.deflated_sharpe_ratio(val[:, 2], 10, np.var(sharpes, ddof=1))
    )
    assert out["psr"] == pytest.approx(sel.probabilistic_sharpe(backtest))
    assert out["pbo"] == pytest.approx(sel.probability_of_backtest_overfitting(val).pbo)
    assert not any(k.endswith("_note") for k in out)


def test_undefined_statistics_are_null_with_the_reason():
    r = _series(np.random.default_rng(0).normal(0, 0.01, 50))
    out = sel.selection_statistics(r, None)
    assert out["dsr"] is None and "no validation returns" in out["dsr_note"]
    assert out["pbo"] is None and "≥ 2 candidates" in out["pbo_note"]
    assert out["psr"] is not None and "psr_note" not in out


def test_old_runs_fall_back_to_the_leaderboard_count_and_scores():
    r = _series(np.random.default_rng(0).normal(0, 0.01, 50))
    out = sel.selection_statistics(
        r,
        None,
        num_trials=12,
        fallback_sharpes=[0.5, 1.0, 1.5, 2.0],
        selected_sharpe=2.0,
        validation_bars=250,
        annualization=250.0,
    )
    v = np.var(np.array([0.5, 1.0, 1.5, 2.0]) / math.sqrt(250), ddof=1)
    sr0 = sel.expected_max_sharpe(12, v)
    assert out["num_trials"] == 12
    assert out["dsr"] == pytest.approx(
        sel.probabilistic_sharpe_ratio(2.0 / math.sqrt(250), sr0, 250, 0.0, 3.0)
    )
    assert "normal returns assumed" in out["dsr_note"]


def test_a_number_of_bars_per_year_is_used_as_given():
    r = _series(np.random.default_rng(2).normal(0.001, 0.01, 100))
    assert m.sharpe_ratio(r, 250.0) == pytest.approx(m.sharpe_ratio(r, "1d") * math.sqrt(250 / 252))
