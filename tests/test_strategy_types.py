"""Strategy values are typed at the door: a value of the wrong type in ``[env]``,
``[train]`` or ``[tournament]`` is one line naming its key (and, for a number written as
text, the fix), never a ``TypeError`` from a comparison; messages say what is true."""

from __future__ import annotations

import dataclasses

import pytest

from finpod.env import EnvConfig
from finpod.errors import FinpodError
from finpod.strategy import load_strategy

NUMERIC_ENV_FIELDS = [
    f.name
    for f in dataclasses.fields(EnvConfig)
    if str(f.type).split("|")[0].strip() in ("float", "int")
]


def _load(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return load_strategy(path)


def test_every_numeric_env_field_is_checked():
    assert {"cost_rate", "no_trade_band", "initial_cash", "slippage", "reward_scale"} <= set(
        NUMERIC_ENV_FIELDS
    )
    assert {"partial_adjustment", "turnover_penalty", "episode_length"} <= set(NUMERIC_ENV_FIELDS)


@pytest.mark.parametrize("key", NUMERIC_ENV_FIELDS)
def test_a_number_written_as_text_in_env_is_one_line_naming_the_key(tmp_path, key):
    with pytest.raises(FinpodError) as err:
        _load(tmp_path, f'[env]\n{key} = "1"\n')
    text = str(err.value)
    assert f"env.{key}" in text and "not a number" in text, text
    assert f"without quotes: {key} = 1" in text, text
    assert "\n" not in text


@pytest.mark.parametrize("key", ["allow_short", "flat_at_close", "integer_shares"])
def test_a_switch_written_as_text_is_named(tmp_path, key):
    with pytest.raises(FinpodError, match=f"env.{key} must be true or false"):
        _load(tmp_path, f'[env]\n{key} = "true"\n')


def test_a_word_for_a_number_says_not_a_number_not_not_finite(tmp_path):
    with pytest.raises(FinpodError) as err:
        _load(tmp_path, '[env]\nepisode_length = "banana"\n')
    text = str(err.value)
    assert "env.episode_length = 'banana' is not a number" in text, text
    assert "finite" not in text
    assert "episode_length = 252" in text  # an integer example


def test_a_fraction_for_an_integer_field_suggests_an_integer(tmp_path):
    with pytest.raises(FinpodError) as err:
        _load(tmp_path, "[env]\nmax_shares = 2.5\n")
    assert "env.max_shares must be an integer, got 2.5" in str(err.value)
    assert "max_shares = 100" in str(err.value)


def test_tournament_ensemble_fraction_suggests_an_integer_ensemble():
    from finpod.tournament.settings import parse_tournament

    with pytest.raises(FinpodError) as err:
        parse_tournament({"ensemble": 2.5})
    assert str(err.value) == "tournament.ensemble must be an integer, got 2.5 (e.g. ensemble = 3)"


def test_whole_floats_of_integer_fields_become_integers():
    config = EnvConfig(max_shares=50.0, episode_length=40.0)
    assert config.max_shares == 50 and isinstance(config.max_shares, int)
    assert isinstance(config.episode_length, int)


def test_cli_prints_one_red_line_for_a_text_number(tmp_path, capsys):
    from finpod.cli import main

    strategy = tmp_path / "s.toml"
    strategy.write_text('[env]\ncost_rate = "0.002"\n')
    data = tmp_path / "ds"  # looks like a dataset to the checks made before any data is read
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--strategy", str(strategy), "--data", str(data)])
    assert exit_.value.code == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0] == (
        "error: env.cost_rate = '0.002' is text, not a number "
        "(write it without quotes: cost_rate = 0.002)"
    )


def test_the_cli_does_not_read_banana_as_nan():
    from finpod.cli import environment_error_line

    assert environment_error_line(ValueError("invalid literal for int(): 'banana'")) is None
    assert "not finite" in environment_error_line(ValueError("cannot convert float NaN"))
