"""The backtest replays a pod's own env settings: on the validation bars it reproduces the
pod's validation scoring exactly."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from finpod.agents import load_checkpoint
from finpod.backtest import metrics as m
from finpod.backtest import run_backtest
from finpod.env import EnvConfig

from .fakes import FakeDataset, make_market, make_run_dir

#: A pod's execution controls, different from the run strategy's defaults.
POD_CONTROLS = {
    "action_mode": "weights",
    "cost_rate": 0.002,
    "decision_interval": 3,
    "no_trade_band": 0.02,
    "partial_adjustment": 0.5,
    "turnover_penalty": 0.001,
}


def _pod_env() -> dict:
    known = set(EnvConfig.__dataclass_fields__)
    return {k: v for k, v in POD_CONTROLS.items() if k in known}


def _make_active(path) -> None:
    """An untrained policy outputs ~0 (no trades); make its actions swing with the obs."""
    import torch

    from finpod.agents import save_checkpoint

    agent = load_checkpoint(path)
    weights = agent.weights()
    last = max(int(k.split(".")[2]) for k in weights if k.startswith("actor.mean."))
    with torch.no_grad():
        weights[f"actor.mean.{last}.weight"].mul_(300.0)
        weights[f"actor.mean.{last}.bias"].fill_(0.3)
    save_checkpoint(agent, path)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    whole = make_market(num_bars=360, seed=9, late_listing=False, split="validation")
    train = dataclasses.replace(whole.slice(0, 240), split="train")
    valid = whole.slice(240, 360)
    (tmp_path / "dataset").mkdir()
    run = make_run_dir(tmp_path, valid, dataset_path=str(tmp_path / "dataset"), env=_pod_env())
    meta = json.loads((run / "run.json").read_text())
    meta["strategy"]["env"] = {"cost_rate": 0.001}  # the run's default, not the pod's
    (run / "run.json").write_text(json.dumps(meta))
    board = json.loads((run / "leaderboard.json").read_text())
    board["entries"][0]["env"] = _pod_env()  # the pod searched its own controls
    _make_active(run / "checkpoints" / "pod000.safetensors")
    (run / "leaderboard.json").write_text(json.dumps(board))
    # The backtest split *is* the validation bars here, so both paths see the same bars.
    FakeDataset({"train": train, "validation": valid, "backtest": valid}).install(monkeypatch)
    return run, train, valid


def test_backtest_replay_of_a_pods_controls_equals_its_validation_scoring(setup):
    from finpod.agents.train import make_trading_eval
    from finpod.tournament.pod import Pod

    run, train, valid = setup
    result = run_backtest(run)
    assert result.info["env_source"] == "leaderboard entry"
    for key, value in _pod_env().items():
        assert getattr(result.env_config, key) == value
    config = EnvConfig.from_dict(_pod_env())
    agent = load_checkpoint(run / "checkpoints" / "pod000.safetensors")
    # single-agent validation scoring: same per-bar returns, bar for bar
    score, returns = make_trading_eval(valid, config, "sharpe")(agent)
    np.testing.assert_array_equal(result.returns.to_numpy(), returns)
    assert len(result.transactions) > 10  # it trades, so the controls matter
    assert m.sharpe_ratio(result.returns, "1d") == pytest.approx(score, rel=1e-12)
    # tournament pod scoring with the pod's controls: the same Sharpe
    scored = Pod(train, valid, config).evaluate(agent, "sharpe")
    assert result.metrics.loc["sharpe", "agent"] == pytest.approx(scored.scores[0], rel=1e-12)
    # the pod's per-bar validation returns, as recorded for PBO: the same, bar for bar
    np.testing.assert_array_equal(scored.returns[0], result.returns.to_numpy())


def test_the_strategy_defaults_would_not_reproduce_it(setup):
    # the check above can fail: the run's strategy env (no controls) scores differently
    from finpod.agents.train import make_trading_eval

    run, _, valid = setup
    result = run_backtest(run)
    agent = load_checkpoint(run / "checkpoints" / "pod000.safetensors")
    # same controls but the strategy's cost rate: the returns differ
    other = EnvConfig.from_dict({**_pod_env(), "cost_rate": 0.001})
    _, plain = make_trading_eval(valid, other, "sharpe")(agent)
    assert not np.array_equal(result.returns.to_numpy(), plain)
