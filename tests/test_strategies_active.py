"""Every shipped strategy trades relative to a reference with execution controls, or says
in its first line why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from finpod.strategy import load_strategy

STRATEGIES = sorted((Path(__file__).resolve().parents[1] / "strategies").glob("*.toml"))


@pytest.mark.parametrize("path", STRATEGIES, ids=lambda p: p.name)
def test_every_shipped_strategy_is_benchmark_relative_with_controls_or_says_why_not(path):
    config = load_strategy(path).config
    first = path.read_text(encoding="utf-8").splitlines()[0]
    if "not benchmark-relative" in first.lower():
        return
    assert config.action_mode == "active", path.name
    assert config.start == "reference", path.name
    assert config.has_schedule or config.no_trade_band > 0 or config.partial_adjustment < 1
    # A band wider than the largest tilt would never let a tilt trade.
    assert config.no_trade_band < config.max_active_weight


@pytest.mark.parametrize("path", STRATEGIES, ids=lambda p: p.name)
def test_starting_in_cash_is_one_line_away(path, tmp_path):
    text = path.read_text(encoding="utf-8")
    assert text.count('start = "reference"') == 1
    edited = tmp_path / path.name
    edited.write_text(text.replace('start = "reference"', 'start = "cash"'), encoding="utf-8")
    config = load_strategy(edited).config
    assert config.start == "cash" and config.action_mode == "active"
