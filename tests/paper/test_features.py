"""Paper trading of an agent trained with its own feature column: refused in one line
without the file that holds the column live; with it (``--feature-file``), the orders are
the env's for the same bars and feature values, a row of a later bar is never read, and
a decision waits for its bar's row."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from paper_setup import (
    DAYS,
    START_CASH,
    STRATEGY,
    SYMBOLS,
    TRAIN_SESSIONS,
    after_close,
    long_frame,
    play,
    train_tiny,
)

from finpod.backtest.agents import ensemble_policy, load_agents, recorded_env_config
from finpod.data.inmemory import from_frame
from finpod.env.core import initial_state, observe, transition
from finpod.env.tables import build_tables
from finpod.errors import FinpodError
from finpod.paper.live import window_market
from finpod.runs import Leaderboard, read_run_info

K = TRAIN_SESSIONS
#: The user column, one value per (session, ticker), O(1).
SENTIMENT = np.random.default_rng(21).standard_normal((len(DAYS), len(SYMBOLS))).round(4) * 0.5


def sentiment_table(upto: int = len(DAYS)) -> pd.DataFrame:
    """``date, tic, sentiment`` of the first ``upto`` sessions."""
    return pd.DataFrame(
        {
            "date": np.repeat([f"{d:%Y-%m-%d}" for d in DAYS[:upto]], len(SYMBOLS)),
            "tic": np.tile(SYMBOLS, upto),
            "sentiment": SENTIMENT[:upto].ravel(),
        }
    )


def bars_with_sentiment(upto: int) -> pd.DataFrame:
    frame = long_frame(upto)
    frame["date"] = frame["timestamp"].dt.strftime("%Y-%m-%d")
    return frame.merge(sentiment_table(upto), on=["date", "tic"]).drop(columns="date")


@pytest.fixture(scope="module")
def featured(tmp_path_factory):
    """(run, dataset) of a tiny run trained on 300 sessions with the column ``sentiment``."""
    root = tmp_path_factory.mktemp("paper-featured")
    frame = bars_with_sentiment(TRAIN_SESSIONS)
    return train_tiny(root, frame, "f1", feature_columns=["sentiment"])


@pytest.fixture
def make(featured, server, tmp_path):
    """``make(feature_file=...)`` → a started PaperTrader on a copy of the featured run."""
    from finpod.paper.trader import PaperTrader

    run = Path(shutil.copytree(featured[0], tmp_path / "runs" / featured[0].name))

    def build(**kw):
        lines: list[str] = []
        t = PaperTrader(run, data=featured[1], lookback_sessions=400, log=lines.append, **kw)
        t.lines = lines
        t.start()
        return t

    build.run = run
    return build


def env_trades(run_dir: Path, first: int, count: int) -> list[dict[str, float]]:
    """The env's trades for the run's agent on the same bars and sentiment values."""
    entry = Leaderboard.load(run_dir).entries[0]
    config, _ = recorded_env_config(run_dir, read_run_info(run_dir), entry)
    config = replace(config, initial_cash=START_CASH)
    policy = ensemble_policy(load_agents(run_dir, [entry], torch.device("cpu")))
    frame = bars_with_sentiment(first + count + 1)
    market = from_frame(frame, "1d", min_coverage=0.0, min_bars=1, feature_columns=["sentiment"])
    assert market.feature_names[-1] == "sentiment"
    tables = build_tables(market, config, torch.device("cpu"))
    state = initial_state(torch.tensor([first]), tables, config, market.num_stocks)
    out = []
    for _ in range(count):
        state, step = transition(state, policy(observe(state, tables, config)), tables, config)
        out.append({s: float(q) for s, q in zip(market.tickers, step.trade[0], strict=True) if q})
    return out


def test_without_the_feature_file_paper_trading_is_refused_in_one_line(featured, server):
    from finpod.paper.trader import PaperTrader

    with pytest.raises(FinpodError) as err:
        PaperTrader(featured[0], data=featured[1], log=lambda line: None)
    text = str(err.value)
    assert "observes the user feature(s) sentiment" in text and "--feature-file" in text
    assert "\n" not in text
    assert server.posts == []


def test_with_the_feature_file_the_orders_are_the_envs(make, server, tmp_path):
    path = tmp_path / "sentiment.csv"
    sentiment_table().to_csv(path, index=False)  # every session, later ones included
    t = make(feature_file=path)
    sent = []
    for k in range(K, K + 4):
        before = len(server.orders)
        assert play(t, server, k) == "decided"
        sent.append({sym: qty for _, sym, qty in server.sent()[before:]})
    expected = env_trades(make.run, K, 4)
    assert sum(len(d) for d in expected) >= 3, expected
    assert sent == expected


def test_a_row_of_a_later_bar_is_never_read(tmp_path):
    honest, changed = tmp_path / "a.csv", tmp_path / "b.csv"
    sentiment_table().to_csv(honest, index=False)
    later = sentiment_table()
    later.loc[later["date"] > f"{DAYS[K]:%Y-%m-%d}", "sentiment"] = 9.0
    later.to_csv(changed, index=False)
    bars = long_frame(K + 1)

    def window(path):
        return window_market(
            bars, list(SYMBOLS), "1d", "XNYS", torch.device("cpu"), path, ["sentiment"]
        )

    a, b = window(honest), window(changed)
    assert a.timestamps[-1].date() == DAYS[K].date()
    np.testing.assert_array_equal(a.features.numpy(), b.features.numpy())
    np.testing.assert_array_equal(a.features[-1, :, -1].numpy(), SENTIMENT[K].astype(np.float32))


def test_a_decision_waits_for_its_bars_row_then_trades(make, server, tmp_path):
    path = tmp_path / "sentiment.csv"
    sentiment_table(K).to_csv(path, index=False)  # no row yet for session K
    t = make(feature_file=path)
    server.set_clock(after_close(K))
    assert t.step() == "waiting"
    assert server.posts == []
    said = [x for x in t.lines if "waiting for the feature file's row" in x]
    assert len(said) == 1 and "'sentiment'" in said[0], t.lines
    sentiment_table(K + 1).to_csv(path, index=False)  # the row is written
    assert t.step() == "decided"


def test_a_feature_file_that_does_not_exist_is_one_line_from_the_cli(featured, server, capsys):
    from finpod.cli import main

    args = ["paper", str(featured[0]), "--data", str(featured[1]), "--once"]
    try:
        main([*args, "--feature-file", "no-such-file.csv"])
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert code == 1 and len(lines) == 1, lines
    assert "feature file no-such-file.csv does not exist" in lines[0]
    assert server.requests == []


def test_a_synthetic_signal_has_no_live_values_said_in_one_line(tmp_path, server):
    from finpod.data import build_dataset
    from finpod.paper.trader import PaperTrader
    from finpod.pipeline import train_agent

    data = build_dataset("synthetic", tmp_path / "syn", n_tickers=3, n_bars=400, seed=0)
    (tmp_path / "s.toml").write_text(STRATEGY)
    run = train_agent(tmp_path / "s.toml", data, tmp_path / "runs", progress=False, run_id="s1")
    with pytest.raises(FinpodError) as err:
        PaperTrader(run, log=lambda line: None)
    text = str(err.value)
    assert "observes the user feature(s) alpha_signal" in text
    assert "[env] user_features = []" in text and "\n" not in text
