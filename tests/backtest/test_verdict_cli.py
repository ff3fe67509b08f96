"""The console's first lines are the verdict (``finpod backtest``, ``finpod run``), and
``finpod info`` of a run or its saved backtest prints the same lines."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from finpod.backtest import backtest_market
from finpod.backtest.verdict import backtest_verdict
from finpod.cli import app, backtest_cmd
from finpod.env import EnvConfig

from .fakes import make_market, make_run_dir


@pytest.fixture(scope="module")
def result():
    market = make_market(num_bars=80, seed=5)
    n = market.num_stocks

    def policy(obs):
        action = torch.zeros(1, n)
        action[0, 1] = 0.4
        return action

    return backtest_market(market, policy, EnvConfig(), run_id="r1", num_trials=4)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_backtest_console_opens_with_the_verdict(result, tmp_path):
    verdict = backtest_verdict(result)
    with backtest_cmd.console.capture() as out:
        backtest_cmd.print_result(result, tmp_path / "tearsheet.html")
    lines = _lines(out.get())
    assert lines[0] == f"verdict: {verdict.word}", lines
    # then the verdict's lines (wrapped to the console's width), then the summary table
    text = " ".join(lines[1:]).split()
    assert text[: len(" ".join(verdict.lines).split())] == " ".join(verdict.lines).split()


def test_info_of_a_saved_backtest_prints_its_verdict(result, tmp_path):
    folder = result.save(tmp_path / "reports" / "r1")
    out = CliRunner().invoke(app, ["info", str(folder)], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    verdict = backtest_verdict(result)
    assert f"verdict: {verdict.word}" in out.output
    assert verdict.edge in " ".join(out.output.split())


def test_info_of_a_run_not_yet_backtested_says_how_to_get_its_verdict(tmp_path):
    run = make_run_dir(tmp_path, make_market(num_bars=40), num_entries=1)
    out = CliRunner().invoke(
        app, ["info", str(run)], env={"COLUMNS": "400"}, catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    assert "not backtested yet" in out.output and "finpod backtest" in out.output
