"""One agent trains with a torch thread count chosen for the machine (not torch's one per
CPU, which waits for busy cores), records it beside the seed, and keeps it on a resume
unless ``--threads`` says otherwise; a finished run names its seed, and a resume cannot
change it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

import finpod.agent_run
from finpod.agent_run import train_threads, usable_cpus


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from finpod.data import build_dataset

    root = tmp_path_factory.mktemp("threads")
    return build_dataset("synthetic", root / "ds", n_tickers=3, n_bars=400, seed=0)


@pytest.fixture
def seen_threads(monkeypatch) -> list[int]:
    """Torch's thread count each time the training loop starts."""
    seen: list[int] = []
    real = finpod.agent_run.train

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(finpod.agent_run, "train", spy)
    return seen


def _strategy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("cpus", "load", "threads"),
    [(2, 0.0, 1), (2, 1.2, 1), (4, 0.0, 2), (4, 2.5, 1), (8, 0.5, 3), (16, 0.0, 4), (1, 9, 1)],
)
def test_one_agent_gets_a_thread_per_two_idle_cpus_from_one_to_four(cpus, load, threads):
    assert train_threads(cpus, load) == threads


def test_usable_cpus_are_those_of_the_affinity_mask(monkeypatch):
    monkeypatch.setattr(finpod.agent_run.os, "sched_getaffinity", lambda pid: {3})
    assert usable_cpus() == 1


def test_one_agent_trains_with_the_chosen_threads_and_records_them(
    tmp_path, dataset, seen_threads, monkeypatch
):
    from finpod.pipeline import train_agent

    before = torch.get_num_threads()
    chosen = before + 1  # not what torch has: only a set count trains with it
    monkeypatch.setattr(finpod.agent_run, "train_threads", lambda: chosen)
    run = train_agent(_strategy(tmp_path, tiny_agent()), dataset, tmp_path / "runs", run_id="r")
    info = json.loads((run / "run.json").read_text())
    assert seen_threads == [chosen] and info["threads"] == chosen and info["seed"] == 3
    assert torch.get_num_threads() == before  # put back: a notebook keeps its own
    assert f"torch threads: {chosen} (chosen for" in (run / "train.log").read_text()


def test_a_resumed_run_keeps_its_threads_unless_told_and_then_says_so(
    tmp_path, dataset, seen_threads, finpod_cli, monkeypatch
):
    from finpod.pipeline import train_agent

    monkeypatch.setattr(finpod.agent_run, "train_threads", lambda: 1)  # the machine's choice now
    strategy = _strategy(tmp_path, tiny_agent())
    run = train_agent(strategy, dataset, tmp_path / "runs", run_id="r", threads=2)
    assert seen_threads == [2]
    assert finpod_cli("train", "--resume", str(run), "--steps", "384").returncode == 0
    assert seen_threads == [2, 2]  # the recorded count, whatever the machine's load now
    out = finpod_cli("train", "--resume", str(run), "--steps", "512", "--threads", "1")
    assert out.returncode == 0, out.stderr
    assert seen_threads == [2, 2, 1]
    assert "training with 1 torch threads (--threads), not the run's 2" in out.stderr
    assert json.loads((run / "run.json").read_text())["threads"] == 1


@pytest.mark.parametrize("value", ["0", "-2"])
def test_threads_below_one_is_one_line(tmp_path, dataset, finpod_cli, value):
    strategy = _strategy(tmp_path, tiny_agent())
    out = finpod_cli("train", "-s", str(strategy), "-d", str(dataset), "--threads", value)
    one_error_line(out, "--threads must be a whole number ≥ 1", "e.g. --threads 1")


@pytest.fixture(scope="module")
def finished(dataset, tmp_path_factory) -> Path:
    from finpod.pipeline import train_agent

    root = tmp_path_factory.mktemp("finished")
    strategy = root / "s.toml"
    strategy.write_text(tiny_agent(), encoding="utf-8")
    return Path(train_agent(strategy, dataset, root / "runs", run_id="done", threads=1))


def test_a_finished_run_names_its_seed(finished, finpod_cli):
    out = finpod_cli("train", "--resume", str(finished), "--seed", "3")
    assert out.returncode == 0, out.stderr
    assert f"run {finished} (seed 3) is finished at 256 env steps: nothing to do" in out.stderr


def test_another_seed_for_a_resumed_run_is_refused(finished, finpod_cli):
    before = (finished / "run.json").read_bytes()
    out = finpod_cli("train", "--resume", str(finished), "--seed", "4")
    one_error_line(out, "run done has seed 3, not 4", "cannot change", "--seed 4")
    assert (finished / "run.json").read_bytes() == before
