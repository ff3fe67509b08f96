"""Fixtures of the agents tests: a tiny synthetic market and small agent settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def market():
    from finpod.data import make_synthetic

    return make_synthetic(4, 260, regime="alpha", seed=0)


@pytest.fixture()
def trading_env(market):
    from finpod.env import EnvConfig, VecTradingEnv

    config = EnvConfig(action_mode="weights", episode_length=20)
    return VecTradingEnv(market.slice(0, 200), config, num_envs=4, seed=0)
