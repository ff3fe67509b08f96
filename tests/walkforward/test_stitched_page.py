"""The walk-forward page of a tiny run (2 folds, 1 seed): every stitched metric filled or
its row absent with the reason, one Sharpe convention, the embargo and the steps trained
said as they were, plurals right."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from .tiny import run_tiny_walkforward


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    lines: list[str] = []
    # 8 envs × horizon 8: PPO trains whole rollouts of 64 steps → 1,024
    result = run_tiny_walkforward(tmp_path_factory.mktemp("wf-page"), 1000, lines.append)
    return result, lines


def test_every_stitched_metric_of_the_agent_is_filled(tiny_run):
    result, _ = tiny_run
    saved = pd.read_csv(result.out / "stitched_metrics.csv", index_col=0)
    for name in (
        "annual_turnover",
        "costs_paid",
        "costs_pct_capital",
        "mean_exposure",
        "active_return",
        "tracking_error",
        "information_ratio",
        "ir_t_stat",
    ):
        assert np.isfinite(saved.loc[name, "agent"]), name
        assert np.isfinite(saved.loc[name, "seed-0"]), name
    # costs add up over the folds; each fold's own are in its seed record
    records = sorted(result.out.glob("folds/fold-*/seed-0/result.json"))
    per_fold = [json.loads(p.read_text())["metrics"]["agent"]["costs_paid"] for p in records]
    assert saved.loc["costs_paid", "agent"] == pytest.approx(sum(per_fold))


def test_the_page_leaves_no_row_blank_without_saying_why(tiny_run):
    result, _ = tiny_run
    page = result.report.read_text()
    table = page[page.index("Stitched out-of-sample metrics") : page.index("Stitched equity")]
    # the synthetic market has no index: alpha and beta are absent, with the reason
    assert "Alpha (annual, vs index)</th>" not in table
    assert "Rows not shown: Alpha (annual, vs index): the dataset has no index" in table
    for label in ("Turnover", "Costs paid", "Mean exposure", "Tracking error", "t-statistic"):
        assert label in table, label


def test_one_sharpe_convention_the_embargo_the_steps_and_plurals(tiny_run):
    result, lines = tiny_run
    page = result.report.read_text()
    meta = re.search(r"<p class='meta'>(.*?)</p>", page).group(1)
    assert "embargo 5 sessions (the default)" in meta and "default sessions" not in meta
    assert "1 seed: 0" in meta and "1 seeds" not in page
    assert "1,000 env steps asked per fold × seed, 1,024 trained" in meta
    assert "Sharpe ratio (annualized)" in page
    # the selections table writes the validation Sharpe annualized, as the folds table does
    sel = pd.read_csv(result.out / "selections.csv")
    assert "selected_validation_sharpe_per_bar" not in sel
    fold_pick = sel[sel["seed"] == "all"].set_index("fold")["selected_validation_sharpe"]
    assert fold_pick.to_numpy() == pytest.approx(result.folds["validation_score"].to_numpy())
    assert "1 seed of ppo" in lines[0] and "1 seeds" not in "\n".join(lines)
    assert any("trained 1,024 env steps" in line for line in lines)
