"""Synthetic markets: seeded, and the planted alpha is earned by the documented oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from finpod.data import build_dataset, load_manifest, load_split
from finpod.data.synthetic_market import (
    expected_bar_return,
    make_synthetic,
    oracle_weights,
    synthetic_bars,
)
from finpod.errors import FinpodError


def _earned(m, w):
    """Log return earned by weights decided at t, filled at close t+1, held to close t+2."""
    r = torch.log(m.close[2:] / m.close[1:-1])  # row k: close[k+1] -> close[k+2]
    return (w[:-2] * r).sum(1).double()


def test_same_seed_same_market_other_seed_other_market():
    a = synthetic_bars(5, 200, seed=7, regime="alpha")
    b = synthetic_bars(5, 200, seed=7, regime="alpha")
    c = synthetic_bars(5, 200, seed=8, regime="alpha")
    np.testing.assert_array_equal(a.close, b.close)
    np.testing.assert_array_equal(a.extra["alpha_signal"], b.extra["alpha_signal"])
    assert not np.array_equal(a.close, c.close)


def test_bars_are_consistent():
    b = synthetic_bars(8, 500, seed=1, bar="5min")
    assert (b.high >= np.maximum(b.open, b.close)).all() and (
        b.low <= np.minimum(b.open, b.close)
    ).all()
    assert (b.low > 0).all() and b.tradable.all()
    s = b.extra["alpha_signal"]
    assert abs(s.mean()) < 0.2 and 0.8 < s.std() < 1.2


@pytest.mark.parametrize("mode", ["proportional", "top1"])
def test_oracle_earns_the_planted_alpha_and_nothing_in_the_null(mode):
    alpha = make_synthetic(20, 3000, regime="alpha", seed=3)
    null = make_synthetic(20, 3000, regime="null", seed=3)
    ea = _earned(alpha, oracle_weights(alpha, mode))
    en = _earned(null, oracle_weights(null, mode))
    t_alpha = ea.mean() / ea.std() * math.sqrt(len(ea))
    t_null = en.mean() / en.std() * math.sqrt(len(en))
    assert t_alpha > 8
    assert abs(t_null) < 4
    # Realized ≈ the documented expectation κ·σ·Σ w s.
    exp = (
        expected_bar_return(alpha, oracle_weights(alpha, mode), alpha_strength=0.1)[:-2]
        .double()
        .mean()
    )
    assert ea.mean().item() == pytest.approx(exp.item(), rel=0.35)


def test_signal_predicts_t_plus_2_not_the_bar_just_seen():
    m = make_synthetic(30, 4000, regime="alpha", seed=5, signal_persistence=0.0)
    s = m.features[:, :, m.feature_names.index("alpha_signal")].double()
    r = torch.log(m.close[1:] / m.close[:-1]).double()  # row k: close k -> k+1
    ahead2 = torch.corrcoef(torch.stack([s[:-2].flatten(), r[1:].flatten()]))[0, 1]
    ahead1 = torch.corrcoef(torch.stack([s[:-1].flatten(), r[:].flatten()]))[0, 1]
    assert ahead2 == pytest.approx(0.1, abs=0.03)
    assert abs(ahead1) < 0.03


def test_oracle_uses_only_current_signal():
    m = make_synthetic(6, 300, regime="alpha", seed=2)
    w = oracle_weights(m)
    assert torch.allclose(w.sum(1)[w.sum(1) > 0], torch.ones(1))
    cut = m.slice(0, 150)
    assert torch.equal(oracle_weights(cut), w[:150])


def test_late_listings_are_masked():
    m = make_synthetic(6, 300, seed=4, late_listings=2)
    assert not m.tradable[:, -2:].all() and m.tradable[:, :-2].all()
    assert (m.close[~m.tradable] == 0).all()
    assert (oracle_weights(m)[~m.tradable] == 0).all()


def test_minute_dataset_build_and_load(tmp_path):
    out = build_dataset(
        "synthetic", tmp_path / "s", bar="1min", n_tickers=4, n_bars=390 * 30, regime="alpha"
    )
    man = load_manifest(out)
    assert man["bar"] == "1min" and "alpha_signal" in man["features"]
    tr = load_split(out, "train")
    assert tr.timestamps[0].strftime("%H:%M") == "09:30"


def test_bad_arguments():
    with pytest.raises(FinpodError, match="regime"):
        synthetic_bars(3, 10, regime="bull")
    with pytest.raises(FinpodError, match="without.*alpha_signal|no alpha_signal"):
        from finpod.data import from_frame

        from .conftest import make_daily

        oracle_weights(from_frame(make_daily(n=40)))
