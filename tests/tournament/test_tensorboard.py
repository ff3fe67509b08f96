"""A tournament's TensorBoard event files: one folder per pod, every member of a population
included, written by the driver from the rows it records, equal to metrics.csv."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from finpod.runs import Leaderboard, read_hparams, read_metrics
from finpod.runs.tensorboard import tag
from finpod.tournament import run_tournament

from .conftest import write_strategy

#: Tags every PPO or A2C pod shows (A2C has no approx KL nor clip fraction).
COMMON_TAGS = {
    "charts/episodic_return",
    "charts/SPS",
    "charts/learning_rate",
    "train/policy_loss",
    "train/value_loss",
    "train/entropy",
    "train/explained_variance",
    "validation/sharpe",
    "validation/return",
    "validation/turnover",
    "validation/costs",
}
PPO_TAGS = {"train/approx_kl", "train/clip_frac"}


def scalars(pod_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """Tag → [(step, wall time, value)] read back with TensorBoard's own loader."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(pod_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {
        t: [(e.step, e.wall_time, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]
    }


@pytest.fixture(scope="module")
def population_run(tmp_path_factory, tiny_dataset, local_ray):
    tmp = tmp_path_factory.mktemp("tb")
    strategy = write_strategy(
        tmp / "s.toml", pod_steps=256, epochs=2, top_k=3, extra="population = 3"
    )
    result = run_tournament(strategy, tiny_dataset, pods=1, budget="6 pods", runs=tmp / "r")
    return result.run_dir


def test_every_member_of_a_population_has_its_event_folder_with_every_key(population_run):
    board = Leaderboard.load(population_run)
    assert board.candidates_evaluated == 6
    pods = {r[0] for r in read_metrics(population_run / "metrics.csv")}
    assert len(pods) == 6
    assert {p.name for p in (population_run / "tensorboard").iterdir()} == pods
    for pod in pods:
        got = scalars(population_run / "tensorboard" / pod)
        hp = read_hparams(population_run / "tensorboard" / pod)
        want = COMMON_TAGS | (PPO_TAGS if hp["algorithm"] == "ppo" else set())
        assert want <= set(got), (pod, want - set(got))
        assert all(len(got[t]) == 2 for t in want), pod  # one point per epoch
        assert "learning_rate" in hp and "num_envs" in hp
        # A fresh pod has no parent: the key is left out, never written as "None".
        assert "None" not in {str(v) for v in hp.values()}


def test_members_of_one_population_log_their_own_numbers(population_run):
    """Per-member values, not the population's mean: their learning rates (searched) and
    explained variances differ."""
    lead = sorted(p.name for p in (population_run / "tensorboard").iterdir())[:3]
    lrs = {scalars(population_run / "tensorboard" / p)["charts/learning_rate"][0][2] for p in lead}
    evs = {
        scalars(population_run / "tensorboard" / p)["train/explained_variance"][-1][2] for p in lead
    }
    assert len(lrs) == 3 and len(evs) == 3


def test_event_values_equal_the_metrics_csv_rows(population_run):
    expected: dict[str, dict[str, list[tuple[int, float, float]]]] = {}
    for pod, steps, wall, split, metric, value in read_metrics(population_run / "metrics.csv"):
        expected.setdefault(pod, {}).setdefault(tag(split, metric), []).append((steps, wall, value))
    origin = None
    for pod, by_tag in expected.items():
        got = scalars(population_run / "tensorboard" / pod)
        assert set(got) == set(by_tag), pod
        for name, rows in by_tag.items():
            events = got[name]
            assert [e[0] for e in events] == [r[0] for r in rows], (pod, name)
            np.testing.assert_array_equal(
                np.array([e[2] for e in events], np.float32),
                np.array([r[2] for r in rows], np.float32),
            )
            # One wall-clock origin for the whole run (the run's creation): pods compare.
            offsets = [e[1] - r[1] for e, r in zip(events, rows, strict=True)]
            origin = offsets[0] if origin is None else origin
            assert offsets == pytest.approx([origin] * len(offsets), abs=2e-3)


def test_a_pod_of_its_own_reports_sps_learning_rate_turnover_and_costs(tiny_dataset, tmp_path):
    """A pod trained alone (not in a population) reports the same rows, scored with its
    own rollout: turnover and costs of that rollout."""
    from finpod.data import load_split
    from finpod.env import EnvConfig, rollout
    from finpod.env.rollout import activity
    from finpod.tournament.generator import PodSpec
    from finpod.tournament.pod import Pod

    config = EnvConfig(episode_length=40)
    pod = Pod(load_split(tiny_dataset, "train"), load_split(tiny_dataset, "validation"), config)
    hp = {"horizon": 16, "minibatch_size": 64, "update_epochs": 1, "learning_rate": 1e-3}
    spec = PodSpec(
        pod_id="p0",
        algorithm="ppo",
        hparams={**hp, "actor_hidden": [8], "critic_hidden": [8]},
        seed=3,
        steps=128,
        epochs=2,
        num_envs=4,
        num_learners=1,
        score_name="sharpe",
        max_seconds=None,
    )
    result = pod.train(spec)
    rows = {(split, metric): value for _, _, split, metric, value in result.metrics}
    assert rows[("train", "learning_rate")] == 1e-3 and rows[("train", "sps")] > 0
    assert "explained_variance" in {m for s, m in rows if s == "train"}
    # The last validation rows are the final agent's rollout's turnover and costs.
    from finpod.agents import load_checkpoint

    path = tmp_path / "p0.safetensors"
    path.write_bytes(result.checkpoint)
    agent = load_checkpoint(path)
    scored = activity(rollout(lambda o: agent.act(o, deterministic=True), pod.valid_market, config))
    assert scored["turnover"] > 0
    assert rows[("validation", "turnover")] == pytest.approx(scored["turnover"], rel=1e-9)
    assert rows[("validation", "costs")] == pytest.approx(scored["costs"], rel=1e-9)


def test_each_member_logs_its_own_row_of_the_population_statistics(tiny_dataset):
    """Member k's train rows are row k of what the population's ``learn`` returned, and its
    validation rows are the scores of its own account. The reference is the same
    population trained again here from the same seeds, hyperparameters and env."""
    import math

    import pandas as pd
    import torch

    from finpod.agents.hparams import build_hparams
    from finpod.agents.ppo import PPOParams
    from finpod.agents.registry import make_population
    from finpod.agents.validation import ValidationScorer
    from finpod.data import load_split
    from finpod.data.market import periods_per_year
    from finpod.env import EnvConfig, VecTradingEnv
    from finpod.scores import score_returns
    from finpod.tournament.generator import PodSpec
    from finpod.tournament.members import ENV_SEED_OFFSET, PopulationTrainer
    from finpod.tournament.pod import Pod

    pod = Pod(
        load_split(tiny_dataset, "train"),
        load_split(tiny_dataset, "validation"),
        EnvConfig(episode_length=40),
    )
    base = {"horizon": 16, "minibatch_size": 64, "update_epochs": 2, "actor_hidden": [8]}
    base["critic_hidden"] = [8]
    lrs = (3e-3, 1e-4, 1e-3)
    specs = [
        PodSpec(
            pod_id=f"m{k}",
            algorithm="ppo",
            hparams={**base, "learning_rate": lr, "ent_coef": 0.01 * k},
            seed=5 + k,
            steps=64,
            epochs=1,
            num_envs=4,
            num_learners=1,
        )
        for k, lr in enumerate(lrs)
    ]
    results = PopulationTrainer(pod).train(specs, [None] * 3)

    lead, config = specs[0], pod.env_config_for(specs[0])
    seed = lead.seed + ENV_SEED_OFFSET
    torch.manual_seed(lead.seed)
    env = VecTradingEnv(pod.train_market, config, num_envs=12, seed=seed, random_start=True)
    env.reset(seed=seed)
    hps = [build_hparams(PPOParams, s.hparams) for s in specs]
    population = make_population("ppo", hps, env.obs_dim, env.action_dim, "cpu", [5, 6, 7])
    stats = population.learn(env, 64)
    scored = ValidationScorer(pod.valid_market, config, "sharpe", 3, "cpu").score(
        lambda obs: population.act(obs, deterministic=True)
    )
    rets = scored.returns
    index = pd.DatetimeIndex(pod.valid_market.timestamps[1:]).tz_convert(None)
    ann = float(pod.valid_market.annualization) or periods_per_year(pod.valid_market.bar)
    assert len({float(stats["policy_loss"][k]) for k in range(3)}) == 3  # rows differ
    for k, result in enumerate(results):
        rows = {(split, m): v for _, _, split, m, v in result.metrics}
        for key, value in stats.items():
            got, want = rows[("train", key)], float(value[k])
            assert got == want or (math.isnan(got) and math.isnan(want)), (k, key, got, want)
        assert rows[("train", "learning_rate")] == lrs[k]
        score = score_returns(pd.Series(rets[k], index=index), "sharpe", ann)
        assert rows[("validation", "sharpe")] == pytest.approx(score, rel=1e-9), k
