"""Every validation row means the same thing whichever learner wrote it.

A single agent, a tournament pod and a population member are all scored by one scorer
(:class:`finpod.agents.validation.ValidationScorer`). Their ``validation`` rows are
checked here against an independent path: a one-account :func:`finpod.env.rollout` of the
agent's checkpoint, scored by :func:`finpod.env.score`. Under the information-ratio score,
``return`` is the account's own annualized return, not the active one.
"""

from __future__ import annotations

import pytest

from finpod.agents.checkpoint import load_checkpoint_bytes
from finpod.data import load_split
from finpod.env import EnvConfig, rollout, score
from finpod.env.rollout import activity
from finpod.tournament.generator import PodSpec
from finpod.tournament.members import PopulationTrainer
from finpod.tournament.pod import Pod

SCORE = "information_ratio"
ACTIVE = EnvConfig(
    action_mode="active",
    reference="equal_weight",
    start="reference",
    reward="active_log_return",
    cost_rate=0.002,
    max_active_weight=0.05,
    episode_length=40,
)


def _spec(k: int) -> PodSpec:
    hparams = {"horizon": 16, "minibatch_size": 64, "update_epochs": 1, "actor_hidden": [8]}
    hparams |= {"critic_hidden": [8], "learning_rate": 1e-3 * (k + 1)}
    return PodSpec(
        f"p{k}", "ppo", hparams, k, 128, 1, 4, 1, score_name=SCORE, env={"decision_interval": 2}
    )


def _reference_rows(pod: Pod, spec: PodSpec, checkpoint: bytes) -> dict[str, float]:
    """What each validation row means, from a one-account rollout of the checkpoint."""
    agent = load_checkpoint_bytes(checkpoint)
    result = rollout(
        lambda obs: agent.act(obs, deterministic=True), pod.valid_market, pod.env_config_for(spec)
    )
    return {SCORE: score(result, SCORE), "return": score(result, "return"), **activity(result)}


def _validation_rows(metrics) -> dict[str, float]:
    return {metric: value for _, _, split, metric, value in metrics if split == "validation"}


@pytest.fixture(scope="module")
def pod(tiny_dataset) -> Pod:
    return Pod(load_split(tiny_dataset, "train"), load_split(tiny_dataset, "validation"), ACTIVE)


def test_a_pods_validation_rows_mean_what_a_rollout_of_its_checkpoint_says(pod):
    result = pod.train(_spec(0))
    rows = _validation_rows(result.metrics)
    want = _reference_rows(pod, _spec(0), result.checkpoint)
    assert list(rows) == [SCORE, "return", "turnover", "costs"]
    for key, value in want.items():
        assert rows[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_a_population_members_validation_rows_mean_the_same_as_a_pods(pod):
    """The population's ``return`` row is the account's own return (as a pod's), never
    the active return the information ratio ranks."""
    specs = [_spec(1), _spec(2)]
    results = PopulationTrainer(pod).train(specs, [None, None])
    for spec, result in zip(specs, results, strict=True):
        rows = _validation_rows(result.metrics)
        want = _reference_rows(pod, spec, result.checkpoint)
        assert list(rows) == [SCORE, "return", "turnover", "costs"]
        for key, value in want.items():
            assert rows[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (spec.pod_id, key)


def test_a_single_agents_validation_rows_mean_the_same_as_a_pods(pod):
    from finpod.agents.validation import TradingEval

    spec = _spec(3)
    result = pod.train(spec)
    agent = load_checkpoint_bytes(result.checkpoint)
    evaluation = TradingEval(pod.valid_market, pod.env_config_for(spec), SCORE)
    value, _ = evaluation(agent)
    rows = {SCORE: value, **evaluation.activity}
    want = _reference_rows(pod, spec, result.checkpoint)
    assert rows == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert rows == pytest.approx(_validation_rows(result.metrics), rel=1e-12)
