"""The strategy names which of the dataset's user feature columns the agent observes
(``[env] user_features``): the env's layout and observation hold those, in that order,
after the built-in features; a name the dataset lacks is one line before anything trains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data import load_split
from finpod.data.features import FEATURES
from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.tables import ObsLayout
from finpod.errors import FinpodError
from finpod.strategy import strategy_from_dict
from finpod.tournament.setup import check_inputs
from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download, _one_line

STRATEGY = """
[agent]
algorithm = "ppo"
[agent.hparams]
horizon = 8
minibatch_size = 32
actor_hidden = [8]
critic_hidden = [8]
[env]
action_mode = "weights"
user_features = {names}
[train]
num_envs = 4
total_steps = 64
eval_every = 64
device = "cpu"
"""


def _frame() -> pd.DataFrame:
    df = make_daily(n=120)
    rng = np.random.default_rng(7)
    df["sentiment"] = rng.standard_normal(len(df)) * 0.5
    df["flow"] = rng.standard_normal(len(df)) * 0.5
    return df


@pytest.fixture
def two_columns(tmp_path, capsys):
    df = _frame()
    args = ["--path", str(_csv(tmp_path, df)), "--feature-column", "sentiment"]
    code, err = _download(tmp_path, capsys, *args, "--feature-column", "flow")
    assert code == 0, err
    return tmp_path / "ds", df


def _feature_block(market, config):
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    layout = ObsLayout.for_env(market, config)
    obs = env.reset()
    assert obs.shape[1] == layout.obs_dim
    return obs[0, layout.features].view(market.num_stocks, layout.num_features)


def test_the_strategy_picks_which_user_columns_the_agent_observes(two_columns):
    data, df = two_columns
    market = load_split(data, "all")
    assert market.feature_names[len(FEATURES) :] == ["flow", "sentiment"]
    first = df[df["date"] == df["date"].min()].set_index("tic")
    flow = torch.tensor(first.loc[market.tickers, "flow"].to_numpy(), dtype=torch.float32)
    sentiment = torch.tensor(first.loc[market.tickers, "sentiment"].to_numpy(), dtype=torch.float32)

    only_flow = _feature_block(market, EnvConfig(user_features=["flow"]))
    assert only_flow.shape[1] == len(FEATURES) + 1
    torch.testing.assert_close(only_flow[:, -1], flow)

    reordered = _feature_block(market, EnvConfig(user_features=["sentiment", "flow"]))
    torch.testing.assert_close(reordered[:, -2], sentiment)
    torch.testing.assert_close(reordered[:, -1], flow)

    assert _feature_block(market, EnvConfig(user_features=[])).shape[1] == len(FEATURES)
    assert _feature_block(market, EnvConfig()).shape[1] == len(FEATURES) + 2


def test_a_column_the_dataset_lacks_stops_training_in_one_line(two_columns, tmp_path, capsys):
    from finpod.cli import main

    data, _ = two_columns
    (tmp_path / "s.toml").write_text(STRATEGY.format(names='["news"]'))
    runs = tmp_path / "runs"
    argv = ["train", "--strategy", str(tmp_path / "s.toml"), "--data", str(data)]
    try:
        main([*argv, "--runs", str(runs)])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    line = _one_line(code, capsys.readouterr().err, "'news'", "flow, sentiment")
    assert "--feature-column" in line and "[env] user_features" in line  # printed as text
    assert not runs.exists() or not any(runs.iterdir())


def test_a_tournament_checks_the_names_on_the_driver(two_columns):
    data, _ = two_columns
    with pytest.raises(FinpodError, match="'news', which the dataset does not have"):
        check_inputs(EnvConfig(user_features=["flow", "news"]), data)
    check_inputs(EnvConfig(user_features=["flow"]), data)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('"flow"', "must be a list of column names"),
        ('["close_ret_1", "flow"]', "a built-in feature"),
        ('["flow", "flow"]', "twice"),
        ("[3]", "is not a column name"),
    ],
)
def test_a_bad_user_features_setting_is_one_line(value, says):
    import tomllib

    if "close_ret_1" in value:
        value = value.replace("close_ret_1", FEATURES[0])
    raw = tomllib.loads(STRATEGY.format(names=value))
    with pytest.raises(FinpodError, match=says):
        strategy_from_dict(raw)


def test_the_tearsheet_names_the_observed_columns_and_the_unused_ones(two_columns):
    import json

    from finpod.data.user_features import feature_disclosure

    data, _ = two_columns
    manifest = json.loads((data / "manifest.json").read_text())
    text = feature_disclosure(manifest, ["flow"])
    assert "user column(s) flow (look-ahead check" in text
    assert text.endswith("not observed: sentiment")
    assert feature_disclosure(manifest, []) is None
    assert "not observed" not in feature_disclosure(manifest)


def test_a_walkforward_checks_the_names_before_any_fold(two_columns, tmp_path):
    from finpod.walkforward import FoldSpec, run_walkforward

    data, _ = two_columns
    (tmp_path / "s.toml").write_text(STRATEGY.format(names='["news"]'))
    with pytest.raises(FinpodError, match="'news', which the dataset does not have"):
        run_walkforward(
            data,
            tmp_path / "s.toml",
            tmp_path / "wf",
            spec=FoldSpec(train="40", validation="20", backtest="20", folds=1),
            seeds=1,
            use_ray=False,
        )
    assert not (tmp_path / "wf").exists()
