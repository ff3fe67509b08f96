"""The walk-forward page of a tiny run (2 folds, 1 seed): every stitched metric filled or
its row absent with the reason, one Sharpe convention, the embargo and the steps trained
said as they were, plurals right."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from finpod.walkforward import FoldSpec, run_walkforward

STRATEGY = """
[agent]
algorithm = "ppo"
[agent.hparams]
horizon = 8
minibatch_size = 64
update_epochs = 1
actor_hidden = [16]
critic_hidden = [16]
[env]
action_mode = "weights"
episode_length = 40
[train]
num_envs = 8
total_steps = 512
eval_every = 128
seed = 3
device = "cpu"
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("wf-page")
    (root / "tiny.toml").write_text(STRATEGY)
    data = build_dataset(
        "synthetic", root / "syn", n_tickers=3, n_bars=1100, seed=0, start="2000-01-03"
    )
    lines: list[str] = []
    result = run_walkforward(
        data,
        root / "tiny.toml",
        root / "wf",
        spec=FoldSpec(train="400", validation="200", backtest="200", folds=2),
        seeds=1,
        steps=1000,  # 8 envs × horizon 8: PPO trains whole rollouts of 64 steps → 1,024
        use_ray=False,
        log=lines.append,
    )
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
