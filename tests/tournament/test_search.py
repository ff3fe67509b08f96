"""Tournament config and search space validation; the generator's fresh pods and children."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.errors import FinpodError
from finpod.tournament.config import (
    Budget,
    TournamentConfig,
    parse_budget,
    parse_search,
    parse_tournament,
)
from finpod.tournament.generator import Generator
from finpod.tournament.leaderboard import Entry, Leaderboard, checkpoint_name


@dataclass
class FastParams:
    learning_rate: float = 1e-3
    gamma: float = 0.99
    batch: int = 64
    hidden: tuple[int, ...] = (64,)


@dataclass
class SlowParams:
    tau: float = 0.005
    lr: float = 3e-4


class FastAgent:
    frozen_fields = ("hidden",)


class SlowAgent:
    frozen_fields = ()


REGISTRY = {"fast": (FastParams, FastAgent), "slow": (SlowParams, SlowAgent)}
RAW_SEARCH = {
    "algorithms": ["fast", "slow"],
    "fast": {
        "learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
        "gamma": {"low": 0.9, "high": 0.999},
        "batch": {"low": 32, "high": 256},
        "hidden": [[32], [64, 64]],
    },
    "slow": {"tau": {"low": 0.001, "high": 0.02}, "lr": 1e-3},
}


def _space():
    return parse_search(RAW_SEARCH, "fast", {"learning_rate": 5e-3}, registry=REGISTRY)


@pytest.mark.parametrize(
    ("text", "kind", "amount"),
    [
        ("90s", "time", 90),
        ("30m", "time", 1800),
        ("2h", "time", 7200),
        (45, "time", 45),
        ("2e6 steps", "steps", 2_000_000),
        ("40 pods", "pods", 40),
        ("1 pod", "pods", 1),
    ],
)
def test_budget_text_is_parsed(text, kind, amount):
    assert parse_budget(text) == Budget(kind, amount)


@pytest.mark.parametrize("text", ["soon", "10 parsecs", "-5m", "0 pods", ""])
def test_bad_budget_is_a_readable_error(text):
    with pytest.raises(FinpodError, match="budget"):
        parse_budget(text)


def test_tournament_table_is_validated_by_key():
    cfg = parse_tournament(
        {"pods": "auto", "budget": "10m", "mode": "generational", "gpus_per_pod": 0.25}
    )
    assert cfg.pods is None and cfg.budget == Budget("time", 600) and cfg.gpus_per_pod == 0.25
    assert parse_tournament(cfg.to_dict()) == cfg  # the resolved table reads back identically
    with pytest.raises(FinpodError, match="tournament.'pod_stepz'"):
        parse_tournament({"pod_stepz": 10})
    with pytest.raises(FinpodError, match="tournament.mode"):
        parse_tournament({"mode": "swiss"})
    with pytest.raises(FinpodError, match="tournament.epsilon"):
        parse_tournament({"epsilon": 1.5})
    with pytest.raises(FinpodError, match="pods"):
        parse_tournament({"pods": 0})


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"algorithms": ["nope"]}, "unknown algorithm 'nope'"),
        ({"fast": {"learning_rat": 0.1}}, "search.fast.learning_rat"),
        ({"fast": {"gamma": {"low": 0.99, "high": 0.9}}}, "low 0.99 > high 0.9"),
        ({"fast": {"learning_rate": {"low": 0.0, "high": 1.0, "log": True}}}, "log-scaled"),
        ({"fast": {"gamma": {"low": 0.9}}}, "needs both low and high"),
        ({"algorithms": ["fast"], "slow": {"tau": 0.1}}, "not in search.algorithms"),
        ({"fast": {"batch": "big"}}, "batch"),
    ],
)
def test_bad_search_tables_name_the_problem(raw, match):
    with pytest.raises(FinpodError, match=match):
        parse_search(raw, "fast", registry=REGISTRY)


def test_a_list_valued_field_takes_a_list_as_one_value_and_lists_of_lists_as_choices():
    raw = {"fast": {"hidden": [16, 16]}}
    space = parse_search(raw, "fast", registry=REGISTRY)
    assert all(space.sample(np.random.default_rng(s))[1]["hidden"] == [16, 16] for s in range(5))
    space = parse_search({"fast": {"hidden": [[8], [16, 16]]}}, "fast", registry=REGISTRY)
    seen = {tuple(space.sample(np.random.default_rng(s))[1]["hidden"]) for s in range(30)}
    assert seen == {(8,), (16, 16)}


def test_without_a_search_table_the_agent_table_is_the_whole_space():
    space = parse_search({}, "slow", {"lr": 0.01}, registry=REGISTRY)
    assert list(space.algorithms) == ["slow"]
    assert space.sample(np.random.default_rng(0)) == ("slow", {"lr": 0.01})


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_fresh_draws_stay_in_declared_ranges(seed):
    space = _space()
    algo, hp = space.sample(np.random.default_rng(seed))
    if algo == "fast":
        assert 1e-4 <= hp["learning_rate"] <= 1e-2
        assert 0.9 <= hp["gamma"] <= 0.999
        assert isinstance(hp["batch"], int) and 32 <= hp["batch"] <= 256
        assert hp["hidden"] in ([32], [64, 64])
    else:
        assert 0.001 <= hp["tau"] <= 0.02 and hp["lr"] == 1e-3


def test_fresh_pods_draw_every_listed_algorithm():
    space = _space()
    seen = {space.sample(np.random.default_rng(s))[0] for s in range(40)}
    assert seen == {"fast", "slow"}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.0, 2.0))
def test_perturbation_keeps_ranges_frozen_fields_and_choices(seed, scale):
    space = _space().algorithms["fast"]
    parent = {"learning_rate": 9e-3, "gamma": 0.95, "batch": 250, "hidden": [64, 64]}
    child = space.perturb(parent, scale, np.random.default_rng(seed))
    assert child["hidden"] == [64, 64]
    assert 1e-4 <= child["learning_rate"] <= 1e-2 and 0.9 <= child["gamma"] <= 0.999
    assert 32 <= child["batch"] <= 256
    bound = 1 + scale
    ratio = child["gamma"] / parent["gamma"]
    assert ratio <= bound + 1e-9 and ratio >= 1 / bound - 1e-9 or child["gamma"] in (0.9, 0.999)


def _board(tmp_path, n):
    board = Leaderboard(tmp_path, 5)
    for i in range(n):
        e = Entry(
            f"p{i:05d}",
            "slow",
            {"tau": 0.01, "lr": 1e-3},
            float(i),
            checkpoint_name(f"p{i:05d}"),
            lineage=["p09999"],
            history=[{"env_steps": 100, "score": float(i)}],
            env_steps=100,
        )
        board.record(e, b"")
    return board


def test_generator_starts_from_scratch_until_the_board_is_warm(tmp_path):
    cfg = TournamentConfig(fresh_pods=3, epsilon=0.0)
    gen = Generator(_space(), cfg, seed=1, num_envs=4)
    board = _board(tmp_path, 2)
    assert all(gen.next(board, i).parent is None for i in range(20))
    board = _board(tmp_path / "b", 3)
    specs = [gen.next(board, i) for i in range(20)]
    assert all(s.parent is not None for s in specs)


def test_children_keep_algorithm_lineage_and_history_and_perturb_hparams(tmp_path):
    cfg = TournamentConfig(fresh_pods=1, epsilon=0.0, perturb=0.5)
    gen = Generator(_space(), cfg, seed=1, num_envs=4)
    board = _board(tmp_path, 3)
    for i in range(30):
        spec = gen.next(board, i)
        parent = board.get(spec.parent)
        assert spec.algorithm == parent.algorithm == "slow"
        assert spec.lineage == [*parent.lineage, parent.pod_id]
        assert spec.base_history == parent.history
        assert spec.hparams["lr"] == 1e-3  # fixed value: never perturbed
        assert 0.001 <= spec.hparams["tau"] <= 0.02
    taus = {gen.next(board, i).hparams["tau"] for i in range(30)}
    assert len(taus) > 1


def test_epsilon_one_always_starts_fresh_and_draws_are_reproducible(tmp_path):
    board = _board(tmp_path, 4)
    gen = Generator(_space(), TournamentConfig(fresh_pods=1, epsilon=1.0), seed=5, num_envs=4)
    specs = [gen.next(board, i) for i in range(10)]
    assert all(s.parent is None for s in specs)
    again = [gen.next(board, i) for i in range(10)]
    assert [(s.algorithm, s.hparams, s.seed) for s in specs] == [
        (s.algorithm, s.hparams, s.seed) for s in again
    ]
    assert len({s.seed for s in specs}) == 10
    assert not any(math.isnan(v) for s in specs for v in s.hparams.values() if isinstance(v, float))


def test_the_example_tournament_strategy_resolves_with_several_algorithms():
    from pathlib import Path

    from finpod.strategy import load_strategy
    from finpod.tournament.run import resolve

    path = Path(__file__).resolve().parents[2] / "strategies" / "tournament.toml"
    config, space, _ = resolve(load_strategy(path), pods="3", budget="2 pods")
    assert config.pods == 3 and config.budget == Budget("pods", 2)
    assert len(space.algorithms) >= 3
    # PPO pods start from the strategy's [agent.hparams] and draw the declared ranges.
    algo_space = space.algorithms["ppo"]
    assert list(algo_space.base["actor_hidden"]) == [128, 64]
    rng = np.random.default_rng(0)
    assert all(5e-5 <= algo_space.sample(rng)["learning_rate"] <= 1e-3 for _ in range(20))
