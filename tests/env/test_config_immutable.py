"""Typed settings are validated once, when made, and never change afterwards."""

from __future__ import annotations

import dataclasses

import pytest

from finpod.env import EnvConfig
from finpod.errors import FinpodError
from finpod.strategy import strategy_from_dict


def test_an_env_config_cannot_be_changed_after_it_is_made():
    config = EnvConfig(cost_rate=0.001, decision_interval=5.0)
    assert config.decision_interval == 5 and isinstance(config.decision_interval, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.cost_rate = 2.0  # would skip the check that cost_rate < 1


def test_a_changed_copy_of_an_env_config_is_validated_when_made():
    config = EnvConfig(cost_rate=0.001)
    with pytest.raises(FinpodError, match="cost_rate"):
        dataclasses.replace(config, cost_rate=2.0)
    with pytest.raises(FinpodError, match="cost_rate"):
        config.with_options(cost_rate=2.0)


def test_a_strategy_cannot_be_changed_and_its_changed_copies_are_validated():
    strategy = strategy_from_dict({"env": {"cost_rate": 0.001}, "train": {"total_steps": 64}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        strategy.train.total_steps = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        strategy.config = EnvConfig()
    with pytest.raises(FinpodError, match="train.total_steps"):
        strategy.with_train(total_steps=0)
    longer = strategy.with_train(total_steps=128)
    assert longer.train.total_steps == 128 and strategy.train.total_steps == 64
    assert longer.config is strategy.config
