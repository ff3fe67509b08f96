"""One drawdown definition: the series the tearsheet draws bottoms at empyrical's max
drawdown, a first-bar loss included."""

from __future__ import annotations

import empyrical as ep
import numpy as np
import pandas as pd
import pytest

from finpod.backtest import metrics as m


def _series(values) -> pd.Series:
    return pd.Series(values, index=pd.date_range("2020-01-01", periods=len(values), freq="B"))


def test_a_first_bar_loss_is_a_drawdown_from_the_starting_value():
    r = _series([-0.3, 0.1, 0.05])
    dd = m.drawdown_series(r)
    assert dd.iloc[0] == pytest.approx(-0.3)
    assert dd.min() == pytest.approx(m.max_drawdown(r)) == pytest.approx(ep.max_drawdown(r))


@pytest.mark.parametrize("seed", range(5))
def test_drawdown_series_bottoms_at_empyricals_max_drawdown(seed):
    r = _series(np.random.default_rng(seed).normal(0.0, 0.02, 300))
    assert m.drawdown_series(r).min() == pytest.approx(ep.max_drawdown(r), abs=1e-12)
    assert (m.drawdown_series(r) <= 0).all()
