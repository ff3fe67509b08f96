"""run_backtest on a run directory: agent selection, honesty, errors, and the CLI."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from finpod.backtest import BacktestResult, run_backtest
from finpod.backtest import metrics as m
from finpod.backtest import selection as sel
from finpod.backtest.agents import ensemble_policy, load_agents, parse_agent
from finpod.backtest.run_record import RunRecord
from finpod.errors import FinpodError
from finpod.runs import Leaderboard

from .fakes import FakeDataset, make_market, make_run_dir


@pytest.fixture
def splits():
    whole = make_market(num_bars=420, seed=5)
    return {
        "train": whole.slice(0, 200),
        "validation": whole.slice(200, 280),
        "backtest": whole.slice(280, 420),
    }


@pytest.fixture
def run_dir(tmp_path, splits):
    (tmp_path / "dataset").mkdir()
    return make_run_dir(tmp_path, splits["backtest"], dataset_path=str(tmp_path / "dataset"))


def test_backtest_loads_only_the_backtest_split(run_dir, splits, monkeypatch):
    data = FakeDataset(splits).install(monkeypatch)
    result = run_backtest(run_dir)
    assert data.loaded == ["backtest"]
    bt = splits["backtest"].timestamps
    for frame in (result.returns, result.account_value, result.positions, result.all_returns):
        assert frame.index.min() >= bt[0] and frame.index.max() <= bt[-1]
    assert pd.DatetimeIndex(result.transactions.index).min() > bt[0]


def test_poisoned_train_and_validation_splits_change_nothing(run_dir, splits, monkeypatch):
    FakeDataset(splits).install(monkeypatch)
    clean = run_backtest(run_dir)
    poisoned = dict(splits)
    for name in ("train", "validation"):
        s = splits[name]
        poisoned[name] = dataclasses.replace(
            s,
            close=torch.full_like(s.close, float("nan")),
            open=torch.full_like(s.open, -1.0),
            features=torch.full_like(s.features, 1e9),
            benchmark=s.benchmark * float("nan"),
        )
    FakeDataset(poisoned).install(monkeypatch)
    dirty = run_backtest(run_dir)
    pd.testing.assert_frame_equal(clean.metrics, dirty.metrics)
    pd.testing.assert_series_equal(clean.account_value, dirty.account_value)


def test_best_uses_the_top_entry_deterministically(run_dir, splits, monkeypatch):
    FakeDataset(splits).install(monkeypatch)
    a = run_backtest(run_dir, agent="best")
    b = run_backtest(run_dir, agent="best")
    assert a.info["pod_ids"] == ["pod000"]
    pd.testing.assert_series_equal(a.account_value, b.account_value)
    # the run's env settings are used (cost rate 0.001 in the run's strategy)
    assert a.env_config.cost_rate == 0.001
    assert a.costs.sum() == pytest.approx(0.001 * a.traded_value.sum(), rel=1e-9)
    assert a.initial_capital == 1_000_000.0
    assert a.account_value.iloc[0] == 1_000_000.0


def test_top_k_averages_the_actions_of_the_top_entries(run_dir, splits, monkeypatch):
    FakeDataset(splits).install(monkeypatch)
    agents = load_agents(run_dir, Leaderboard.load(run_dir).entries[:2], torch.device("cpu"))
    obs = torch.randn(4, agents[0].obs_dim)
    mean = (agents[0].act(obs, deterministic=True) + agents[1].act(obs, deterministic=True)) / 2
    torch.testing.assert_close(ensemble_policy(agents)(obs), mean)
    result = run_backtest(run_dir, agent="top-2")
    assert result.info["pod_ids"] == ["pod000", "pod001"]
    best = run_backtest(run_dir, agent="best")
    assert not result.account_value.equals(best.account_value)


def test_statistics_use_every_recorded_candidates_validation_returns(run_dir, splits, monkeypatch):
    from finpod.runs.candidates import load_candidates, record_candidate

    FakeDataset(splits).install(monkeypatch)
    rng = np.random.default_rng(11)
    val = rng.normal(0.0, 0.01, (79, 14))
    val[:, 0] += 0.003
    for j in range(14):  # more candidates than the leaderboard's count of 12
        record_candidate(run_dir, f"pod{j:03d}", val[:, j], score=2.0 - 0.1 * j)
    result = run_backtest(run_dir)
    stats = result.statistics
    cands = load_candidates(run_dir)
    variance = float(np.var(cands.sharpes(), ddof=1))
    assert result.num_trials == 14 and stats["num_trials"] == 14
    assert stats["selected_candidate"] == "pod000" and stats["validation_bars"] == 79
    assert stats["dsr"] == pytest.approx(sel.deflated_sharpe_ratio(val[:, 0], 14, variance))
    assert stats["pbo"] == pytest.approx(sel.probability_of_backtest_overfitting(val).pbo)
    assert stats["psr"] == pytest.approx(sel.probabilistic_sharpe(result.returns))
    assert result.trial_variance == pytest.approx(variance)


def test_old_runs_deflate_with_the_leaderboard_count_and_validation_sharpes(
    run_dir, splits, monkeypatch
):
    manifest = {"splits": {"validation": {"start_index": 200, "stop_index": 280}}}
    FakeDataset(splits, manifest=manifest).install(monkeypatch)
    result = run_backtest(run_dir)
    assert result.num_trials == 12
    sharpes = RunRecord.read(run_dir).validation.annual_sharpes
    assert len(sharpes) == 12  # one per pod: its last validation Sharpe
    var = sel.trial_sharpe_variance(sharpes, 252.0)
    sr = 2.0 / np.sqrt(252.0)  # the top entry's annual validation Sharpe, per bar
    expected = sel.probabilistic_sharpe_ratio(sr, sel.expected_max_sharpe(12, var), 79, 0.0, 3.0)
    assert result.statistics["dsr"] == pytest.approx(expected)
    assert result.statistics["pbo"] is None and result.statistics["pbo_note"]


def test_changed_dataset_is_refused_unless_chosen_explicitly(run_dir, splits, monkeypatch):
    FakeDataset(splits, content_hash="other").install(monkeypatch)
    with pytest.raises(FinpodError, match="content hash"):
        run_backtest(run_dir)
    # an explicit --data is the user's choice: it runs, and the result says so
    result = run_backtest(run_dir, data=run_dir.parent / "dataset")
    assert result.info["dataset_hash_matches_run"] is False
    assert result.info["run_dataset_hash"] == "abc123"
    assert "Cross-dataset backtest" in result.disclosures["dataset"]
    folder = result.save(run_dir.parent / "rep")
    meta = json.loads((folder / "backtest.json").read_text())
    assert "Cross-dataset backtest" in meta["disclosures"]["dataset"]
    page = result.to_html(folder / "t.html").read_text()
    assert "Cross-dataset backtest: run run-test was trained and selected on dataset abc123" in page


def test_same_dataset_has_no_cross_dataset_note(run_dir, splits, monkeypatch):
    FakeDataset(splits).install(monkeypatch)
    result = run_backtest(run_dir)
    assert "dataset" not in result.disclosures
    assert "Cross-dataset" not in result.to_html(run_dir.parent / "t.html").read_text()


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (
            {"universe": {"point_in_time": False, "note": "NASDAQ-100 members on 2019-12-31"}},
            "not point-in-time: members as of 2019-12-31: survivorship bias",
        ),
        (
            {
                "universe": "NASDAQ-100 members on 2019-12-31 (95 with data)",
                "notes": ["survivorship: the tickers are the members of 2019-12-31"],
            },
            "members as of 2019-12-31: survivorship bias",
        ),
        ({"universe": {"point_in_time": True, "note": "monthly membership"}}, "is point-in-time"),
        ({}, "point-in-time status unknown"),
    ],
)
def test_the_report_says_whether_the_universe_is_point_in_time(
    run_dir, splits, monkeypatch, manifest, words
):
    FakeDataset(splits, manifest=manifest).install(monkeypatch)
    result = run_backtest(run_dir)
    assert words in result.disclosures["universe"]
    folder = result.save(run_dir.parent / "rep")
    assert words in json.loads((folder / "backtest.json").read_text())["disclosures"]["universe"]
    assert words in result.to_html(folder / "t.html").read_text()


def test_the_index_column_is_labelled_a_level_with_no_costs(run_dir, splits, monkeypatch):
    FakeDataset(splits, manifest={"benchmark": "^NDX"}).install(monkeypatch)
    result = run_backtest(run_dir)
    label = result.disclosures["benchmark"]
    assert "^NDX index level" in label and "no costs" in label
    assert label in result.to_html(run_dir.parent / "t.html").read_text()


def test_the_backtest_uses_the_annualization_of_the_dataset_calendar(run_dir, splits, monkeypatch):
    cal = dict(splits, backtest=dataclasses.replace(splits["backtest"], bars_per_year=251.5))
    FakeDataset(cal).install(monkeypatch)
    result = run_backtest(run_dir)
    assert result.bars_per_year == 251.5 and result.info["annualization"] == 251.5
    assert result.metrics.loc["sharpe", "agent"] == pytest.approx(
        m.sharpe_ratio(result.returns, 251.5)
    )


def test_missing_checkpoint_and_bad_agent_are_finpod_errors(run_dir, splits, monkeypatch):
    FakeDataset(splits).install(monkeypatch)
    (run_dir / "checkpoints" / "pod000.safetensors").unlink()
    with pytest.raises(FinpodError, match="pod000"):
        run_backtest(run_dir)
    with pytest.raises(FinpodError, match="top-k"):
        parse_agent("worst")
    assert parse_agent("top-k") == 3 and parse_agent("top-5") == 5 and parse_agent("best") == 1


def test_cli_backtest_writes_reports_and_report_redraws_without_a_rollout(
    run_dir, splits, monkeypatch, tmp_path, patch_everywhere
):
    from finpod.cli import app

    FakeDataset(splits).install(monkeypatch)
    out = tmp_path / "reports"
    cli = CliRunner()
    args = ["backtest", str(run_dir), "--reports", str(out), "--device", "cpu", "--details"]
    res = cli.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "PSR (backtest Sharpe > 0)" in res.output and "DSR (selection among 12" in res.output
    folder = out / "run-test"
    for name in ("tearsheet.html", "returns.parquet", "positions.parquet", "metrics.csv"):
        assert (folder / name).is_file()
    saved = pd.read_csv(folder / "metrics.csv", index_col=0)
    assert saved.loc["sharpe", "agent"] == pytest.approx(
        BacktestResult.load(folder).metrics.loc["sharpe", "agent"]
    )
    (folder / "tearsheet.html").unlink()

    def no_rollout(*args, **kwargs):
        raise AssertionError("report must not run a rollout")

    import finpod.env

    patch_everywhere(finpod.env, "rollout", no_rollout)
    res = cli.invoke(app, ["report", "run-test", "--reports", str(out)])
    assert res.exit_code == 0, res.output
    assert (folder / "tearsheet.html").stat().st_size > 10_000


def test_cli_unknown_run_is_one_red_line_and_exit_1(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "finpod", "backtest", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "not found" in out.stderr and "Traceback" not in out.stderr


def test_every_agent_error_lists_the_same_names_selected_included(run_dir):
    from finpod.backtest.agents import AGENT_CHOICES, canonical_agent, resolve_agent

    for bad in (lambda: parse_agent("bogus"), lambda: resolve_agent(run_dir, "bogus")):
        with pytest.raises(FinpodError) as err:
            bad()
        assert AGENT_CHOICES in str(err.value) and "selected" in str(err.value)
    assert [canonical_agent(a) for a in ("best", "top-k", "Top5", "ensemble", "ensemble-4")] == [
        "best",
        "top-3",
        "top-5",
        "ensemble-3",
        "ensemble-4",
    ]


def test_report_defaults_to_the_agent_backtest_selected_and_says_what_it_trades(
    run_dir, splits, monkeypatch, tmp_path
):
    from finpod.cli import app

    board = json.loads((run_dir / "leaderboard.json").read_text())
    board["selected"] = "ensemble-2"
    board["ensemble"] = {
        "id": "ensemble-2@end",
        "members": ["pod000", "pod001"],
        "score": 1.5,
        "selected": True,  # what a tournament writes beside "selected" (Leaderboard.to_json)
    }
    (run_dir / "leaderboard.json").write_text(json.dumps(board))
    FakeDataset(splits).install(monkeypatch)
    out = tmp_path / "reports"
    cli = CliRunner()
    res = cli.invoke(app, ["backtest", str(run_dir), "--reports", str(out), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    folder = out / "run-test" / "ensemble-2"
    result = BacktestResult.load(folder)
    assert result.info["agent"].startswith(
        "selected on validation: ensemble-2 (mean target weights of the top 2 entries)"
    )
    note = result.statistics["dsr_note"]
    assert "ensemble's own DSR" in note and "mean target weights of the top 2" in note
    assert "mean action" not in note and "best candidate" not in note
    (folder / "tearsheet.html").unlink()
    monkeypatch.chdir(tmp_path)  # runs/<id> is looked up from here, as a user's shell does
    (tmp_path / "runs").mkdir()
    run_dir.rename(tmp_path / "runs" / "run-test")
    for run, args in (
        ("run-test", []),
        ("run-test", ["--agent", "selected"]),
        (str(out / "run-test"), []),  # a reports/<run> folder
        ("run-test", ["--agent", "ensemble-2"]),
    ):
        res = cli.invoke(app, ["report", run, "--reports", str(out), *args])
        assert res.exit_code == 0, res.output
        assert (folder / "tearsheet.html").is_file()
        (folder / "tearsheet.html").unlink()


def test_the_dsr_note_names_whose_dsr_and_what_the_backtest_trades():
    from finpod.backtest.disclosures import dsr_note

    assert dsr_note("best", ["p0"]) is None
    top = dsr_note("top-3", ["p0", "p1", "p2"])
    assert "best entry (p0)" in top and "mean action of the top 3" in top
    own = dsr_note("ensemble-3", ["p0", "p1", "p2"], ensemble_scored=True)
    assert "ensemble's own DSR" in own and "mean target weights of the top 3" in own
    other = dsr_note("ensemble-2", ["p0", "p1"], ensemble_scored=False)
    assert "best entry (p0)" in other and "did not score this ensemble" in other


def test_the_backtest_progress_total_counts_every_rollout(run_dir, splits, monkeypatch):
    from finpod.backtest.benchmarks import ROLLOUTS

    FakeDataset(splits).install(monkeypatch)
    seen: list[str] = []
    run_backtest(run_dir, on_rollout=seen.append)
    assert seen == list(ROLLOUTS)  # the bar's total: it ends at 5/5, not 5/4
