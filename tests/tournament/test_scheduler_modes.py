"""Scheduler modes are one class each: a new one runs a tournament end to end from a
registry line, and every mode keeps the champion line on a real local Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_strategy import tiny_tournament

from finpod.tournament import run_tournament
from finpod.tournament.generator import PodSpec
from finpod.tournament.modes import MODES, register
from finpod.tournament.schedulers.base import Scheduler

from .conftest import SEARCH, write_strategy

pytestmark = pytest.mark.usefixtures("local_ray")


class RandomSearch(Scheduler):
    """Plain random search: every free slot trains a fresh pod drawn from ``[search]``."""

    name = "random-search"

    def choose(self, size: int, busy: bool) -> list[PodSpec]:
        self.drawn = getattr(self, "drawn", 0) + 1
        return [self.generator.fresh(self.take_ids(1))]

    def own_state(self) -> dict:
        return {"drawn": getattr(self, "drawn", 0)}


@pytest.fixture
def random_mode():
    register("random-search", RandomSearch)
    yield "random-search"
    MODES.pop("random-search", None)


def test_a_mode_written_here_runs_a_tournament_end_to_end(tmp_path, tiny_dataset, random_mode):
    strategy = write_strategy(
        tmp_path / "s.toml", pod_steps=128, epochs=1, extra=f'mode = "{random_mode}"'
    )
    started = []
    result = run_tournament(
        strategy,
        tiny_dataset,
        pods=1,
        budget="3 pods",
        runs=tmp_path / "runs",
        on_event=lambda kind, p: started.append(p["spec"]) if kind == "start" else None,
    )
    assert result.summary.pods_trained == 3
    assert all(spec.parent is None for spec in started)
    state = json.loads((Path(result.run_dir) / "scheduler.json").read_text())
    assert state["mode"] == "random-search" and state["drawn"] == 3
    assert "selection" in json.loads((Path(result.run_dir) / "run.json").read_text())


def test_the_champion_line_trains_in_its_own_slot_and_is_selected_unless_beaten(
    tmp_path, tiny_dataset
):
    strategy = write_strategy(
        tmp_path / "s.toml",
        pod_steps=128,
        epochs=1,
        top_k=2,
        extra='mode = "asha"\nbase_pod = true',
    )
    started = []
    result = run_tournament(
        strategy,
        tiny_dataset,
        pods=2,
        budget="7 pods",
        runs=tmp_path / "runs",
        on_event=lambda kind, p: started.append(p["spec"]) if kind == "start" else None,
    )
    run_dir = Path(result.run_dir)
    line = [s for s in started if s.champion]
    assert len(line) >= 3  # one slot of two, never cut
    assert all(b.parent == a.pod_id and b.continued for a, b in zip(line, line[1:], strict=False))
    assert json.loads((run_dir / "scheduler.json").read_text())["champion"]["pods"] == [
        s.pod_id for s in line
    ]
    board = json.loads((run_dir / "leaderboard.json").read_text())
    selection = board["selection"]
    assert selection["incumbent_role"] == "champion"
    assert selection["incumbent"] in {s.pod_id for s in line}
    assert board["selected"] in {selection["incumbent"]} | {
        t["challenger"] for t in selection["challengers"]
    } | {"ensemble-2"}
    budget = json.loads((run_dir / "run.json").read_text())["budget"]
    assert budget["champion"]["pods"] == len(line)
    assert all(
        p["stop"] == "champion" for p in budget["per_pod"] if p["pod"] in selection["incumbent"]
    )

    from finpod.backtest import run_backtest

    backtest = run_backtest(run_dir, agent="selected", data=tiny_dataset)
    assert backtest.info["pod_ids"][0] == board["selected"] or board["selected"].startswith(
        "ensemble"
    )
    assert selection["decision"] in backtest.info["selection_decision"]
    # N counts every candidate selection looked at: all pods (champion, forks, cut ones)
    # and the ensemble.
    n = 7 + (1 if "ensemble" in board else 0)
    assert board["candidates_evaluated"] == n and backtest.num_trials == n


def _dear_champion(tmp_path, dataset, fill: bool) -> tuple[Path, list[PodSpec]]:
    """A step budget of 1,280 over two slots, the champion's env steps dearer than the
    explorers' (60 passes over each rollout against one; explorers always draw fresh
    pods): the run's directory and the specs it started."""
    search = SEARCH.replace("[search.a2c]", "update_epochs = [1]\n[search.a2c]")
    strategy = tmp_path / "s.toml"
    strategy.write_text(
        tiny_tournament(
            hparams={"update_epochs": 60},
            tournament={"pod_steps": 128, "epochs": 1, "top_k": 2, "epsilon": 1.0, "fill": fill},
            tail='mode = "asha"\nbase_pod = true\n' + search,
        ),
        encoding="utf-8",
    )
    started: list[PodSpec] = []
    result = run_tournament(
        strategy,
        dataset,
        pods=2,
        budget="1280 steps",
        runs=tmp_path / "runs",
        on_event=lambda kind, p: started.append(p["spec"]) if kind == "start" else None,
    )
    return Path(result.run_dir), started


def test_the_champion_trains_its_share_of_a_step_budget(tmp_path, tiny_dataset):
    """With ``fill = false``, the champion line still trains half of the budget (one
    learner's share) beside cheaper explorers, and the run spends the budget exactly."""
    run_dir, started = _dear_champion(tmp_path, tiny_dataset, fill=False)
    champion = json.loads((run_dir / "scheduler.json").read_text())["champion"]
    assert champion["steps"] >= 640
    assert sum(s.steps for s in started if not s.champion) <= 640
    assert sum(s.steps for s in started) == 1280


def test_explorers_fill_the_champions_time_beyond_a_step_budget(tmp_path, tiny_dataset):
    """``fill = true`` (the default): once the cheap explorers have spent their part of
    the budget, their slot keeps training while the champion finishes its share: each
    such segment has a wall-time cap, its steps are counted apart, and the budget still
    gives the champion its share and counts exactly its amount."""
    run_dir, started = _dear_champion(tmp_path, tiny_dataset, fill=True)
    champion = json.loads((run_dir / "scheduler.json").read_text())["champion"]
    assert champion["steps"] >= 640
    fills = [s for s in started if s.fill]
    assert fills and not any(s.champion for s in fills)
    assert all(s.max_seconds is not None and s.max_seconds > 0 for s in fills)
    assert sum(s.steps for s in started if not s.fill) == 1280
    run = json.loads((run_dir / "run.json").read_text())
    progress = json.loads((run_dir / "leaderboard.json").read_text())["progress"]
    assert run["budget"]["fill"]["pods"] == progress["fill_pods"] == len(fills)
    assert progress["env_steps"] - progress["fill_steps"] == 1280
