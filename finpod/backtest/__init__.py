"""Backtest and reports: the run's agent vs the index and simple rules on the backtest split.

Entry points::

    result = run_backtest("runs/<run-id>", agent="best")   # BacktestResult
    result.metrics                                          # metrics × strategies
    result.to_html("reports/<run-id>/tearsheet.html")      # self-contained tearsheet
"""

from finpod.backtest.result import BacktestResult
from finpod.backtest.runner import backtest_market, run_backtest

__all__ = ["BacktestResult", "backtest_market", "run_backtest"]
