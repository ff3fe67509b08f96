"""Tournament config and search space validation; the generator's fresh pods and children."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.errors import FinpodError
from finpod.runs.leaderboard import Entry, Leaderboard, checkpoint_name
from finpod.tournament.generator import Generator
from finpod.tournament.search import parse_search
from finpod.tournament.settings import Budget, TournamentConfig, parse_budget, parse_tournament


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
        ("30min", "time", 1800),
        ("2h", "time", 7200),
        (45, "time", 45),
        ("2e6 steps", "steps", 2_000_000),
        ("40 pods", "pods", 40),
        ("1 pod", "pods", 1),
        ("16M steps", "steps", 16_000_000),
        ("500k steps", "steps", 500_000),
        ("1.5M steps", "steps", 1_500_000),
    ],
)
def test_budget_text_is_parsed(text, kind, amount):
    assert parse_budget(text) == Budget(kind, amount)


@pytest.mark.parametrize("text", ["soon", "10 parsecs", "-5min", "0 pods", "", "2M s", "30m", "5M"])
def test_bad_budget_is_a_readable_error(text):
    with pytest.raises(FinpodError, match="budget"):
        parse_budget(text)


def test_tournament_table_is_validated_by_key():
    cfg = parse_tournament(
        {"pods": "auto", "budget": "10min", "mode": "generational", "gpus_per_pod": 0.25}
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
    board = Leaderboard(tmp_path, 5, "sharpe")
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
    from finpod.tournament.launch import resolve

    path = Path(__file__).resolve().parents[2] / "strategies" / "tournament.toml"
    config, space, _ = resolve(load_strategy(path), pods="3", budget="2 pods")
    assert config.pods == 3 and config.budget == Budget("pods", 2)
    assert len(space.algorithms) >= 3
    # PPO pods start from the strategy's [agent.hparams] and draw the declared ranges.
    algo_space = space.algorithms["ppo"]
    assert list(algo_space.base["actor_hidden"]) == [32, 32]
    assert algo_space.base["net"] == "cross_sectional"
    rng = np.random.default_rng(0)
    assert all(5e-5 <= algo_space.sample(rng)["learning_rate"] <= 1e-3 for _ in range(20))


# ----- [search.env]: execution controls ------------------------------------------------------

RAW_ENV = {
    "no_trade_band": {"low": 0.0, "high": 0.05},
    "decision_interval": [1, 5, 15],
    "turnover_penalty": {"low": 0, "high": 1},
    "band_target": ["edge", "target"],
    "partial_adjustment": 0.5,
}


def _env_space(raw_env=None):
    raw = {**RAW_SEARCH, "env": RAW_ENV if raw_env is None else raw_env}
    return parse_search(raw, "fast", registry=REGISTRY, env_base={"episode_length": 40})


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_fresh_pods_draw_execution_controls_in_their_declared_ranges(seed):
    env = _env_space().sample_env(np.random.default_rng(seed))
    assert set(env) == set(RAW_ENV)
    assert 0.0 <= env["no_trade_band"] <= 0.05
    assert env["decision_interval"] in (1, 5, 15) and type(env["decision_interval"]) is int
    # Integer bounds on a float field still draw floats (the field's type decides).
    assert isinstance(env["turnover_penalty"], float) and 0.0 <= env["turnover_penalty"] <= 1.0
    assert env["band_target"] in ("edge", "target") and env["partial_adjustment"] == 0.5


def test_an_integer_env_range_draws_integers():
    space = _env_space({"decision_interval": {"low": 1, "high": 30}})
    rng = np.random.default_rng(0)
    values = [space.sample_env(rng)["decision_interval"] for _ in range(50)]
    assert all(type(v) is int and 1 <= v <= 30 for v in values)
    child = [
        space.perturb_env({"decision_interval": 7}, 0.5, rng)["decision_interval"]
        for _ in range(50)
    ]
    assert all(type(v) is int and 1 <= v <= 30 for v in child) and len(set(child)) > 1


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.01, 2.0))
def test_children_perturb_controls_within_ranges_and_keep_text_choices(seed, scale):
    space = _env_space()
    parent = {
        "no_trade_band": 0.0,
        "decision_interval": 5,
        "turnover_penalty": 0.5,
        "band_target": "target",
        "partial_adjustment": 0.5,
    }
    child = space.perturb_env(parent, scale, np.random.default_rng(seed))
    assert 0.0 <= child["no_trade_band"] <= 0.05
    # A linear range moves by at most scale/2 of its width (so a band at 0 can grow).
    assert abs(child["turnover_penalty"] - 0.5) <= 0.5 * scale * 1.0 + 1e-12
    assert child["decision_interval"] in (1, 5, 15)
    assert child["band_target"] == "target" and child["partial_adjustment"] == 0.5


def test_a_band_at_zero_moves_in_children_and_numeric_choices_are_sometimes_redrawn():
    space = _env_space()
    rng = np.random.default_rng(1)
    parent = {**space.sample_env(rng), "no_trade_band": 0.0, "decision_interval": 5}
    children = [space.perturb_env(parent, 0.25, rng) for _ in range(200)]
    assert max(c["no_trade_band"] for c in children) > 0.0
    kept = sum(c["decision_interval"] == 5 for c in children)
    assert 100 < kept < 200  # mostly kept (p = 0.8 + 0.2/3), sometimes re-drawn


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.0, 2.0))
def test_a_child_draws_controls_its_parent_holds_outside_the_declared_choices(seed, scale):
    # The champion trades the strategy's own [env]: every 63 sessions, a partial adjustment
    # of 0.8, where [search.env] declares (1, 5, 15) and 0.5.
    space = _env_space()
    parent = {**space.sample_env(np.random.default_rng(0)), "decision_interval": 63}
    parent["partial_adjustment"] = 0.8
    child = space.perturb_env(parent, scale, np.random.default_rng(seed))
    assert child["decision_interval"] in (1, 5, 15)
    assert child["partial_adjustment"] == 0.5


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.0, 2.0))
def test_a_child_draws_hparam_choices_its_parent_holds_outside_them_but_keeps_frozen_ones(
    seed, scale
):
    raw = {**RAW_SEARCH, "fast": {**RAW_SEARCH["fast"], "batch": [64, 128]}}
    space = parse_search(raw, "fast", registry=REGISTRY).algorithms["fast"]
    parent = {"learning_rate": 1e-3, "gamma": 0.95, "batch": 16, "hidden": [16]}
    child = space.perturb(parent, scale, np.random.default_rng(seed))
    assert child["batch"] in (64, 128)
    assert child["hidden"] == [16]  # fixes the network's shape: never changed
    inside = space.perturb({**parent, "batch": 128}, scale, np.random.default_rng(seed))
    assert inside["batch"] == 128  # a declared choice is kept


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copies_of_a_mis_set_champion_lie_in_the_quick_starts_declared_space(tmp_path, seed):
    """A timid PPO base (learning rate ÷ 20, one epoch) that decides every 63 sessions:
    the champion keeps them, its perturbed copies train what ``[search]`` declares."""
    import tomllib
    from pathlib import Path

    from finpod.runs import toml_dumps
    from finpod.strategy import load_strategy
    from finpod.tournament.launch import resolve

    raw = tomllib.loads(
        (Path(__file__).resolve().parents[2] / "strategies/quickstart.toml").read_text()
    )
    raw["agent"]["hparams"].update(learning_rate=5e-5, update_epochs=1)
    raw["env"]["decision_interval"] = 63
    raw["train"]["seed"] = seed
    path = tmp_path / "misset.toml"
    path.write_text(toml_dumps(raw), encoding="utf-8")
    config, space, run_seed = resolve(load_strategy(path))
    gen = Generator(space, config, run_seed, num_envs=4)
    base = gen.base(0)
    assert base.hparams["update_epochs"] == 1 and base.env["decision_interval"] == 63
    champion = Entry(
        base.pod_id, base.algorithm, base.hparams, 1.0, checkpoint_name(base.pod_id), env=base.env
    )
    for i in range(1, 30):
        child = gen.child(champion, i)
        assert child.parent == base.pod_id and child.algorithm == "ppo"
        assert child.hparams["update_epochs"] in (2, 4)
        assert 5e-4 <= child.hparams["learning_rate"] <= 2e-3
        assert child.env["decision_interval"] in (5, 10, 21)
        assert child.hparams["actor_hidden"] == base.hparams["actor_hidden"]
    # Continuing the champion unperturbed keeps its own settings.
    same = gen.child(champion, 30, perturb=False)
    assert same.hparams["update_epochs"] == 1 and same.env["decision_interval"] == 63


@pytest.mark.parametrize("field", ["cost_rate", "slippage", "fill_price", "initial_cash"])
def test_the_cost_model_cannot_be_searched(field):
    with pytest.raises(FinpodError, match=f"search.env.{field} cannot be searched"):
        _env_space({field: {"low": 0.0, "high": 0.01} if field != "fill_price" else ["open"]})


@pytest.mark.parametrize(
    ("raw_env", "match"),
    [
        ({"no_trade_bnd": [0.0, 0.01]}, "unknown env setting 'search.env.no_trade_bnd'"),
        ({"no_trade_band": {"low": 0.0, "high": 1.5}}, "no_trade_band"),
        ({"decision_interval": [0, 5]}, "decision_interval"),
        ({"band_target": ["edge", "middle"]}, "band_target"),
    ],
)
def test_bad_env_search_values_fail_when_the_strategy_is_read(raw_env, match):
    with pytest.raises(FinpodError, match=match):
        _env_space(raw_env)


def test_an_env_field_that_is_no_execution_control_cannot_be_searched():
    with pytest.raises(FinpodError, match="search.env.reward_scale cannot be searched: it is not"):
        _env_space({"reward_scale": [1.0, 2.0]})


def test_generator_gives_fresh_pods_drawn_controls_and_children_their_parents_perturbed(tmp_path):
    space = _env_space()
    cfg = TournamentConfig(fresh_pods=1, epsilon=0.0, perturb=0.5)
    gen = Generator(space, cfg, seed=3, num_envs=4)
    fresh = gen.fresh(0)
    assert set(fresh.env) == set(RAW_ENV)
    board = Leaderboard(tmp_path, 5, "sharpe")
    entry = Entry("p00000", "slow", {"tau": 0.01, "lr": 1e-3}, 1.0, checkpoint_name("p00000"))
    entry.env = dict(fresh.env)  # what the leaderboard records for the pod
    board.record(entry, b"")
    children = [gen.next(board, i) for i in range(1, 40)]
    assert all(c.parent == "p00000" for c in children)
    assert all(c.env["band_target"] == fresh.env["band_target"] for c in children)
    assert len({c.env["no_trade_band"] for c in children}) > 1
    assert all(0.0 <= c.env["no_trade_band"] <= 0.05 for c in children)


def test_without_search_env_pods_carry_no_env_and_draws_are_unchanged(tmp_path):
    gen = Generator(_space(), TournamentConfig(fresh_pods=1, epsilon=0.0), seed=5, num_envs=4)
    specs = [gen.fresh(i) for i in range(5)]
    assert all(s.env == {} for s in specs)
    # The seed stream does not depend on [search.env] being absent or empty.
    gen_empty = Generator(_env_space({}), TournamentConfig(), seed=5, num_envs=4)
    assert [s.seed for s in specs] == [gen_empty.fresh(i).seed for i in range(5)]


def test_the_resolved_search_table_reads_back_with_its_env_ranges():
    space = _env_space()
    table = space.to_dict()
    assert table["env"]["decision_interval"] == [1, 5, 15]
    again = parse_search(table, "fast", registry=REGISTRY)
    assert again.to_dict() == table


# ----- buffer inheritance and multi-learner knobs ------------------------------------------------


def test_inherit_buffer_is_parsed_and_validated():
    assert parse_tournament({}).inherit_buffer == "auto"
    assert parse_tournament({"inherit_buffer": False}).inherit_buffer is False
    assert parse_tournament({"inherit_buffer": True}).inherit_buffer is True
    for bad in ("sometimes", 1, 0.5):
        with pytest.raises(FinpodError, match="tournament.inherit_buffer"):
            parse_tournament({"inherit_buffer": bad})


def test_auto_inheritance_follows_the_memory_rule():
    from finpod.tournament.settings import INHERIT_BUFFER_MEMORY_SHARE, inherit_buffer_fits

    mem = 64 * 2**30
    limit = int(INHERIT_BUFFER_MEMORY_SHARE * mem / 10)
    assert inherit_buffer_fits("auto", limit, top_k=10, memory_bytes=mem)
    assert not inherit_buffer_fits("auto", limit + 1, top_k=10, memory_bytes=mem)
    assert inherit_buffer_fits(True, 10**15, top_k=10, memory_bytes=mem)
    assert not inherit_buffer_fits(False, 1, top_k=10, memory_bytes=mem)


def test_cpus_per_pod_must_cover_the_learners():
    with pytest.raises(FinpodError, match=r"cpus_per_pod \(1\) must be ≥ num_learners \(2\)"):
        parse_tournament({"num_learners": 2, "cpus_per_pod": 1})
    assert parse_tournament({"num_learners": 2, "cpus_per_pod": 2}).num_learners == 2


def test_fractional_gpus_are_shared_and_several_learners_get_one_gpu_each():
    # One learner on a quarter GPU: four pods share a device.
    assert parse_tournament({"gpus_per_pod": 0.25}).gpus_per_pod == 0.25
    # Several learners sharing one (fraction of a) GPU, or one GPU each.
    assert parse_tournament({"num_learners": 2, "cpus_per_pod": 2, "gpus_per_pod": 0.5})
    assert parse_tournament({"num_learners": 4, "cpus_per_pod": 4, "gpus_per_pod": 4})
    with pytest.raises(FinpodError, match="gpus_per_pod"):
        parse_tournament({"num_learners": 4, "cpus_per_pod": 4, "gpus_per_pod": 2})


def test_children_of_off_policy_parents_inherit_buffers_unless_switched_off(tmp_path):
    from finpod.agents import ALGORITHMS

    raw = {"algorithms": ["sac", "ppo"]}
    space = parse_search(raw, "ppo")
    board = Leaderboard(tmp_path, 5, "sharpe")
    board.record(Entry("p00000", "sac", {}, 1.0, checkpoint_name("p00000")), b"")
    board.record(Entry("p00001", "ppo", {}, 0.5, checkpoint_name("p00001")), b"")
    assert "sac" in ALGORITHMS
    for setting, inherits in ((True, True), ("auto", True), (False, False)):
        gen = Generator(
            space, TournamentConfig(fresh_pods=1, epsilon=0.0, inherit_buffer=setting), 1, 4
        )
        specs = [gen.next(board, i) for i in range(30)]
        sac = [s for s in specs if s.algorithm == "sac"]
        ppo = [s for s in specs if s.algorithm == "ppo"]
        assert sac and ppo
        assert all(s.inherit_buffer is inherits and s.export_buffer == setting for s in sac)
        assert all(not s.inherit_buffer and s.export_buffer is False for s in ppo)


def test_a_strategy_with_search_env_resolves_and_its_written_form_reads_back(tmp_path):
    import tomllib

    from finpod.strategy import strategy_from_dict
    from finpod.tournament.launch import resolve

    raw = tomllib.loads(
        """
        [agent]
        algorithm = "ppo"
        [env]
        action_mode = "weights"
        [search]
        algorithms = ["ppo"]
        [search.ppo]
        learning_rate = { low = 1e-4, high = 1e-3, log = true }
        [search.env]
        no_trade_band = { low = 0.0, high = 0.05 }
        decision_interval = [1, 5, 15]
        turnover_penalty = { low = 0, high = 0.004 }
        """
    )
    strategy = strategy_from_dict(raw)
    _, space, _ = resolve(strategy)
    assert [s.name for s in space.env] == ["decision_interval", "no_trade_band", "turnover_penalty"]
    # What run.json / strategy.toml record reads back as the same space.
    strategy = dataclasses.replace(strategy, search=space.to_dict())
    again = strategy_from_dict(tomllib.loads(strategy.to_toml()))
    _, space2, _ = resolve(again)
    assert space2.to_dict() == space.to_dict()
    rng1, rng2 = np.random.default_rng(4), np.random.default_rng(4)
    assert space.sample_env(rng1) == space2.sample_env(rng2)


def test_a_pods_env_is_the_runs_env_with_its_controls_and_the_same_cost_model():
    from finpod.env import EnvConfig
    from finpod.tournament.search import pod_env

    base = EnvConfig(cost_rate=0.001, episode_length=40).to_dict()
    env = pod_env(base, {"no_trade_band": 0.02, "decision_interval": 5})
    cfg = EnvConfig.from_dict(env)
    assert cfg.no_trade_band == 0.02 and cfg.decision_interval == 5
    assert cfg.cost_rate == 0.001 and cfg.episode_length == 40
    assert pod_env(base, {}) == base and pod_env(base, None) == base
    with pytest.raises(FinpodError, match="cost_rate"):
        pod_env(base, {"cost_rate": 0.0})
