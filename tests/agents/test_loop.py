"""The one train-and-score loop: the same rows for any learner, callbacks that stop it,
and members that fail alone."""

from __future__ import annotations

import numpy as np
import torch
from agents_small import SMALL

from finpod.agents import make_agent
from finpod.agents.learners import AgentLearner, PopulationLearner
from finpod.agents.loop import Callback, Validation, run_loop
from finpod.agents.registry import make_population
from finpod.env import EnvConfig, VecTradingEnv


def _probe_scorer(act, obs_dim: int, members: int):
    """Scores each member by its deterministic actions on fixed observations: score =
    minus the mean absolute action, returns = the actions (NaN weights give NaN)."""
    obs = torch.linspace(-1.0, 1.0, members * obs_dim).reshape(members, obs_dim)

    def scorer(alive: np.ndarray) -> Validation:
        actions = act(obs).detach().to("cpu", torch.float64).numpy()
        scores = -np.abs(actions).mean(axis=1)
        rows = [
            {"probe": float(s), "width": float(a.std())}
            for s, a in zip(scores, actions, strict=True)
        ]
        return Validation(scores, list(actions), rows)

    return scorer


def _without_wall(rows):
    """Rows without their wall times and speeds; values by ``repr`` (NaN equals NaN)."""
    return [(s, split, name, repr(v)) for s, _, split, name, v in rows if name != "sps"]


def test_a_single_agent_and_a_population_of_one_give_the_same_rows(market):
    config = EnvConfig(action_mode="weights", episode_length=20)
    runs = []
    for as_population in (False, True):
        env = VecTradingEnv(market.slice(0, 200), config, num_envs=4, seed=0)
        torch.manual_seed(0)
        if as_population:
            learner = make_population(
                "ppo", [SMALL["ppo"]], env.obs_dim, env.action_dim, "cpu", [3]
            )
            loop_learner, act = PopulationLearner(learner, env), learner.act
        else:
            learner = make_agent("ppo", SMALL["ppo"], env.obs_dim, env.action_dim, "cpu", 3)
            loop_learner, act = AgentLearner(learner, env), learner.act
        scorer = _probe_scorer(lambda obs, act=act: act(obs, deterministic=True), env.obs_dim, 1)
        runs.append(run_loop(loop_learner, scorer, ids=["m"], steps_per_segment=64, segments=1))
    agent, population = runs
    assert _without_wall(agent.metrics[0]) == _without_wall(population.metrics[0])
    assert [r[3] for r in agent.metrics[0]][-2:] == ["probe", "width"]
    assert agent.history == population.history and len(agent.history[0]) == 1
    assert agent.best_score[0] == population.best_score[0]


class _StopAt(Callback):
    def __init__(self, at: int) -> None:
        self.at, self.seen, self.closed = at, [], False

    def on_segment(self, segment) -> bool:
        self.seen.append(segment.index)
        return segment.index == self.at

    def close(self) -> None:
        self.closed = True


def test_a_callback_that_says_stop_ends_the_loop_after_that_segment(trading_env):
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    scorer = _probe_scorer(lambda obs: agent.act(obs, deterministic=True), trading_env.obs_dim, 1)
    stop, after = _StopAt(2), _StopAt(-1)
    result = run_loop(
        AgentLearner(agent, trading_env),
        scorer,
        ids=["a"],
        steps_per_segment=32,
        segments=5,
        callbacks=[stop, after],
    )
    assert stop.seen == [1, 2] and after.seen == [1, 2]  # every callback sees the last one
    assert len(result.history[0]) == 2 and agent.env_steps == 64
    assert stop.closed and after.closed


class _PoisonMember(Callback):
    """Sets one network weight of member ``k`` to NaN after the first segment."""

    def __init__(self, population, k: int) -> None:
        self.population, self.k = population, k

    def on_segment(self, segment) -> bool:
        if segment.index == 1:
            key = self.population.net_keys[0]
            with torch.no_grad():
                self.population.params[key][self.k].view(-1)[0] = float("nan")
        return False


def test_a_member_gone_non_finite_fails_and_the_others_go_on(market):
    config = EnvConfig(action_mode="weights", episode_length=20)
    env = VecTradingEnv(market.slice(0, 200), config, num_envs=2 * 4, seed=0)
    population = make_population(
        "ppo", [SMALL["ppo"]] * 2, env.obs_dim, env.action_dim, "cpu", [0, 1]
    )
    scorer = _probe_scorer(lambda obs: population.act(obs, deterministic=True), env.obs_dim, 2)
    result = run_loop(
        PopulationLearner(population, env),
        scorer,
        ids=["m0", "m1"],
        steps_per_segment=32,
        segments=3,
        callbacks=[_PoisonMember(population, 1)],
        fail_non_finite=True,
    )
    assert result.failures[0] == "" and result.failures[1].endswith(" at epoch 2")
    assert [len(h) for h in result.history] == [3, 1]
    assert result.scored.tolist() == [3, 1]
    assert np.isnan(result.scores[1]) and result.returns[1] is None
    assert np.isfinite(result.scores[0])
    # The failed member gets no rows after its failure; the other one's go on.
    assert max(r[0] for r in result.metrics[1]) < max(r[0] for r in result.metrics[0])
