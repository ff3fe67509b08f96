"""A replayed paper session end to end: the orders the account receives are the env's
orders for the same bars, and the record a report reads is written."""

from __future__ import annotations

import json
from dataclasses import replace

import torch
from paper_setup import DAYS, START_CASH, SYMBOLS, TRAIN_SESSIONS, long_frame, play

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.inmemory import from_frame
from finpod.env.core import initial_state, observe, transition
from finpod.env.ensemble import EnsemblePolicy, Member
from finpod.env.tables import build_tables
from finpod.runs import Leaderboard, read_run_info

DECISIONS = 8


def env_trades(run_dir, first: int, count: int) -> list[dict[str, float]]:
    """The env's executed trades, per decision, for the run's best agent on the same bars,
    from an all-cash account at session ``first``."""
    entry = Leaderboard.load(run_dir).entries[0]
    config, _ = recorded_env_config(run_dir, read_run_info(run_dir), entry)
    config = replace(config, initial_cash=START_CASH)
    policy = ensemble_policy(load_agents(run_dir, [entry], torch.device("cpu")))
    market = from_frame(long_frame(first + count + 1), "1d", min_coverage=0.0, min_bars=1)
    tables = build_tables(market, config, torch.device("cpu"))
    state = initial_state(torch.tensor([first]), tables, config, market.num_stocks)
    out = []
    for _ in range(count):
        state, step = transition(state, policy(observe(state, tables, config)), tables, config)
        out.append(
            {s: float(q) for s, q in zip(market.tickers, step.trade[0], strict=True) if q != 0}
        )
    return out


def test_replayed_session_sends_the_envs_orders_for_the_same_bars(trader, server, run_dir):
    t = trader()
    sent_per_day = []
    for k in range(TRAIN_SESSIONS, TRAIN_SESSIONS + DECISIONS):
        before = len(server.orders)
        assert play(t, server, k) == "decided"
        sent_per_day.append({sym: qty for _, sym, qty in server.sent()[before:]})
    expected = env_trades(run_dir, TRAIN_SESSIONS, DECISIONS)
    assert sum(len(d) for d in expected) >= 6, expected  # the agent really trades
    assert sent_per_day == expected, sent_per_day
    # every order id names the decision bar and the symbol
    assert all(cid.endswith(sym) for cid, sym, _ in server.sent())


def test_an_ensemble_agent_sends_the_envs_ensemble_orders(trader, server, run_dir):
    t = trader(agent="ensemble-1")
    sent_per_day = []
    for k in range(TRAIN_SESSIONS, TRAIN_SESSIONS + 4):
        before = len(server.orders)
        assert play(t, server, k) == "decided"
        sent_per_day.append({sym: qty for _, sym, qty in server.sent()[before:]})
    entry = Leaderboard.load(run_dir).entries[0]
    member_config, _ = recorded_env_config(run_dir, read_run_info(run_dir), entry)
    agents = load_agents(run_dir, [entry], torch.device("cpu"))
    market = from_frame(long_frame(TRAIN_SESSIONS + 5), "1d", min_coverage=0.0, min_bars=1)
    policy = EnsemblePolicy([Member(ensemble_policy(agents), member_config)], market)
    policy.bar = TRAIN_SESSIONS
    config = replace(policy.config, initial_cash=START_CASH)
    tables = build_tables(market, config, torch.device("cpu"))
    state = initial_state(torch.tensor([TRAIN_SESSIONS]), tables, config, market.num_stocks)
    expected = []
    for _ in range(4):
        state, step = transition(state, policy(observe(state, tables, config)), tables, config)
        expected.append(
            {s: float(q) for s, q in zip(market.tickers, step.trade[0], strict=True) if q != 0}
        )
    assert t.agent.ensemble and sum(len(d) for d in expected) >= 4, expected
    assert sent_per_day == expected


def test_the_session_leaves_a_journal_of_intended_and_filled_weights(trader, server, run_dir):
    t = trader()
    for k in range(TRAIN_SESSIONS, TRAIN_SESSIONS + 3):
        play(t, server, k)
    lines = (run_dir / "paper" / "journal.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines if json.loads(x)["kind"] != "order"]
    kinds = [r["kind"] for r in records]
    assert kinds == ["decision", "fills", "decision", "fills", "decision"]
    first, fills = records[0], records[1]
    assert set(first["intended_weights"]) == set(SYMBOLS)
    assert first["decision"].startswith(f"{DAYS[TRAIN_SESSIONS]:%Y-%m-%d}")
    assert fills["decision"] == first["decision"]
    assert all(o["status"] == "filled" for o in fills["orders"])
    # every order filled at the price it was sized with: filled ≈ intended weights
    for sym in SYMBOLS:
        assert abs(fills["filled_weights"][sym] - first["intended_weights"][sym]) < 0.03
    state = json.loads((run_dir / "paper" / "state.json").read_text())
    assert state["last_decision"] == records[-1]["decision"]


def test_finpod_report_draws_the_paper_record(trader, server, run_dir, trained, tmp_path, capsys):
    from finpod.cli import main

    t = trader()
    for k in range(TRAIN_SESSIONS, TRAIN_SESSIONS + 3):
        play(t, server, k)
    reports = tmp_path / "reports"
    for args in (
        ["backtest", str(run_dir), "--data", str(trained[1]), "--reports", str(reports)],
        ["report", str(run_dir), "--reports", str(reports)],
    ):
        try:
            main(args)
        except SystemExit as exit_:
            assert exit_.code in (0, None), capsys.readouterr().err
    said = capsys.readouterr()
    out = said.out + said.err  # the report folder on stdout, its lines on stderr
    assert out.count("paper trading:") == 1, out
    page = (reports / run_dir.name / "paper.html").read_text()
    assert "3 decisions" in page and "max |intended - filled| weight" in page
    assert page.count("<tr>") == 4  # the header and one row per decision
