"""The stitched table splits the costs into fees and market impact as the backtest does:
each part is the sum of the folds' own, and the parts add up to the costs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from finpod.walkforward.results import fold_weighted_metrics
from tests.walkforward.tiny import page_strategy, run_tiny_walkforward

#: The walk-forward page's tiny strategy, trading under square-root costs at $100M.
STRATEGY = page_strategy(cost_model="sqrt", initial_cash=100_000_000.0)


def test_fees_and_impact_of_the_folds_add_up_separately():
    per_fold = [
        (100, {"costs_paid": 30.0, "fees_paid": 20.0, "impact_paid": 10.0}),
        (50, {"costs_paid": 7.0, "fees_paid": 6.0, "impact_paid": 1.0}),
    ]
    out = fold_weighted_metrics(per_fold)
    assert out["fees_paid"] == pytest.approx(26.0)
    assert out["impact_paid"] == pytest.approx(11.0)
    assert out["fees_paid"] + out["impact_paid"] == pytest.approx(out["costs_paid"])


@pytest.fixture(scope="module")
def sqrt_run(tmp_path_factory):
    return run_tiny_walkforward(tmp_path_factory.mktemp("wf-sqrt"), 1000, strategy=STRATEGY)


def test_stitched_table_splits_fees_and_impact_like_the_backtest(sqrt_run):
    saved = pd.read_csv(sqrt_run.out / "stitched_metrics.csv", index_col=0)
    records = sorted(sqrt_run.out.glob("folds/fold-*/seed-0/result.json"))
    folds = [json.loads(p.read_text())["metrics"]["agent"] for p in records]
    for name in ("fees_paid", "impact_paid"):
        assert np.isfinite(saved.loc[name, "agent"]), name
        assert saved.loc[name, "agent"] == pytest.approx(sum(f[name] for f in folds)), name
    assert saved.loc["impact_paid", "agent"] > 0.0  # square-root costs: impact is paid
    total = saved.loc["fees_paid", "agent"] + saved.loc["impact_paid", "agent"]
    assert total == pytest.approx(saved.loc["costs_paid", "agent"])
    page = sqrt_run.report.read_text()
    table = page[page.index("Stitched out-of-sample metrics") : page.index("Stitched equity")]
    assert "Fees paid ($, of the costs, all folds)" in table
    assert "Market impact paid ($, of the costs, all folds)" in table
