"""Console output a reader can use at 80 columns or in a file: tables that fit or switch to
a long form, progress totals that count every step, --help with every default, and other
libraries' noise said in one line."""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import pandas as pd
import torch
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


def _snapshot(done: list[int], scores: list[float | None], eta_s: float | None) -> dict:
    from finpod.runs.leaderboard import Entry
    from finpod.tournament.settings import Budget

    running = [
        {
            "pod_id": f"p0000{k}",
            "algorithm": "ppo",
            "parent": None,
            "node": "b6a96b65",
            "epoch": 1,
            "epochs": 4,
            "steps": 131_072,
            "done": d,
            "score": s,
            "elapsed_s": 148.0,
        }
        for k, (d, s) in enumerate(zip(done, scores, strict=True))
    ]
    lineage = ["p00001", "p00004", "p00007", "p00010"]
    entries = [Entry("p00012", "ppo", {"learning_rate": 1e-3}, 0.333, "c.safetensors", lineage)]
    return {
        "eta_s": eta_s,
        "running": running,
        "entries": entries,
        "candidates": 0,
        "failed": 0,
        "pool": 1,
        "target": 1,
        "budget": Budget("steps", 400_000.0),
        "budget_used": 0.0,
        "time_cap": 360.0,
        "elapsed_s": 160.0,
        "score_name": "information_ratio",
    }


def test_the_live_view_at_80_columns_shows_every_members_steps_score_and_the_eta():
    """Each population member's row has its own env steps so far and score; the budget
    counts the running steps; nothing is cut ("…") or wider than 80 columns."""
    from finpod.cli.tournament_cmd import _LiveTable

    snap = _snapshot([65_536, 65_536, 65_536, 65_536], [0.333, -0.125, 0.071, 0.25], 100.0)
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    console.print(_LiveTable(console).frame(snap))
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "…" not in text, text
    assert "262,144/400,000 steps · ETA 1m40s" in text
    for score in ("0.333", "-0.125", "0.071", "0.250"):
        assert score in text
    assert text.count("66k/131k") == 4
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    console.print(_LiveTable(console).frame({**snap, "eta_s": 200.0}))  # 360 s cap − 160 s
    assert "262,144/400,000 steps · ETA ≤ 3m20s (time cap)" in out.getvalue()


def test_a_log_file_gets_a_progress_line_with_the_eta_every_30_seconds():
    from finpod.cli.tournament_cmd import TournamentView

    out = io.StringIO()
    view = TournamentView(Console(file=out, width=80, force_terminal=False))
    view.display(_snapshot([0], [None], 360.0))  # nothing trained yet: no line
    assert out.getvalue() == ""
    view.display(_snapshot([32_768], [None], 290.0))
    view.display(_snapshot([65_536], [None], 280.0))  # within 30 s of the last: no line
    lines = out.getvalue().splitlines()
    assert lines == [
        "progress: 32,768/400,000 steps (8%) · ETA 4m50s · 1 running · 0 evaluated · 2m40s elapsed"
    ]


def test_the_training_bar_moves_with_each_env_step_inside_a_rollout():
    """``finpod train``'s bar counts env steps as the env takes them (PPO's own counter
    moves once per rollout)."""
    from finpod.agents.progress import StepCountingEnv, TrainingBar
    from finpod.data import make_synthetic
    from finpod.env import EnvConfig, VecTradingEnv

    env = VecTradingEnv(make_synthetic(3, 80, seed=0), EnvConfig(episode_length=20), num_envs=4)
    bar = TrainingBar(True, total=1000, done=100)  # a resumed run: 100 steps before
    counted = StepCountingEnv(env, on_step=bar.on_step)
    counted.reset(seed=0)
    counted.step(torch.zeros(4, env.action_dim))
    assert counted.steps == 4
    assert bar.progress.tasks[0].completed == 104


def test_the_tournament_summary_in_a_log_file_wraps_only_past_120_columns(tmp_path):
    """Piped into a file (80 columns), a summary statement stays on one line up to 120
    columns (a log reader can grep it) and wraps at word ends past them; the leaderboard
    still switches to its long form."""
    from finpod.cli.tournament_cmd import print_summary
    from finpod.runs.leaderboard import Entry, Leaderboard
    from finpod.tournament.launch import TournamentRun
    from finpod.tournament.updater import Summary

    board = Leaderboard(tmp_path, top_k=4, score_name="information_ratio")
    lineage = ["p00001", "p00004", "p00007", "p00010"]
    board.entries = [Entry("p00012", "ppo", {}, 0.323, "c.safetensors", lineage, [], 131_072)]
    board.candidates_evaluated = 5
    summary = Summary(pods_trained=4)
    summary.throughput = {"env_steps": 524_288, "wall_s": 255.0, "env_steps_per_s": 2052.0}
    run = TournamentRun(tmp_path / "tournament-20261126-100300-a6be", board, summary, None)
    out = io.StringIO()
    print_summary(Console(file=out, width=80, force_terminal=False), run)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 120, lines
    text = " ".join(lines)
    assert (
        "4 pods trained this session (0 failed), 5 candidates evaluated in the run; "
        "best p00012 (ppo) validation information_ratio 0.323" in text
    ), lines
    assert any(line.startswith("throughput: 524,288 env steps") for line in lines), lines
    assert sum("throughput" in line for line in lines) == 1  # a shorter one: one line
    assert lines[-1] == f"run directory: {tmp_path / 'tournament-20261126-100300-a6be'}"


def test_a_long_statement_piped_wraps_at_word_ends_under_120_columns():
    from finpod.cli.lines import PIPED_WIDTH, statement

    words = [f"key{i}=value{i}" for i in range(30)]  # a training log line of ~400 characters
    out = io.StringIO()
    statement(Console(file=out, width=80, force_terminal=False), " ".join(words), markup=False)
    lines = out.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= PIPED_WIDTH for line in lines), lines
    assert " ".join(lines).split() == words  # every word, whole, in order


def test_training_piped_into_a_file_keeps_every_line_under_120_columns(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tiny_strategy import tiny_agent

    from finpod.data import build_dataset

    data = build_dataset("synthetic", tmp_path / "ds", n_tickers=3, n_bars=300, seed=0)
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "finpod", "train", "-s", str(strategy), "-d", str(data)]
        + ["--runs", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert any(" steps " in line for line in lines), lines
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
