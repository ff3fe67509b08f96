"""``finpod train`` writes the run directory the backtester reads."""

from __future__ import annotations

import json

import pytest
from tiny_strategy import tiny_agent
from typer.testing import CliRunner

from finpod.agents import load_checkpoint
from finpod.cli import app
from finpod.runs.candidates import load_candidates


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic", tmp_path_factory.mktemp("ds") / "syn", n_tickers=3, n_bars=400, seed=0
    )


def test_train_writes_run_directory(dataset, tmp_path):
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent())
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--strategy",
            str(strategy),
            "--data",
            str(dataset),
            "--runs",
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
    assert board["score_name"] == "sharpe"
    # selection chose among two validation checkpoints: both count as candidates
    assert board["candidates_evaluated"] == 2
    (entry,) = board["entries"]
    assert entry["score"] == max(h["score"] for h in entry["history"])
    assert len(entry["history"]) == 2
    # the best-on-validation pick chose among both checkpoints: both are recorded candidates
    candidates = load_candidates(run)
    assert candidates.ids == [f"ppo-0@{h['env_steps']}" for h in entry["history"]]
    assert candidates.scores.tolist() == [h["score"] for h in entry["history"]]
    agent = load_checkpoint(run / entry["checkpoint"])
    assert agent.algorithm == "ppo" and agent.env_steps == entry["env_steps"]
    for name in ("strategy.toml", "metrics.csv", "learning_curves.png", "train.log"):
        assert (run / name).is_file()
    # The checkpoint records the env settings it was trained and scored with.
    from finpod.agents import read_checkpoint

    meta, _ = read_checkpoint(run / entry["checkpoint"])
    assert json.loads(meta["env"])["action_mode"] == "weights"

    # The same --run-id again continues that run (a retried job) instead of failing.
    again = CliRunner().invoke(
        app,
        ["train", "--runs", str(tmp_path / "runs"), "--run-id", "r1", "--steps", "512"],
    )
    assert again.exit_code == 0, again.output
    assert "continuing run" in again.output
    board = json.loads((run / "leaderboard.json").read_text())
    assert board["candidates_evaluated"] == 4


def test_train_reports_bad_strategy_in_one_line(tmp_path, dataset):
    strategy = tmp_path / "bad.toml"
    strategy.write_text('[agent]\nalgorithm = "ppo"\n[agent.hparams]\nlearning_rat = 1\n')
    from finpod.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--strategy", str(strategy), "--data", str(dataset)])
    assert exit_info.value.code == 1


_RESUME_STRATEGY = tiny_agent(train={"total_steps": 768, "seed": 5})


def _validation_rows(run):
    import csv

    with (run / "metrics.csv").open() as fh:
        return [
            (int(r["env_steps"]), float(r["value"]))
            for r in csv.DictReader(fh)
            if r["split"] == "validation"
        ]


def test_killed_single_agent_run_resumes_to_the_same_curve_and_checkpoint(dataset, tmp_path):
    strategy = tmp_path / "s.toml"
    strategy.write_text(_RESUME_STRATEGY)
    runs = tmp_path / "runs"
    base = ["train", "--strategy", str(strategy), "--data", str(dataset), "--runs", str(runs)]
    runner = CliRunner()
    assert runner.invoke(app, [*base, "--run-id", "whole"]).exit_code == 0
    # The state a kill leaves after the third segment: checkpoints and curves up to it,
    # no leaderboard yet.
    cut = runner.invoke(app, [*base, "--run-id", "cut", "--steps", "384"])
    assert cut.exit_code == 0, cut.output
    (runs / "cut" / "leaderboard.json").unlink()
    before = (runs / "cut" / "metrics.csv").read_text().splitlines()

    resumed = runner.invoke(
        app, ["train", "--resume", "cut", "--runs", str(runs), "--steps", "768"]
    )
    assert resumed.exit_code == 0, resumed.output

    whole, cut_run = runs / "whole", runs / "cut"
    after = (cut_run / "metrics.csv").read_text().splitlines()
    # Continued, not restarted: the rows of before the kill are kept as written (wall
    # times included) and the rest follow them.
    assert after[: len(before)] == before and len(after) > len(before)
    assert _validation_rows(cut_run) == _validation_rows(whole)
    boards = [json.loads((r / "leaderboard.json").read_text()) for r in (whole, cut_run)]
    (a,), (b,) = boards[0]["entries"], boards[1]["entries"]
    assert (a["score"], a["env_steps"]) == (b["score"], b["env_steps"])
    # every checkpoint once: the resumed run neither loses nor double counts candidates
    ca, cb = load_candidates(whole), load_candidates(cut_run)
    assert ca.ids == cb.ids and len(ca) == 6
    assert (ca.returns == cb.returns).all()
    best_a = load_checkpoint(whole / a["checkpoint"])
    best_b = load_checkpoint(cut_run / b["checkpoint"])
    for key, tensor in best_a.state_dict().items():
        assert tensor.equal(best_b.state_dict()[key]), key


def test_resume_of_a_missing_run_is_one_clear_error(tmp_path):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", str(tmp_path / "nope")])
    assert exit_info.value.code == 1


def test_train_reads_the_strategy_file_once(dataset, tmp_path, monkeypatch):
    """The command parses the file once and hands the typed strategy down (to the choice
    between one agent and a tournament, and to the training itself)."""
    import finpod.strategy

    parsed: list[object] = []
    parse = finpod.strategy.strategy_from_dict

    def counting(raw, path=None):
        parsed.append(path)
        return parse(raw, path)

    monkeypatch.setattr(finpod.strategy, "strategy_from_dict", counting)
    strategy = tmp_path / "s.toml"
    strategy.write_text(tiny_agent(train={"total_steps": 128, "eval_every": 128}))
    args = ["train", "-s", str(strategy), "-d", str(dataset), "--runs", str(tmp_path / "runs")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert parsed == [strategy]
