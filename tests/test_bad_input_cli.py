"""Bad input to ``finpod train``/``backtest``/``report``/``download`` as a user types it:
one red line and exit 1, nothing left behind; ``--help`` shows every default; training
names its run directory first and the ``--resume`` that continues it after Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


@pytest.fixture(scope="module")
def run_dir(dataset, tmp_path_factory):
    from finpod.pipeline import train_agent

    folder = tmp_path_factory.mktemp("run")
    strategy = folder / "s.toml"
    strategy.write_text(tiny_agent())
    return train_agent(strategy, dataset, folder / "runs", progress=False, run_id="r1")


def test_help_shows_every_default_note_written_in_brackets(finpod_cli):
    out = finpod_cli("download", "--help", COLUMNS="400")
    text = " ".join(out.stdout.replace("│", " ").split())
    assert "Dataset directory to write [default: data/datasets/<source>]." in text
    assert "[default: file name up to '_']" in text
    assert "[default: ^NDX; 'none' for no index]" in text
    assert "--overwrite" in text and "--date-format" in text


def test_download_twice_without_overwrite_keeps_the_first_dataset(finpod_cli, tmp_path):
    args = ("download", "--source", "synthetic", "--n-tickers", "2", "--years", "0.2")
    assert finpod_cli(*args, cwd=tmp_path).returncode == 0
    manifest = tmp_path / "data" / "datasets" / "synthetic" / "manifest.json"
    first = manifest.read_text()
    one_error_line(
        finpod_cli(*args, "--seed", "9", cwd=tmp_path), "already holds a dataset", "--overwrite"
    )
    assert manifest.read_text() == first


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[agent.hparams]\nlearning_rate = nan\n", ("agent.hparams.learning_rate = nan",)),
        (b"[env]\ncost_rate = inf\n", ("env.cost_rate = inf", "finite")),
        (b'name = "caf\xe9"\n', ("not UTF-8", "0xe9")),
    ],
)
def test_a_bad_strategy_file_is_one_line(finpod_cli, tmp_path, dataset, content, words):
    strategy = tmp_path / "bad.toml"
    strategy.write_bytes(content)
    out = tmp_path / "runs"
    one_error_line(
        finpod_cli(
            "train", "--strategy", str(strategy), "--data", str(dataset), "--runs", str(out)
        ),
        *words,
    )
    assert not out.exists()


@pytest.mark.parametrize("where", ["under_file", "proc"])
def test_train_runs_that_cannot_be_written_is_one_line(finpod_cli, tmp_path, dataset, where):
    (tmp_path / "afile").write_text("x")
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    out = {"under_file": tmp_path / "afile" / "runs", "proc": Path("/proc/finpod-test")}[where]
    res = finpod_cli(
        "train", "--strategy", str(strategy), "--data", str(dataset), "--runs", str(out)
    )
    one_error_line(res, "cannot create the run directory", str(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "s.toml"]


def test_backtest_reports_that_cannot_be_written_is_one_line_before_the_rollouts(
    finpod_cli, tmp_path, run_dir
):
    (tmp_path / "afile").write_text("x")
    started = time.perf_counter()
    res = finpod_cli("backtest", str(run_dir), "--reports", str(tmp_path / "afile" / "reports"))
    one_error_line(res, "cannot write to", "afile")
    assert "rollouts" not in res.stdout and time.perf_counter() - started < 60


def test_backtests_of_two_agents_of_one_run_sit_side_by_side(finpod_cli, tmp_path, run_dir):
    reports = tmp_path / "reports"
    best = finpod_cli("backtest", str(run_dir), "--reports", str(reports))
    assert best.returncode == 0, best.stderr
    page = (reports / "r1" / "tearsheet.html").read_bytes()
    # The run has one leaderboard entry: top-1 is the most it can average.
    top = finpod_cli("backtest", str(run_dir), "--agent", "top-1", "--reports", str(reports))
    assert top.returncode == 0, top.stderr
    assert (reports / "r1" / "top-1" / "tearsheet.html").is_file()
    assert (reports / "r1" / "tearsheet.html").read_bytes() == page  # not overwritten
    redo = finpod_cli("report", "r1", "--agent", "top-1", "--reports", str(reports))
    assert redo.returncode == 0 and "top-1" in redo.stdout, redo.stderr


def test_top_3_of_a_one_entry_run_is_one_line_and_writes_no_folder(finpod_cli, tmp_path, run_dir):
    reports = tmp_path / "reports"
    res = finpod_cli("backtest", str(run_dir), "--agent", "top-3", "--reports", str(reports))
    one_error_line(res, "averages the top 3", "use --agent best")
    assert not (reports / "r1" / "top-3").exists()


def _train_then_ctrl_c(tmp_path, dataset, lines: int, eval_every: int = 128):
    """``finpod train`` without a terminal, SIGINT after its first ``lines`` stderr lines
    (stdout holds only the run directory): (those lines, the rest of stderr, returncode)."""
    strategy = tmp_path / "long.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 10_000_000, "eval_every": eval_every}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "finpod", "train", "--strategy", str(strategy)]
        + ["--data", str(dataset), "--runs", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C in a terminal: SIGINT at its default even when the suite itself was
        # started in the background (where the shell sets it to "ignore", inherited).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        seen = [proc.stderr.readline() for _ in range(lines)]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return seen, err, proc.returncode


def test_training_without_a_terminal_names_the_run_first_and_resume_after_ctrl_c(tmp_path, dataset):
    # header, "training ppo to …", then the first segment's line (after its checkpoint)
    (first, header, segment), err, code = _train_then_ctrl_c(tmp_path, dataset, lines=3)
    run = re.fullmatch(r"run directory: (\S+)\n", first)
    assert run, first
    assert "training ppo" in header and " steps " in segment
    assert code == 130
    assert f"finpod train --resume {run.group(1)}" in err and "Traceback" not in err, err
    assert (Path(run.group(1)) / "run.json").is_file()


def test_ctrl_c_before_the_first_checkpoint_says_nothing_can_be_resumed(tmp_path, dataset):
    # A checkpoint only every 10 million steps: SIGINT comes long before the first one.
    (first, header), err, code = _train_then_ctrl_c(tmp_path, dataset, 2, eval_every=10**7)
    assert first.startswith("run directory:") and "training ppo" in header
    assert code == 130 and "Traceback" not in err
    assert "nothing can be resumed yet" in err and "--resume" not in err, err


def test_a_resumed_run_says_it_resumes_from_its_checkpoint(finpod_cli, run_dir):
    res = finpod_cli("train", "--resume", str(run_dir), "--steps", "320")
    assert res.returncode == 0, res.stderr
    first = res.stderr.splitlines()[0]
    assert first == f"resuming {run_dir} from 256 env steps (training to 320)", res.stderr
    assert "run directory:" not in res.stderr and res.stdout == f"{run_dir}\n"
