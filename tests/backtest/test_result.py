"""BacktestResult: metrics table, save/load, and a self-contained tearsheet."""

from __future__ import annotations

import base64
import dataclasses
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest import BacktestResult, backtest_market
from finpod.backtest import metrics as m
from finpod.backtest import selection as sel
from finpod.backtest.benchmarks import BENCHMARKS
from finpod.env import EnvConfig


def _random_policy(n, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def policy(obs):
        return torch.rand(1, n, generator=gen) * 2 - 1

    return policy


@pytest.fixture(scope="module")
def result():
    from .fakes import make_market

    market = make_market()
    return backtest_market(
        market, _random_policy(market.num_stocks), EnvConfig(), run_id="r1", num_trials=20
    )


def test_metrics_table_has_agent_index_and_every_benchmark(result):
    assert list(result.metrics.columns) == ["agent", "index", "reference", *BENCHMARKS]
    assert list(result.metrics.index) == list(m.METRIC_NAMES)


def test_agent_metrics_are_the_metric_functions_of_its_returns(result):
    col = result.metrics["agent"]
    r, bench = result.returns, result.index_returns
    assert col["sharpe"] == pytest.approx(m.sharpe_ratio(r, "1d"))
    assert col["max_drawdown"] == pytest.approx(m.max_drawdown(r))
    assert col["beta"] == pytest.approx(m.alpha_beta(r, bench, "1d")[1])
    assert col["costs_paid"] == pytest.approx(result.costs.sum())
    assert col["costs_paid"] == pytest.approx(result.transactions["cost"].sum())
    assert col["psr"] == pytest.approx(sel.probabilistic_sharpe(r))
    # the account identity holds for the stored pandas objects
    np.testing.assert_allclose(result.positions.sum(axis=1), result.account_value, rtol=1e-9)
    np.testing.assert_allclose(
        result.account_value.pct_change().iloc[1:], result.returns, rtol=1e-9
    )


def test_index_returns_come_from_the_benchmark_level(result, market):
    level = market.benchmark.to_numpy()
    expected = level[1:] / level[:-1] - 1
    np.testing.assert_allclose(result.benchmark_returns["index"].to_numpy(), expected, rtol=1e-9)
    assert result.metrics.loc["beta", "index"] == 1.0


def test_backtest_json_carries_the_statistics_with_reasons_for_nulls(result, tmp_path):
    import json

    result.save(tmp_path / "rep")
    meta = json.loads((tmp_path / "rep" / "backtest.json").read_text(encoding="utf-8"))
    stats = meta["statistics"]
    assert {"psr", "dsr", "pbo", "num_trials", "selection_split"} <= set(stats)
    assert stats["selection_split"] == "validation" and stats["num_trials"] == 20
    assert stats["psr"] == pytest.approx(sel.probabilistic_sharpe(result.returns))
    # no candidate record here: DSR and PBO are undefined, and say why
    assert stats["dsr"] is None and stats["dsr_note"]
    assert stats["pbo"] is None and stats["pbo_note"]
    assert meta["annualization"] == 252.0
    assert BacktestResult.load(tmp_path / "rep").statistics == stats


def test_annualization_is_the_markets_calendar_count(market):
    cal = dataclasses.replace(market, bars_per_year=250.0)
    policy = lambda o: torch.full((1, market.num_stocks), 0.2)  # noqa: E731
    res = backtest_market(cal, policy, EnvConfig(), with_benchmarks=False)
    assert res.bars_per_year == 250.0
    assert res.metrics.loc["sharpe", "agent"] == pytest.approx(m.sharpe_ratio(res.returns, 250.0))
    assert "250 bars per year" in res.to_html(Path(tempfile.mkdtemp()) / "t.html").read_text()


def test_save_then_load_round_trips_every_frame(result, tmp_path):
    result.save(tmp_path / "rep")
    back = BacktestResult.load(tmp_path / "rep")
    pd.testing.assert_series_equal(back.returns, result.returns, check_freq=False)
    pd.testing.assert_frame_equal(back.positions, result.positions, check_freq=False)
    pd.testing.assert_frame_equal(back.transactions, result.transactions)
    pd.testing.assert_frame_equal(back.metrics, result.metrics)
    assert back.num_trials == 20 and back.bar == "1d"
    assert not list((tmp_path / "rep").glob("*.tmp"))


def test_load_of_missing_report_is_a_finpod_error(tmp_path):
    from finpod.errors import FinpodError

    with pytest.raises(FinpodError, match="finpod backtest"):
        BacktestResult.load(tmp_path)


def test_tearsheet_is_self_contained_with_decodable_images(result, tmp_path):
    path = result.to_html(tmp_path / "t.html")
    page = path.read_text(encoding="utf-8")
    srcs = re.findall(r'<img[^>]*src="([^"]+)"', page)
    assert len(srcs) >= 5
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # nothing fetched from elsewhere: no external links, scripts or stylesheets
    assert not re.search(r'(src|href)="(?!data:)', page)
    for title in ("Metrics", "Equity curve", "Drawdown", "Monthly", "Rolling Sharpe", "Holdings"):
        assert title in page
    # the table shows the agent's Sharpe as computed
    assert f"{result.metrics.loc['sharpe', 'agent']:.2f}" in page


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_backtest_on_cuda_matches_cpu(market):
    def policy(obs):
        return torch.linspace(-0.5, 1.0, market.num_stocks, device=obs.device).unsqueeze(0)

    cfg = EnvConfig(action_mode="weights")
    cpu = backtest_market(market, policy, cfg)
    gpu = backtest_market(market.to("cuda"), policy, cfg)
    pd.testing.assert_frame_equal(cpu.metrics, gpu.metrics, rtol=1e-6)
    pd.testing.assert_series_equal(cpu.account_value, gpu.account_value, rtol=1e-9)


def test_intraday_backtest_annualizes_for_its_bar_size(tmp_path):
    from .fakes import make_market

    market = make_market(num_bars=400, bar="5min", late_listing=False)
    gen = torch.Generator().manual_seed(1)
    res = backtest_market(
        market, lambda o: torch.rand(1, market.num_stocks, generator=gen), EnvConfig()
    )
    sharpe = res.metrics.loc["sharpe", "agent"]
    assert sharpe == pytest.approx(m.sharpe_ratio(res.returns, "5min"))
    assert sharpe == pytest.approx(m.sharpe_ratio(res.returns, "1d") * np.sqrt(78))
    assert res.metrics.loc["annual_volatility", "momentum"] == pytest.approx(
        m.annual_volatility(res.benchmark_returns["momentum"], "5min")
    )
    assert "19656 bars per year" in res.to_html(tmp_path / "t.html").read_text()


def test_an_agent_that_never_trades_still_gets_a_report(market, tmp_path):
    res = backtest_market(
        market, lambda o: -torch.ones(1, market.num_stocks), EnvConfig(action_mode="weights")
    )
    assert res.transactions.empty
    assert (res.account_value == 1_000_000.0).all()
    col = res.metrics["agent"]
    assert col["cumulative_return"] == 0.0 and col["costs_paid"] == 0.0
    assert col["annual_turnover"] == 0.0 and np.isnan(col["sharpe"])
    page = res.to_html(tmp_path / "t.html").read_text()
    assert page.count("<img") >= 5


def test_a_missing_index_print_moves_the_return_to_the_next_print(market):
    from finpod.backtest.returns import index_returns

    level = market.benchmark.copy()
    level.iloc[10] = float("nan")
    r = index_returns(dataclasses.replace(market, benchmark=level))
    assert r.iloc[9] == 0.0  # bar 10 (returns start at bar 1)
    assert r.iloc[10] == pytest.approx(level.iloc[11] / level.iloc[9] - 1)
    total = (1 + r).prod() - 1
    assert total == pytest.approx(level.iloc[-1] / level.iloc[0] - 1)


def test_tearsheet_explains_each_statistic_and_drops_the_wrong_label(result, tmp_path):
    page = result.to_html(tmp_path / "t.html").read_text(encoding="utf-8")
    assert "Selection statistics" in page
    for sentence in sel.STATISTIC_MEANINGS.values():
        assert sentence.replace("'", "&#x27;") in page or sentence in page
    # the backtest Sharpe of an agent selected out of sample is tested against 0 (PSR),
    # not against the best of N (that is the DSR, on validation)
    assert "P[SR &gt; 0] after" not in page and "P[SR > 0] after" not in page
    assert "PSR (P[true Sharpe &gt; 0] on this backtest)" in page
    assert "index (level, no costs)" in page


def _saved_with_env(result, folder: Path, env: dict) -> BacktestResult:
    """``result`` saved, its ``backtest.json`` given ``env`` as its recorded settings, read
    back."""
    import json

    result.save(folder)
    meta = json.loads((folder / "backtest.json").read_text())
    meta["info"]["env"] = env
    (folder / "backtest.json").write_text(json.dumps(meta))
    return BacktestResult.load(folder)


def test_the_env_settings_travel_typed_and_are_saved_as_json(result, tmp_path):
    import json

    assert result.env_config == EnvConfig() and "env" not in result.info
    result.save(tmp_path / "rep")
    saved = json.loads((tmp_path / "rep" / "backtest.json").read_text())["info"]["env"]
    assert saved == json.loads(json.dumps(EnvConfig().to_dict()))
    back = BacktestResult.load(tmp_path / "rep")
    assert back.env_config == EnvConfig() and "env" not in back.info


def test_the_tearsheet_reads_the_recorded_env_settings_with_no_defaults_of_its_own(
    result, tmp_path
):
    from finpod.backtest.tearsheet import render_tearsheet

    # Recorded before cost_rate and reference were written: they are EnvConfig's defaults,
    # the settings that backtest ran with (not a 0 % cost of the report's own).
    older = _saved_with_env(result, tmp_path / "older", {"fill_price": "close"})
    assert older.env_config == EnvConfig(fill_price="close")
    page = render_tearsheet(older)
    assert f"fills at bar t+1 close, cost rate {EnvConfig().cost_rate * 100:.2f} %" in page
    assert f"Reference = {EnvConfig().reference}," in page
    recorded = _saved_with_env(result, tmp_path / "recorded", {"cost_rate": 0.001})
    assert recorded.env_config.cost_rate == 0.001 and recorded.start == EnvConfig().start
