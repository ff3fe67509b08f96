"""Backtest and reports: the run's agent vs the index and simple rules on the backtest split.

Entry points::

    result = run_backtest("runs/<run-id>", agent="best")   # BacktestResult
    result.metrics                                          # metrics × strategies
    result.to_html("reports/<run-id>/tearsheet.html")      # self-contained tearsheet
"""

from finpod.backtest.result import BacktestResult, set_renderers
from finpod.backtest.runner import backtest_market, run_backtest
from finpod.backtest.tearsheet import metrics_html, render_tearsheet

set_renderers(page=render_tearsheet, table=metrics_html)

__all__ = ["BacktestResult", "backtest_market", "run_backtest"]
