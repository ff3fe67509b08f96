"""The tearsheet's panels say what they show without hiding it: legends beside the data,
one colour per strategy, dollars on the equity axis, a leaderboard that lists only what
differs, and the distribution, tail-risk and active-risk views pyfolio/quantstats users
expect (computed with empyrical and scipy)."""

from __future__ import annotations

from pathlib import Path

import empyrical as ep
import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from finpod.backtest import backtest_market
from finpod.backtest import metrics as m
from finpod.backtest.plot_style import color_of, dollar_formatter
from finpod.backtest.plots import (
    equity_panel,
    monthly_panel,
    rolling_panel,
    turnover_panel,
)
from finpod.backtest.run_record import leaderboard_frame
from finpod.env import EnvConfig
from finpod.runs import Entry, Leaderboard

from .fakes import make_market


@pytest.fixture(scope="module")
def result():
    market = make_market(num_bars=300, seed=2)
    gen = torch.Generator().manual_seed(0)

    def policy(obs):
        return torch.rand(1, market.num_stocks, generator=gen) * 2 - 1

    return backtest_market(market, policy, EnvConfig(), run_id="r1", num_trials=5)


def _drawn(panel, size=(11, 3.6)) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    panel(fig)
    fig.tight_layout()
    fig.canvas.draw()
    return fig


def _legend_clear_of_its_axes(fig: Figure) -> None:
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        inner = ax.get_window_extent(renderer)
        assert not Bbox.intersection(box, inner), ax.get_title()


@pytest.mark.parametrize("panel", [turnover_panel, monthly_panel, equity_panel, rolling_panel])
def test_legends_sit_beside_the_data_never_over_it(result, panel):
    _legend_clear_of_its_axes(_drawn(panel(result)))


def test_rolling_beta_has_a_legend_and_draws_the_agent_in_its_own_colour(result):
    fig = _drawn(rolling_panel(result))
    beta = next(ax for ax in fig.axes if "beta" in ax.get_title())
    lines = {line.get_label(): line for line in beta.get_lines()}
    assert beta.get_legend() is not None
    assert lines["agent"].get_color() == color_of("agent") != color_of("index")
    assert "index (β = 1)" in lines


def test_the_equity_axis_writes_dollars_not_an_offset(result):
    fig = _drawn(equity_panel(result))
    axis = fig.axes[0].yaxis
    assert axis.get_major_formatter()(1_250_000, 0) == "$1.25M"
    assert axis.get_offset_text().get_text() == ""
    assert dollar_formatter()(980_000, 0) == "$980k"


def _board(entries: list[Entry]) -> Leaderboard:
    board = Leaderboard(Path("unused"), len(entries), "sharpe")
    board.entries = list(entries)
    return board


def test_the_leaderboard_lists_only_settings_that_differ():
    def entry(pod, algo, hparams, env):
        return Entry(pod, algo, hparams, 1.0, f"checkpoints/{pod}.safetensors", env=env)

    board = {
        "entries": [
            entry(
                "p0", "ppo", {"learning_rate": 1.00001e-3, "gamma": 0.99}, {"decision_interval": 5}
            ),
            entry(
                "p1", "ppo", {"learning_rate": 1.00002e-3, "gamma": 0.95}, {"decision_interval": 10}
            ),
            entry("a0", "a2c", {"horizon": 32, "gamma": 0.97}, {"decision_interval": 5}),
            entry("a1", "a2c", {"horizon": 32, "gamma": 0.98}, {"decision_interval": 5}),
        ]
    }
    frame = leaderboard_frame(_board(board["entries"])).set_index("pod_id")
    shown = frame["hparams (differing)"]
    assert shown["p0"] == "gamma=0.99" and shown["p1"] == "gamma=0.95"  # lr rounds alike
    assert shown["a0"] == "gamma=0.97"  # horizon=32 is every A2C entry's: not listed
    assert frame.loc["p1", "execution (differing)"] == "decision_interval=10"
    same = leaderboard_frame(_board(board["entries"][2:]))
    assert "execution (differing)" not in same


def test_distribution_statistics_are_empyricals_and_scipys():
    from scipy import stats

    rng = np.random.default_rng(0)
    idx = pd.date_range("2020-01-01", periods=500, freq="B")
    r = pd.Series(rng.standard_t(4, 500) * 0.01, index=idx)
    ref = pd.Series(rng.normal(0, 0.01, 500), index=idx)
    out = m.distribution_statistics(r, ref)
    assert out["value_at_risk"] == pytest.approx(ep.value_at_risk(r))
    assert out["conditional_value_at_risk"] == pytest.approx(ep.conditional_value_at_risk(r))
    assert out["skew"] == pytest.approx(stats.skew(r))
    assert out["kurtosis"] == pytest.approx(stats.kurtosis(r))
    assert out["hit_rate"] == pytest.approx((r > 0).mean())
    assert out["active_hit_rate"] == pytest.approx((r > ref).mean())
    assert out["conditional_value_at_risk"] <= out["value_at_risk"] < 0


def test_active_drawdown_is_the_fall_of_wealth_relative_to_the_reference():
    idx = pd.date_range("2020-01-01", periods=4, freq="B")
    agent = pd.Series([0.0, 0.0, 0.0, 0.0], index=idx)
    ref = pd.Series([0.10, 0.0, -0.5, 0.0], index=idx)
    dd = m.active_drawdown_series(agent, ref)
    # relative wealth 1/1.1, then flat, then doubles back above 1 (new high), then flat
    assert dd.iloc[0] == pytest.approx(1 / 1.1 - 1)
    assert dd.iloc[2] == pytest.approx(0.0) and dd.min() == pytest.approx(1 / 1.1 - 1)
    ir = m.rolling_information_ratio(agent, ref, window=3, bar=252)
    assert ir.iloc[:2].isna().all()


def test_the_tearsheet_shows_the_distribution_and_active_risk(result, tmp_path):
    page = result.to_html(tmp_path / "t.html").read_text()
    for words in (
        "Distribution and tail risk",
        "VaR 5 %",
        "CVaR 5 %",
        "Excess kurtosis",
        "Hit rate",
        "Rolling information ratio and active drawdown",
        "Max active drawdown",
    ):
        assert words in page, words


def test_learning_curves_mark_few_points_and_skip_metrics_without_values(result):
    import dataclasses

    from finpod.backtest.learning_plot import learning_panel

    rows = []
    for pod in ("p0", "p1"):
        for steps in (1000, 2000):  # two evaluations per pod, as a short tournament scores
            rows += [
                {"pod_id": pod, "env_steps": steps, "split": "train", "metric": "episode_return",
                 "value": float("nan")},
                {"pod_id": pod, "env_steps": steps, "split": "train", "metric": "reward_mean",
                 "value": 0.1},
                {"pod_id": pod, "env_steps": steps, "split": "validation", "metric": "sharpe",
                 "value": 1.0},
            ]  # fmt: skip
    curves = dataclasses.replace(result, learning_curves=pd.DataFrame(rows))
    fig = _drawn(learning_panel(curves))
    train, valid = fig.axes
    assert train.get_title() == "train reward_mean per pod (2 points each)"
    assert valid.get_title() == "validation sharpe per pod (2 points each)"
    assert all(line.get_marker() == "o" for line in valid.get_lines())
    _legend_clear_of_its_axes(fig)


def test_monthly_heatmap_numbers_contrast_with_their_cells(result):
    """No black digits on dark red: each month's number is black or white, whichever
    contrasts more with its cell (WCAG ratio at least 4.5:1)."""
    from finpod.backtest.plots import contrast_ratio

    fig = _drawn(monthly_panel(result), (11, 3.8))
    heatmap = fig.axes[0]
    image = heatmap.get_images()[0]
    cells = image.get_array()
    colours = set()
    for text in heatmap.texts:
        j, i = (round(v) for v in text.get_position())
        background = image.to_rgba(cells[i, j])
        colour = matplotlib.colors.to_rgb(text.get_color())
        colours.add(colour)
        assert contrast_ratio(background, colour) >= 4.5, (text.get_text(), background, colour)
    assert len(heatmap.texts) >= 12 and len(colours) == 2  # the darkest cells get white


@pytest.fixture(scope="module")
def page(result, tmp_path_factory) -> str:
    """The tearsheet of ``result`` as HTML text (drawn once for the tests below)."""
    return result.to_html(tmp_path_factory.mktemp("page") / "t.html").read_text()


def _top_of_page(page: str) -> str:
    """The title and run facts: everything before the verdict box."""
    return page.split("<div class='verdict", 1)[0]


def test_the_costs_in_dollars_are_among_the_run_facts_at_the_top(result, page):
    paid = result.metrics.at["costs_paid", "agent"]
    assert paid > 0
    top = _top_of_page(page)
    assert f"costs paid by the agent: ${paid:,.0f}" in top
    share = result.metrics.at["costs_pct_capital", "agent"]
    assert f"({share * 100:.2f} % of initial capital" in top


def test_metric_tables_keep_values_and_names_on_one_line(page):
    """The agent's column is no narrower than a number and no cell of a metrics table
    wraps (a narrow agent column once broke "-13.67 %" over two lines)."""
    from finpod.backtest.page import PAGE_CSS

    metrics = page.split("<h2>Metrics</h2>", 1)[1]
    assert metrics.lstrip().startswith("<table class='metrics'>")
    css = PAGE_CSS.replace("\n", "")
    assert "table.metrics td,table.metrics thead th{white-space:nowrap}" in css
    assert "table.metrics thead th+th{min-width:6.5em}" in css
    assert page.count("<table class='metrics'>") >= 3  # metrics, market-level, distribution
