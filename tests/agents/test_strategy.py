"""Strategy files: every shipped file loads; bad keys and values are named in the error."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finpod.agents import ALGORITHMS, make_agent
from finpod.agents.cross_section import hparams_for_env
from finpod.data.synthetic_market import make_synthetic
from finpod.env import VecTradingEnv
from finpod.errors import FinpodError
from finpod.strategy import load_strategy, strategy_from_dict

STRATEGIES = sorted((Path(__file__).resolve().parents[2] / "strategies").glob("*.toml"))
KNOWN = {"ppo.toml", "a2c.toml", "sac.toml", "td3.toml", "ddpg.toml"}


def test_one_strategy_per_algorithm_ships():
    assert {p.name for p in STRATEGIES} >= KNOWN


@pytest.mark.parametrize("path", STRATEGIES, ids=lambda p: p.name)
def test_shipped_strategy_loads_and_builds_its_agent(path):
    s = load_strategy(path)
    assert s.algorithm in ALGORITHMS
    config = s.config
    bar = "1min" if config.calendar_features else "1d"
    env = VecTradingEnv(make_synthetic(6, 400, bar=bar, seed=0), config, num_envs=2)
    hparams = hparams_for_env(ALGORITHMS[s.algorithm][0], s.hparams, env)
    agent = make_agent(s.algorithm, hparams, env.obs_dim, env.action_dim, "cpu", s.train.seed)
    assert agent.algorithm == s.algorithm
    assert agent.act(env.reset()).shape == (2, 6)


@pytest.mark.parametrize("path", STRATEGIES, ids=lambda p: p.name)
def test_resolved_toml_round_trips(path):
    s = load_strategy(path)
    again = strategy_from_dict(tomllib.loads(s.to_toml()))
    assert again.to_dict() == s.to_dict()


def _write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


@settings(max_examples=25, deadline=None)
@given(
    section=st.sampled_from(["", "[agent]", "[agent.hparams]", "[env]", "[train]"]),
    key=st.from_regex(r"zz[a-z_]{1,12}", fullmatch=True),
)
def test_unknown_key_anywhere_is_named(tmp_path_factory, section, key):
    head = '[agent]\nalgorithm = "ppo"\n'
    if section == "":
        text = f"{key} = 1\n" + head
    elif section == "[agent]":
        text = head + f"{key} = 1\n"
    else:
        text = head + f"{section}\n{key} = 1\n"
    p = _write(tmp_path_factory.mktemp("s"), text)
    with pytest.raises(FinpodError) as err:
        load_strategy(p)
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[agent]\nalgorithm = "rainbow"\n', "agent.algorithm"),
        ('[agent]\nalgorithm = "ppo"\n[agent.hparams]\ngamma = 2.0\n', "gamma"),
        ('[agent]\nalgorithm = "sac"\n[agent.hparams]\nbatch_size = "big"\n', "batch_size"),
        ('[agent]\nalgorithm = "ppo"\n[agent.hparams]\nactor_hidden = [64, -1]\n', "actor_hidden"),
        ("[train]\nnum_envs = 0\n", "train.num_envs"),
        ('[train]\ndevice = "tpu"\n', "train.device"),
        ('[train]\nscore = "alpha"\n', "train.score"),
        ('[env]\nfill_price = "close_t"\n', "fill_price"),
        ("[env]\ncost_rate = -1\n", "cost_rate"),
        ("agent = 3\n", "agent"),
    ],
)
def test_bad_value_is_named(tmp_path, text, named):
    with pytest.raises(FinpodError) as err:
        load_strategy(_write(tmp_path, text))
    assert named in str(err.value)


def test_invalid_toml_and_missing_file_are_user_errors(tmp_path):
    with pytest.raises(FinpodError, match="not valid TOML"):
        load_strategy(_write(tmp_path, "[agent\n"))
    with pytest.raises(FinpodError, match="does not exist"):
        load_strategy(tmp_path / "nope.toml")
