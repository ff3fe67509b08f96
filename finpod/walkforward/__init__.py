"""Walk-forward: retrain over rolling or expanding folds, stitch the out-of-sample record.

Each fold is train → validation → backtest over new boundaries on the same bars
(:mod:`~finpod.walkforward.folds`); each fold × seed trains one agent, selects its
checkpoint on validation and backtests it (:mod:`~finpod.walkforward.job`); folds run as
Ray tasks and persist as they finish, so a killed walk-forward resumes
(:mod:`~finpod.walkforward.directory`); the fold winners' backtests are stitched and the
active return is tested with a HAC t-statistic (:mod:`~finpod.walkforward.stats`); one
HTML page shows it all (:mod:`~finpod.walkforward.report`).

Layer: above the data, env, agents and backtest building blocks (as
:mod:`finpod.pipeline`), below the CLI.
"""

from finpod.walkforward.folds import Fold, FoldSpec, folds_frame, parse_length, plan_folds
from finpod.walkforward.results import EQUAL_WEIGHT, WalkForwardResult
from finpod.walkforward.run import parse_seeds, run_walkforward
from finpod.walkforward.stats import hac_mean_test, naive_t, newey_west_lags

__all__ = [
    "EQUAL_WEIGHT",
    "Fold",
    "FoldSpec",
    "WalkForwardResult",
    "folds_frame",
    "hac_mean_test",
    "naive_t",
    "newey_west_lags",
    "parse_length",
    "parse_seeds",
    "plan_folds",
    "run_walkforward",
]
