"""Checks before work: a mistyped argument is one red line, exit 1, answered before torch,
pandas or Ray load; the grammars :mod:`finpod.cli.checks` reads (:mod:`finpod.grammar`)
answer as the tournament and the walk-forward read them; walk-forward windows longer than the data (or the exchange calendar) are one
line; ``finpod run --data`` naming a missing folder is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import one_error_line

ROOT = Path(__file__).resolve().parents[1]

#: Runs the CLI's entry in a fresh interpreter, then says which heavy modules it loaded.
PROBE = """
import json, sys
from finpod.cli import main
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in ("torch", "ray", "pandas") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def _probe(*args: str, cwd: Path = ROOT) -> tuple[dict, list[str]]:
    """(exit code and heavy modules loaded, stderr's non-empty lines) of ``finpod ARGS``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return json.loads(done.stdout.strip().splitlines()[-1]), lines


USAGE_ERRORS = [
    (
        ("train", "--steps", "-5", "--strategy", "strategies/ppo.toml", "--data", "{tmp}/ds"),
        "--steps must be positive",
    ),
    (
        ("train", "--strategy", "strategies/ppo.tom", "--data", "{tmp}/ds"),
        "strategies/ppo.tom does not exist",
    ),
    (
        ("train", "--strategy", "strategies/ppo.toml", "--data", "{tmp}/ds", "--budget", "soon"),
        "budget 'soon' is not understood",
    ),
    (
        ("train", "--strategy", "strategies/ppo.toml", "--data", "{tmp}/ds", "--device", "tpu"),
        "unknown device 'tpu'",
    ),
    (
        ("train", "--strategy", "strategies/ppo.toml", "--data", "{tmp}/nope"),
        "--data {tmp}/nope does not exist",
    ),
    (("run", "--budget", "5x"), "budget unit 'x'"),
    (("run", "--pods", "0"), 'pods must be "auto"'),
    (("run", "--data", "{tmp}/my-alpaca-data"), "--build-sample"),
    (("walkforward", "--data", "{tmp}/nope"), "--data {tmp}/nope does not exist"),
    (("backtest", "runs/nope", "--device", "gpu"), "unknown device 'gpu'"),
    (("backtest", "{tmp}/nope"), "run '{tmp}/nope' not found"),
    (("paper", "{tmp}/nope"), "run '{tmp}/nope' not found"),
    (("download", "--train", "2019-01-01", "--out", "{tmp}/x"), "must be FIRST:LAST dates"),
]


@pytest.mark.parametrize(
    ("args", "words"), USAGE_ERRORS, ids=[" ".join(a[:3]) for a, _ in USAGE_ERRORS]
)
def test_a_usage_error_is_one_line_before_torch_pandas_or_ray_load(tmp_path, args, words):
    args = [a.format(tmp=tmp_path) for a in args]
    (tmp_path / "ds").mkdir()  # a folder that is not a dataset: checked after the args
    result, lines = _probe(*args)
    assert result["code"] == 1, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert words.format(tmp=tmp_path) in lines[0], lines
    assert result["heavy"] == [], (args, result)


def test_walkforward_window_checks_come_before_the_data_loads(tmp_path):
    data = tmp_path / "ds"
    data.mkdir()
    (data / "manifest.json").write_text("{}")  # never read: the windows are refused first
    for flag, value, words in (
        ("--train", "3q", "the train length '3q' is not understood"),
        ("--seeds", "x", "--seeds 'x' is not understood"),
        ("--folds", "0", "--folds must be at least 1"),
        ("--scheme", "sliding", "unknown scheme 'sliding'"),
    ):
        result, lines = _probe("walkforward", "--data", str(data), flag, value)
        assert result == {"code": 1, "heavy": []}, lines
        assert len(lines) == 1 and words in lines[0], lines


def test_a_missing_run_reads_the_same_in_backtest_and_paper(tmp_path):
    _, backtest = _probe("backtest", str(tmp_path / "nope"))
    _, paper = _probe("paper", str(tmp_path / "nope"))
    assert backtest == paper and len(backtest) == 1, (backtest, paper)


def test_a_run_without_a_leaderboard_yet_says_so(finpod_cli, tmp_path):
    from finpod.runs import RUN_FILE

    run = tmp_path / "runs" / "young"
    run.mkdir(parents=True)
    (run / RUN_FILE).write_text(json.dumps({"kind": "agent"}))
    for command in ("backtest", "paper"):
        line = one_error_line(finpod_cli(command, str(run)), "has no leaderboard yet")
        assert "is this a finpod run directory" not in line


# ------------------------------------------------------------------------ grammars


BUDGETS = [
    "90s",
    "30min",
    "30m",
    "5M",
    "2h",
    "2hr",
    "1d",
    "2e6 steps",
    "16M steps",
    "16m steps",
    "5K steps",
    "500k pods",
    "40 pods",
    "1.5 pods",
    "1e400 steps",
    "7",
    "5x",
    "soon",
    "0s",
    "0.4 steps",
    "3M m",
    "",
    "-1h",
    "1e-9 pods",
    "2 Steps",
]


def _outcome(fn, *args):
    """The value ``fn`` returns, or the text of the FinpodError it raises."""
    from finpod.errors import FinpodError

    try:
        return fn(*args)
    except FinpodError as err:
        return str(err)


@pytest.mark.parametrize("text", BUDGETS)
def test_the_budget_check_answers_as_the_tournament_reads_a_budget(text):
    from finpod.cli import checks
    from finpod.tournament.settings import parse_budget

    assert _outcome(checks.budget, text) == _outcome(parse_budget, text)


@pytest.mark.parametrize(
    "text",
    ["1y", "0.5y", "6m", "6mo", "4w", "30d", "250", "250s", "250 sessions", "3q", "0y",
     "1.5mo", "", "y", "1Y"],
)  # fmt: skip
def test_the_window_check_answers_as_the_walk_forward_reads_a_window(text):
    from finpod.cli import checks
    from finpod.walkforward.folds import parse_length

    assert _outcome(checks.window_length, text, "train") == _outcome(parse_length, text, "train")


@pytest.mark.parametrize(
    "text", ["3", "0,4,7", "0", "x", "1,1", "-1,2", "2,", "1e15", str(2**64), f"0,{2**64}"]
)
def test_the_seeds_check_answers_as_the_walk_forward_reads_seeds(text):
    from finpod.cli import checks
    from finpod.walkforward.run import parse_seeds

    assert _outcome(checks.seeds, text) == _outcome(parse_seeds, text)


# ------------------------------------------------------------ windows against the data


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


# 60 sessions of validation and of backtest fit the data: only the train window reaches
# before it, 12 years into the calendar's records, 60 years before them (the calendar
# starts in 1990), 3000 years past what a date can hold.
@pytest.mark.parametrize("train", ["12y", "60y", "3000y"])
def test_walkforward_windows_longer_than_the_data_are_one_line_with_numbers(
    finpod_cli, tmp_path, dataset, train
):
    out = finpod_cli(
        "walkforward", "--data", str(dataset), "--folds", "1", "--seeds", "1",
        "--steps", "4096", "--train", train, "--validation", "60", "--backtest", "60",
        "--no-ray", "--out", str(tmp_path / "wf"),
    )  # fmt: skip
    line = one_error_line(out, "too few bars for the windows", f"{train} train", "sessions")
    assert "DateOutOfBounds" not in line
    assert not (tmp_path / "wf").exists()  # nothing made


# --------------------------------------------------------------- run --data, missing


def test_run_refuses_a_missing_data_folder_it_was_not_asked_to_build(finpod_cli, tmp_path):
    missing = tmp_path / "data" / "datasets" / "my-alpaca-data"
    out = finpod_cli("run", "--data", str(missing), "--runs", str(tmp_path / "runs"))
    one_error_line(out, str(missing), "does not exist", "--build-sample")
    assert not missing.exists() and not (tmp_path / "runs").exists()


def test_run_all_refuses_a_missing_data_folder_unless_asked_to_build_the_sample(tmp_path):
    from finpod.errors import FinpodError
    from finpod.pipeline import run_all

    missing = tmp_path / "typo"
    with pytest.raises(FinpodError, match="--build-sample"):
        run_all(data=missing, budget="1 pods", runs=tmp_path / "r", reports=tmp_path / "p")
    assert not missing.exists()
