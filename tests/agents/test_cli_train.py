"""``finpod train`` writes the run directory the backtester reads."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finpod.agents import load_checkpoint
from finpod.cli import app


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


def test_train_writes_run_directory(dataset, tmp_path):
    strategy = tmp_path / "s.toml"
    strategy.write_text(
        '[agent]\nalgorithm = "ppo"\n[agent.hparams]\nhorizon = 8\nminibatch_size = 64\nupdate_epochs = 1\n'
        "actor_hidden = [16]\ncritic_hidden = [16]\n"
        '[env]\naction_mode = "weights"\nepisode_length = 40\n'
        '[train]\nnum_envs = 8\ntotal_steps = 256\neval_every = 128\nseed = 3\ndevice = "cpu"\n'
    )
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--strategy",
            str(strategy),
            "--data",
            str(dataset),
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "r1",
        ],
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r1"
    info = json.loads((run / "run.json").read_text())
    assert info["seed"] == 3 and info["dataset"]["hash"]
    assert info["strategy"]["agent"]["algorithm"] == "ppo"
    board = json.loads((run / "leaderboard.json").read_text())
    assert board["candidates_evaluated"] == 1 and board["score_name"] == "sharpe"
    (entry,) = board["entries"]
    assert entry["score"] == max(h["score"] for h in entry["history"])
    assert len(entry["history"]) == 2
    agent = load_checkpoint(run / entry["checkpoint"])
    assert agent.algorithm == "ppo" and agent.env_steps == entry["env_steps"]
    for name in ("strategy.toml", "metrics.csv", "learning_curves.png", "train.log"):
        assert (run / name).is_file()


def test_train_reports_bad_strategy_in_one_line(tmp_path, dataset):
    strategy = tmp_path / "bad.toml"
    strategy.write_text('[agent]\nalgorithm = "ppo"\n[agent.hparams]\nlearning_rat = 1\n')
    from finpod.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--strategy", str(strategy), "--data", str(dataset)])
    assert exit_info.value.code == 1
