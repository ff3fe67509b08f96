"""A poll that meets a number that is not one (NaN) ends: the decision is skipped in one
line, nothing is traded or recorded on it, and a later poll decides once the numbers are
back; an account whose equity is NaN at the first start, or ``--poll nan``, is one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from journal_checks import assert_journal_is_the_account, journal
from paper_setup import TRAIN_SESSIONS, after_close

from finpod.errors import FinpodError

K = TRAIN_SESSIONS


@pytest.mark.parametrize("what", ["cash", "position"])
def test_a_nan_in_the_account_skips_the_decision_in_one_line(trader, server, run_dir, what):
    t = trader()
    server.set_clock(after_close(K))
    if what == "cash":
        server.cash, cash = math.nan, server.cash
    else:
        server.positions["BBB"] = math.nan
    assert t.step() == "skipped"
    assert t.step() == "skipped"  # said once
    assert t.run(0.01, once=True) == 0  # a poll on it ends
    (line,) = [x for x in t.lines if x.startswith("no decision")]
    reason = "cash" if what == "cash" else "position in BBB"
    assert f"the account's {reason} is not a number" in line
    assert "nothing is traded on it" in line
    assert server.posts == [] and journal(run_dir) == []
    assert t.state.last_decision is None
    if what == "cash":
        server.cash = cash
    else:
        del server.positions["BBB"]
    assert t.step() == "decided"  # the numbers are back: the same bar is decided
    assert_journal_is_the_account(run_dir, server)


def test_a_nan_close_at_the_decision_bar_leaves_that_ticker_untraded(trader, server, run_dir):
    df = server.bars["BBB"].copy()
    df.loc[K, "c"] = np.nan
    server.bars["BBB"] = df
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "decided"
    assert any(x.startswith("BBB: no bar at") and "not traded" in x for x in t.lines)
    assert "BBB" not in {p["symbol"] for p in server.posts} and server.posts
    for p in server.posts:
        assert math.isfinite(float(p["qty"])) and float(p["qty"]) > 0
    assert_journal_is_the_account(run_dir, server)


def test_a_nan_decision_is_never_traded(trader, server, run_dir, monkeypatch):
    import torch

    from finpod.paper import trader as trader_module

    real = trader_module.decide

    def nan_policy(*args, **kw):
        made = real(*args, **kw)
        made.trade[0] = torch.nan
        return made

    monkeypatch.setattr(trader_module, "decide", nan_policy)
    t = trader()
    server.set_clock(after_close(K))
    assert t.step() == "skipped"
    (line,) = [x for x in t.lines if x.startswith("no decision")]
    assert "the agent's trade holds a value that is not a number" in line
    assert server.posts == [] and journal(run_dir) == []


def test_an_account_equity_of_nan_at_the_first_start_is_one_line(trader, server):
    server.cash = math.nan
    with pytest.raises(FinpodError) as err:
        trader()
    assert "the paper account's equity is 'nan', not a positive number" in str(err.value)
    assert "\n" not in str(err.value)


def test_poll_nan_is_one_line(server, run_dir, trained, capsys):
    from finpod.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["paper", str(run_dir), "--data", str(trained[1]), "--poll", "nan", "--once"])
    assert exit_.value.code == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "--poll must be > 0" in err[0], err
