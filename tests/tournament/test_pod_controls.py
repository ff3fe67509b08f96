"""Every pod trains and is scored with its own searched execution controls, and records
them (leaderboard entry and checkpoint) for the backtest to replay."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from finpod.errors import FinpodError
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod import Pod
from finpod.tournament.updater import entry_of

HP = {
    "horizon": 16,
    "minibatch_size": 32,
    "update_epochs": 1,
    "actor_hidden": [8],
    "critic_hidden": [8],
}
#: A decision every 7 bars and a wide band: a pod trading with these holds still far more.
CONTROLS = {"decision_interval": 7, "no_trade_band": 0.05, "partial_adjustment": 0.5}


@pytest.fixture(scope="module")
def pod(tiny_dataset):
    from finpod.data import load_split
    from finpod.env import EnvConfig

    torch.set_num_threads(1)
    return Pod(
        load_split(tiny_dataset, "train"),
        load_split(tiny_dataset, "validation"),
        EnvConfig(episode_length=40, action_mode="weights", cost_rate=0.002),
        "cpu",
    )


def _spec(**kw) -> PodSpec:
    base = dict(
        pod_id="p00000",
        algorithm="ppo",
        hparams=HP,
        seed=5,
        steps=128,
        epochs=1,
        num_envs=4,
        num_learners=1,
    )
    return PodSpec(**{**base, **kw})


def test_a_pods_envs_and_scoring_use_its_own_controls_over_the_runs_cost_model(pod):
    spec = _spec(env=CONTROLS)
    config = pod.env_config_for(spec)
    assert config.decision_interval == 7 and config.no_trade_band == 0.05
    assert config.cost_rate == 0.002 and config.action_mode == "weights"
    assert all(env.config.decision_interval == 7 for env in pod.make_envs(spec))
    # A pod without searched controls trains with the run's env as is.
    assert pod.env_config_for(_spec()).decision_interval == 1


def test_validation_scoring_replays_the_pods_controls(pod):
    from finpod.env import rollout

    spec = _spec(env=CONTROLS)
    result = pod.train(spec)
    assert result.env == CONTROLS
    # Re-score the returned weights with the pod's controls and with the run's env: the
    # pod's recorded validation returns are the former, bar for bar.
    from finpod.agents import read_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.safetensors"
        path.write_bytes(result.checkpoint)
        meta, _ = read_checkpoint(path)
        agent_env = json.loads(meta["env"])
    assert agent_env["decision_interval"] == 7 and agent_env["cost_rate"] == 0.002

    from finpod.agents import load_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.safetensors"
        path.write_bytes(result.checkpoint)
        agent = load_checkpoint(path)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, deterministic=True)

    own = rollout(policy, pod.valid_market, pod.env_config_for(spec))
    np.testing.assert_allclose(own.returns.to_numpy(np.float32), result.returns, rtol=0, atol=0)
    # Between decision bars the pod's holdings never change.
    trades = own.transactions
    if len(trades):
        policy_trades = trades[trades.get("reason", "policy") == "policy"]
        bars = np.searchsorted(pod.valid_market.timestamps, policy_trades.index.unique())
        # Orders decided at bar t (t % 7 == 0) fill at bar t + 1.
        assert set((bars - 1) % 7) <= {0}


def test_the_leaderboard_entry_records_the_controls_the_pod_ran_with(pod):
    spec = _spec(env=CONTROLS)
    result = pod.train(spec)
    entry = entry_of(result, spec)
    assert entry.env == CONTROLS
    assert entry.to_json()["env"] == CONTROLS


def test_a_pod_cannot_change_the_cost_model(pod):
    with pytest.raises(FinpodError, match="cost_rate"):
        pod.env_config_for(_spec(env={"cost_rate": 0.0}))
