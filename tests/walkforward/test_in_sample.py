"""A walk-forward fold is backtested only on sessions its agent neither trained nor was
selected on: the plan never cuts another fold, and a job refuses rows that overlap before
it trains."""

from __future__ import annotations

import pytest

from finpod.data.calendar import session_of
from finpod.data.synthetic_market import make_synthetic
from finpod.errors import FinpodError
from finpod.walkforward import FoldSpec, plan_folds
from finpod.walkforward.folds import check_out_of_sample
from finpod.walkforward.job import SeedJob, market_payload, run_seed_job


@pytest.fixture(scope="module")
def minutes():
    """Two tickers of 5-minute bars: 78 bars a session."""
    return make_synthetic(2, 78 * 40, bar="5min", seed=1)


@pytest.mark.parametrize("scheme", ["rolling", "expanding"])
@pytest.mark.parametrize("embargo", [0, 1])
def test_planned_folds_never_backtest_a_session_of_their_train_or_validation(
    minutes, scheme, embargo
):
    spec = FoldSpec(scheme, train="10", validation="5", backtest="5", embargo=embargo)
    folds = plan_folds(minutes.timestamps, spec, minutes.bar)
    assert len(folds) >= 3
    sessions = session_of(minutes.timestamps)
    for f in folds:
        tested = set(sessions[slice(*f.rows("backtest"))])
        for name in ("train", "validation"):
            assert not tested & set(sessions[slice(*f.rows(name))]), (f.index, name)


def test_rows_that_share_a_session_are_refused_though_no_bar_is_shared(minutes):
    sessions = session_of(minutes.timestamps)
    # Validation ends mid-session 30; the backtest starts at the next bar of that session.
    rows = {"train": (0, 78 * 20), "validation": (78 * 20, 78 * 30 + 39)}
    rows["backtest"] = (78 * 30 + 39, 78 * 35)
    with pytest.raises(FinpodError) as err:
        check_out_of_sample(4, rows, sessions)
    text = str(err.value)
    day = f"{minutes.timestamps[78 * 30]:%Y-%m-%d}"
    assert f"fold 4's backtest window overlaps its validation window on {day} → {day}" in text
    assert "(1 session)" in text and "selected on" in text and "\n" not in text
    check_out_of_sample(4, {**rows, "backtest": (78 * 31, 78 * 35)}, sessions)  # next session


def test_a_job_whose_backtest_overlaps_its_train_window_is_refused_before_training(
    minutes, monkeypatch
):
    import finpod.walkforward.job as job_module

    def train(*args, **kwargs):
        raise AssertionError("the job trained")

    monkeypatch.setattr(job_module, "train", train)
    rows = {"train": (0, 78 * 20), "validation": (78 * 20, 78 * 25), "backtest": (78 * 15, 78 * 30)}
    job = SeedJob(fold=2, seed=0, rows=rows, strategy={}, total_steps=64)
    with pytest.raises(FinpodError, match="fold 2's backtest window overlaps its train window"):
        run_seed_job(market_payload(minutes), job)
