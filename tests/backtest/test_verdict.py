"""The verdict comes first and says, in words and numbers, whether the agent beat its
reference after costs, whether the selection's edge is luck, and what the run spent; the
tearsheet's small details tell the truth (colours, curves, tilts, exposure, bar counts)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from finpod.backtest import backtest_market, run_backtest
from finpod.backtest.learning_plot import learning_panel
from finpod.backtest.run_record import run_spend
from finpod.backtest.selection import probability_of_backtest_overfitting
from finpod.backtest.tearsheet import render_tearsheet
from finpod.backtest.verdict import (
    PBO_THRESHOLD,
    backtest_verdict,
    edge_sentence,
    folds_luck_sentence,
    luck_sentence,
    spend_lines,
)
from finpod.env import EnvConfig
from finpod.errors import FinpodError

from .fakes import make_market, make_run_dir


@pytest.fixture(scope="module")
def market():
    return make_market(num_bars=120, seed=4)


def _tilted(market, scale: float):
    """A policy that tilts into the first stock by ``scale`` of its action range."""
    n = market.num_stocks

    def policy(obs):
        action = torch.zeros(1, n)
        action[0, 0] = scale
        return action

    return policy


@pytest.fixture(scope="module")
def result(market):
    return backtest_market(market, _tilted(market, 0.5), EnvConfig(), run_id="r1", num_trials=5)


# ------------------------------------------------------------------------ the verdict
def test_significant_positive_active_return_reads_as_an_edge():
    tone, text = edge_sentence(0.021, 7.1, 7.0, 0.003, "the equal-weight reference")
    assert tone == "edge"
    assert text.startswith("Beat the equal-weight reference by +2.10 %/yr after costs")
    assert "IR 7.10 (t 7.00, significant at 5 %)" in text and "tracking error 0.30 %/yr" in text


def test_active_return_below_the_threshold_is_no_significant_edge():
    tone, text = edge_sentence(0.0001, 0.02, 0.11, 0.004, "the equal-weight reference")
    assert tone == "none"
    assert text.startswith("No significant edge over the equal-weight reference")
    assert "(t 0.11, not significant at 5 %)" in text


def test_significantly_negative_active_return_reads_as_underperforming():
    tone, text = edge_sentence(-0.03, -2.5, -2.4, 0.01, "the equal-weight reference")
    assert tone == "loss" and text.startswith("Trailed the equal-weight reference by -3.00 %/yr")


def test_selection_line_reads_dsr_and_pbo_against_their_thresholds():
    luck = luck_sentence(0.514, 0.709, 37)
    assert "DSR 0.514 < 0.95: the validation edge is consistent with luck from 37" in luck
    assert "PBO 0.709 ≥ 0.5: the selection is noise" in luck
    sound = luck_sentence(0.97, 0.1, 37)
    assert "DSR 0.970 ≥ 0.95" in sound and "PBO 0.100 < 0.5" in sound


def _pbo_of_one_half() -> float:
    """A PBO of exactly 0.5 from real CSCV: 4 candidates, 4 blocks, 3 of the 6 splits
    rank the in-sample winner below the out-of-sample median."""
    returns = np.random.default_rng(2).standard_normal((40, 4)) * 0.01
    pbo = probability_of_backtest_overfitting(returns, num_partitions=4)
    assert len(pbo.logits) == 6 and int((pbo.logits <= 0).sum()) == 3
    return pbo.pbo


def test_a_pbo_of_exactly_one_half_reads_as_noise():
    pbo = _pbo_of_one_half()
    assert pbo == PBO_THRESHOLD == 0.5
    assert "PBO 0.500 ≥ 0.5: the selection is noise" in luck_sentence(0.97, pbo, 4)


def test_a_fold_with_a_pbo_of_exactly_one_half_counts_as_noise():
    line = folds_luck_sentence([0.97, 0.98], [_pbo_of_one_half(), 0.1])
    assert "PBO ≥ 0.5 (selection is noise) in 1 of 2 folds" in line


def test_null_market_has_its_own_headline(result):
    base = backtest_verdict(result)
    result.info["market_regime"] = "null"
    try:
        null = backtest_verdict(result)
    finally:
        del result.info["market_regime"]
    assert base.word != "NULL MARKET"
    assert null.word == "NULL MARKET" and null.colour != base.colour
    assert any("no planted signal" in line for line in null.lines)


def test_tearsheet_opens_with_the_verdict_before_any_table(result):
    page = render_tearsheet(result)
    verdict = page.index("class='verdict")
    assert verdict < page.index("<table")
    box = page[verdict : page.index("</p></div>", verdict)]
    word = backtest_verdict(result).word
    assert f">{word}<" in box
    assert "after costs" in box and "DSR" in box and "0.95" in box and "PBO" in box


def test_psr_of_the_total_return_is_labelled_market_level_below_the_verdict(result):
    page = render_tearsheet(result)
    metrics = page[page.index("<h2>Metrics</h2>") : page.index("<h2>Selection statistics")]
    assert "P[true Sharpe" not in metrics  # the PSR row of the metrics table
    market = page.index("<h2>Market-level statistics</h2>")
    assert "market-level: measures the market, not the agent" in page[market:]
    assert page.index("class='verdict") < market


def test_run_spend_reads_throughput_learning_and_the_budget_record():
    run_meta = {
        "kind": "tournament",
        "throughput": {"env_steps": 100_000, "wall_s": 300.0},
        "learning": {"env_steps": 40_000, "updates": 10_000},
        "budget": {"pods": {"p1": 30_000, "p2": 70_000}, "promotions": 3, "stops": [1, 2]},
    }
    board = {"candidates_evaluated": 2, "entries": [{"env_steps": 40_000}]}
    spend = run_spend(run_meta, board, None)
    assert spend["winner_lineage_share"] == pytest.approx(0.4)
    assert spend["updates_per_env_step"] == pytest.approx(0.25)
    lines = " ".join(spend_lines(spend))
    assert "100,000 env steps" in lines and "5.0 min wall time" in lines
    assert "10,000 gradient steps (0.25 per env step)" in lines
    assert "30,000 / 70,000 / 70,000" in lines and "3 promotions" in lines and "2 stops" in lines
    assert "40 % of all env steps" in lines


def test_run_spend_without_a_budget_record_says_nothing_of_one():
    spend = run_spend({"kind": "agent"}, {"entries": [{"env_steps": 5, "updates": 2}]}, None)
    assert "budget" not in spend
    assert not any("Tournament" in line for line in spend_lines(spend))


# ----------------------------------------------------------------- the tearsheet's details
def _curves(pods: int, points: int, metric: str = "sharpe", split: str = "validation"):
    rows = [
        {
            "pod_id": f"p{p:02d}",
            "env_steps": 100 * (i + 1),
            "wall_s": float(i),
            "split": split,
            "metric": metric,
            "value": float(np.sin(p + i)),
        }
        for p in range(pods)
        for i in range(points)
    ]
    return pd.DataFrame(rows)


def _learning_figure(result, curves) -> Figure:
    result.learning_curves = curves
    try:
        fig = Figure()
        learning_panel(result)(fig)
    finally:
        result.learning_curves = None
    return fig


def test_learning_curve_colours_do_not_repeat_after_ten_pods(result):
    fig = _learning_figure(result, _curves(pods=14, points=3))
    colours = [to_hex(line.get_color()) for line in fig.axes[0].get_lines()]
    assert len(colours) == 14 and len(set(colours)) == 14


def test_sparse_episode_returns_give_way_to_a_curve_with_several_points(result):
    # PPO: an episode ends once in a while, so episode_return has one finite value per pod.
    sparse = _curves(pods=2, points=6, metric="episode_return", split="train")
    sparse.loc[sparse["env_steps"] != 300, "value"] = np.nan
    dense = _curves(pods=2, points=6, metric="reward_mean", split="train")
    fig = _learning_figure(result, pd.concat([sparse, dense]))
    lines = fig.axes[0].get_lines()
    assert "reward_mean" in fig.axes[0].get_title()
    assert all(len(line.get_xdata()) == 6 and line.get_linestyle() != "None" for line in lines)


def test_a_pod_scored_once_is_a_marked_and_labelled_point(result):
    fig = _learning_figure(result, _curves(pods=2, points=1))
    ax = fig.axes[0]
    for line in ax.get_lines():
        assert line.get_marker() == "o" and line.get_label().endswith("(1 point)")
    assert sorted(t.get_text() for t in ax.texts) == ["p00", "p01"]


def test_largest_tilts_leave_out_rows_that_round_to_zero(result):
    real = result.info["largest_tilts"]
    result.info["largest_tilts"] = [
        {"ticker": "BIG", "mean_active_weight": 0.0123},
        {"ticker": "NIL", "mean_active_weight": 0.00001},
    ]
    try:
        page = render_tearsheet(result)
    finally:
        result.info["largest_tilts"] = real
    start = page.index("<h3>Largest average tilts</h3>")
    tilts = page[start : page.index("<h2>", start)]
    assert "BIG" in tilts and "+1.23 pp" in tilts
    assert "NIL" not in tilts and "+0.00 pp" not in tilts


def test_benchmarks_report_their_exposure(result):
    exposure = result.metrics.loc["mean_exposure"]
    for name in result.benchmark_returns.columns:
        assert np.isfinite(exposure[name]), name
    assert exposure["index"] == 1.0
    assert 0.5 < exposure["reference"] <= 1.0


def test_benchmark_exposure_survives_save_and_load(result, tmp_path):
    from finpod.backtest import BacktestResult

    back = BacktestResult.load(result.save(tmp_path / "r1"))
    pd.testing.assert_series_equal(
        back.metrics.loc["mean_exposure"], result.metrics.loc["mean_exposure"]
    )


def test_tearsheet_counts_the_split_bars_as_finpod_info_does(result, market):
    page = render_tearsheet(result)
    bars = re.search(r"backtest split: [^(]*\((\d+) bars of 1d, (\d+) returns\)", page)
    assert bars is not None
    assert int(bars.group(1)) == len(market.timestamps)  # the manifest's split bars
    assert int(bars.group(2)) == len(market.timestamps) - 1


def test_top_k_beyond_the_leaderboard_is_refused_before_any_work(tmp_path, market):
    run = make_run_dir(tmp_path, market, num_entries=1)
    with pytest.raises(FinpodError, match="has 1") as err:
        run_backtest(run, agent="top-3")
    assert err.value.hint == "use --agent best"


def test_top_k_within_the_leaderboard_is_not_refused(tmp_path, market):
    run = make_run_dir(tmp_path, market, num_entries=3)
    board = json.loads((run / "leaderboard.json").read_text())
    assert len(board["entries"]) == 3
    # Refused only for the dataset that is not on disk, after the agent check passed.
    with pytest.raises(FinpodError, match="dataset"):
        run_backtest(run, agent="top-3")
