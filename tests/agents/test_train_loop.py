"""Training loop: selection on validation, run files, learning curves."""

from __future__ import annotations

import csv

import numpy as np
from agents_small import SMALL

from finpod.agents import load_checkpoint, make_agent
from finpod.agents.train import checkpoint_id, train
from finpod.runs import METRICS_HEADER as METRIC_COLUMNS
from finpod.runs.candidates import load_candidates


def scripted_scores(scores: list[float]):
    """``(eval_fn, seen)``: an eval function that returns ``scores`` in turn and records
    the env steps of each agent it scores in ``seen``."""
    it = iter(scores)
    seen: list[int] = []

    def eval_fn(agent):
        seen.append(agent.env_steps)
        return next(it)

    return eval_fn, seen


def test_best_checkpoint_is_the_best_validation_score(trading_env, tmp_path):
    eval_fn, seen = scripted_scores([0.5, 2.0, 1.0, -1.0])
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    res = train(
        agent,
        trading_env,
        total_steps=4 * 32,
        eval_every=32,
        eval_fn=eval_fn,
        run_dir=tmp_path,
        progress=False,
        pod_id="p0",
    )
    assert res.best_score == 2.0 and res.best_env_steps == seen[1]
    assert load_checkpoint(res.best_checkpoint).env_steps == seen[1]
    assert load_checkpoint(res.last_checkpoint).env_steps == seen[-1]
    assert [h["score"] for h in res.history] == [0.5, 2.0, 1.0, -1.0]
    with open(tmp_path / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0].keys()) == METRIC_COLUMNS
    val = [r for r in rows if r["split"] == "validation"]
    assert [float(r["value"]) for r in val] == [0.5, 2.0, 1.0, -1.0]
    assert {r["split"] for r in rows} == {"train", "validation"}
    assert (tmp_path / "learning_curves.png").stat().st_size > 1000
    assert "validation" in (tmp_path / "train.log").read_text()


def test_trading_eval_scores_the_validation_split(market, trading_env):
    from finpod.agents.train import make_trading_eval
    from finpod.env import EnvConfig, rollout, score

    valid = market.slice(200, 260)
    config = EnvConfig(action_mode="weights")
    agent = make_agent("sac", SMALL["sac"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    value, returns = make_trading_eval(valid, config, "sharpe")(agent)
    expected = rollout(lambda o: agent.act(o, deterministic=True), valid, config)
    assert value == score(expected, "sharpe")
    np.testing.assert_array_equal(returns, expected.returns.to_numpy())
    assert returns.shape == (valid.num_bars - 1,) and returns.dtype == np.float64


def test_every_validation_checkpoint_is_a_recorded_candidate(trading_env, tmp_path):
    rng = np.random.default_rng(0)
    series = [rng.normal(0, 0.01, 30) for _ in range(4)]
    calls = iter(zip([0.5, 2.0, 1.0, -1.0], series, strict=True))
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    res = train(
        agent,
        trading_env,
        total_steps=4 * 32,
        eval_every=32,
        eval_fn=lambda a: next(calls),
        run_dir=tmp_path,
        progress=False,
        pod_id="p0",
    )
    got = load_candidates(tmp_path)
    steps = [int(h["env_steps"]) for h in res.history]
    assert got.ids == [checkpoint_id("p0", s) for s in steps]
    assert got.kinds == ["checkpoint"] * 4
    assert got.scores.tolist() == [0.5, 2.0, 1.0, -1.0]
    np.testing.assert_array_equal(got.returns, np.stack(series, axis=1))
    # the best-on-validation pick chose among 4 checkpoints, not 1
    assert res.candidates_evaluated == 4


def test_a_checkpoint_with_non_finite_validation_returns_is_never_selected(trading_env, tmp_path):
    good, bad = np.full(20, 0.001), np.full(20, 0.001)
    bad[3] = np.nan
    calls = iter([(0.5, good), (9.0, bad)])
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    res = train(
        agent,
        trading_env,
        total_steps=2 * 32,
        eval_every=32,
        eval_fn=lambda a: next(calls),
        run_dir=tmp_path,
        progress=False,
        pod_id="p0",
    )
    assert res.best_score == 0.5
    assert len(load_candidates(tmp_path)) == 1


def test_training_in_memory_keeps_the_best_scored_weights_not_the_last(trading_env):
    """Without a run directory (a walk-forward seed) the best weights are still those of
    the best validation score."""
    eval_fn, seen = scripted_scores([0.5, 2.0, 1.0])
    agent = make_agent("ppo", SMALL["ppo"], trading_env.obs_dim, trading_env.action_dim, "cpu", 0)
    res = train(
        agent, trading_env, total_steps=3 * 32, eval_every=32, eval_fn=eval_fn, progress=False
    )
    assert res.best_score == 2.0 and res.best_env_steps == seen[1]
    assert int(res.best_state["counter.env_steps"]) == seen[1] < agent.env_steps
