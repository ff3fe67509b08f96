"""The live window's ticker axis is the run's order, for every per-ticker table."""

from __future__ import annotations

import numpy as np
import torch
from paper_setup import SYMBOLS, TRAIN_SESSIONS, long_frame

from finpod.paper.live import window_market


def test_the_window_in_the_runs_order_keeps_each_tickers_own_volume():
    bars = long_frame(TRAIN_SESSIONS + 1)
    given = list(SYMBOLS)
    sorted_ = window_market(bars, given, "1d", "XNYS", torch.device("cpu"))
    reverse = window_market(bars, given[::-1], "1d", "XNYS", torch.device("cpu"))
    assert reverse.tickers == given[::-1]
    for name in ("close", "volume"):
        a, b = getattr(sorted_, name).numpy(), getattr(reverse, name).numpy()
        np.testing.assert_array_equal(a[:, ::-1], b, err_msg=name)
