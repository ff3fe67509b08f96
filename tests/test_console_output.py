"""Console output a reader can use at 80 columns or in a file: tables that fit or switch to
a long form, progress totals that count every step, --help with every default, and other
libraries' noise said in one line."""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import pandas as pd
from rich.console import Console
from typer.testing import CliRunner

from finpod.backtest.labels import format_metric, metric_label
from finpod.cli.noise import HeldBack
from finpod.cli.tables import print_metrics

STRATEGIES = ["agent", "index", "reference", "equal_weight_buy_hold", "equal_weight_daily"]
METRICS = ["cumulative_return", "annual_turnover_ex_initial", "active_return", "psr"]


def _printed(width: int) -> str:
    frame = pd.DataFrame(
        np.arange(len(METRICS) * len(STRATEGIES), dtype=float).reshape(len(METRICS), -1) / 7,
        index=METRICS,
        columns=STRATEGIES,
    )
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False)
    print_metrics(console, "backtest of r1", frame, metric_label, format_metric)
    return out.getvalue()


def test_a_metrics_table_at_80_columns_is_one_metric_per_line_with_whole_names():
    text = _printed(80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert "…" not in text
    for name in STRATEGIES:
        assert name in lines  # a heading of its own, whole
    for metric in METRICS:  # each label on one line, with its value
        assert sum(metric_label(metric) in line for line in lines) == len(STRATEGIES)


def test_a_metrics_table_that_fits_is_a_table():
    text = _printed(250)
    assert "┃ metric" in text and "equal_weight_buy_hold" in text and "…" not in text
    assert sum(metric_label("psr") in line for line in text.splitlines()) == 1


def test_run_help_shows_the_default_of_budget_pods_and_device():
    from finpod.cli import app

    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"})
    text = " ".join(res.output.replace("│", " ").split())
    import tomllib
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "strategies" / "quickstart.toml"
    budget = tomllib.loads(shipped.read_text())["tournament"]["budget"]
    assert f"[default: (the strategy's [tournament] budget; {budget} in quickstart.toml)]" in text
    assert "[default: (the strategy's [tournament] pods; auto in quickstart.toml)]" in text
    assert "[default: (the strategy's [train] device; auto in quickstart.toml)]" in text


def test_yfinance_noise_is_held_back_and_said_in_one_line():
    dns = (
        "Failed to get ticker 'AAPL' reason: Failed to perform, curl: (6) Could not resolve "
        "host: query2.finance.yahoo.com. See https://curl.se/libcurl/c/libcurl-errors.html"
    )
    shown: list[str] = []
    before = warnings.showwarning
    with HeldBack() as held:
        logging.getLogger("yfinance").error(dns)
        logging.getLogger("yfinance").error("\n1 Failed download:")
        warnings.warn_explicit("inplace is deprecated", FutureWarning, "/x/yfinance/multi.py", 220)
        warnings.showwarning = lambda *a, **k: shown.append(str(a[0]))  # finpod's own: shown
        held._showwarning = warnings.showwarning
        warnings.warn_explicit("finpod's own", UserWarning, "/x/finpod/y.py", 1)
    warnings.showwarning = before
    assert shown == ["finpod's own"]
    line = held.summary()
    assert "\n" not in line
    assert line.startswith("yfinance: 2 messages and 1 warning held back")
    assert "could not resolve query2.finance.yahoo.com (no network?)" in line
    assert logging.getLogger("yfinance").propagate  # restored
    assert HeldBack().summary() is None
