"""Paper trading trades only bars after the run's validation end: a live bar on a day the
agent trained or was selected on stops the trader in one line, before any order."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from paper_setup import DAYS, TRAIN_SESSIONS, after_close, play

from finpod.errors import FinpodError


def _validation_end(dataset) -> pd.Timestamp:
    splits = json.loads((dataset / "manifest.json").read_text())["splits"]
    return pd.Timestamp(splits["validation"]["end"]).tz_localize(None).normalize()


def test_a_live_bar_inside_the_runs_validation_split_is_refused(trader, trained, server):
    end = _validation_end(trained[1])
    k = list(DAYS).index(end)  # the validation split's last session
    t = trader()
    server.set_clock(after_close(k))
    with pytest.raises(FinpodError) as err:
        t.step()
    text = str(err.value)
    assert "\n" not in text
    assert f"falls on or before {end:%Y-%m-%d}, the end of run r1's validation split" in text
    assert server.posts == []


def test_the_first_session_after_the_validation_end_is_traded(trader, trained, server):
    k = list(DAYS).index(_validation_end(trained[1])) + 1
    assert k < TRAIN_SESSIONS  # a session of the run's backtest split
    assert play(trader(), server, k) == "decided"
    assert server.posts
