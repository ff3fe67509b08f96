"""One list of execution controls (``EXECUTION_CONTROLS``), read by the env, the backtest's
benchmarks and the tournament's search: a control listed there is switched off for the
benchmarks and searchable, and none of the three keeps a list of its own."""

import dataclasses

import pytest

from finpod.backtest.benchmarks import benchmark_config, reference_config
from finpod.env import EnvConfig
from finpod.env.config import EXECUTION_CONTROLS
from finpod.tournament.search import parse_search_env

#: A value other than the neutral one for each control (a new control needs one here).
SWITCHED_ON = {
    "decision_interval": 5,
    "decision_times": ["10:00"],
    "no_trade_band": 0.02,
    "band_target": "target",
    "partial_adjustment": 0.5,
    "turnover_penalty": 0.002,
    "flat_at_close": True,
}
NEUTRAL = dict(EXECUTION_CONTROLS)


def test_every_control_has_a_switched_on_example():
    assert set(SWITCHED_ON) == set(NEUTRAL)


def test_the_neutral_value_of_every_control_is_its_default():
    defaults = EnvConfig().to_dict()
    for name, neutral in EXECUTION_CONTROLS:
        assert defaults[name] == (list(neutral) if isinstance(neutral, tuple) else neutral)


@pytest.mark.parametrize("name", list(NEUTRAL))
def test_a_control_is_off_for_the_benchmarks_kept_for_the_reference_and_searchable(name):
    config = EnvConfig(**{name: SWITCHED_ON[name]})
    neutral = EnvConfig().to_dict()[name]
    assert getattr(config.without_controls(), name) == neutral
    assert getattr(benchmark_config(config), name) == neutral
    assert getattr(reference_config(config), name) == SWITCHED_ON[name]
    specs = parse_search_env({name: [SWITCHED_ON[name]]}, EnvConfig())
    assert [spec.name for spec in specs] == [name]


def test_settings_that_are_no_controls_are_kept_by_the_benchmarks():
    config = EnvConfig(cost_rate=0.003, reward_scale=2.0, max_shares=7, price_window=10)
    plain = dataclasses.asdict(config.without_controls())
    for name, value in dataclasses.asdict(config).items():
        if name not in NEUTRAL:
            assert plain[name] == value, name
