"""User feature columns beside bars from elsewhere: an Alpaca dataset (bars from the
loopback replay server of :mod:`tests.data.test_alpaca`, the column from a feature file)
and ``from_frame`` take them through the same user-feature path as the files source: same
features, same checks, the same one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_runner import one_error_line

from finpod.data import build_dataset, load_split
from finpod.data.features import FEATURES
from finpod.data.inmemory import from_frame
from finpod.errors import FinpodError

from . import test_alpaca as replay
from .conftest import make_daily

alpaca_env, finpod_cli = replay.alpaca_env, replay.finpod_cli
RENAME = {"t": "timestamp", "o": "open", "h": "high", "l": "low", "c": "close", "v": "volume"}


def _signal(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).round(6) * 0.5


def _feature_file(tmp_path) -> tuple[object, dict[str, pd.DataFrame]]:
    """The replayed bars with a ``sentiment`` column per (minute, ticker), and the file of
    ``timestamp, tic, sentiment`` alone (Alpaca's stamps: the bar's start, UTC)."""
    with_col = {
        sym: df.assign(sentiment=_signal(len(df), k))
        for k, (sym, df) in enumerate(replay.BARS.items())
    }
    rows = [
        df[["t", "sentiment"]].rename(columns={"t": "timestamp"}).assign(tic=sym)
        for sym, df in with_col.items()
    ]
    path = tmp_path / "signals.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path, with_col


def test_an_alpaca_dataset_takes_a_feature_file_column_like_the_files_source(alpaca_env, tmp_path):
    alpaca_env()
    path, with_col = _feature_file(tmp_path)
    a = build_dataset(
        "alpaca",
        tmp_path / "alpaca",
        tickers=",".join(replay.SYMBOLS),
        start=replay.START,
        end=replay.END,
        bar="1min",
        cache_dir=tmp_path / "cache",
        feature_file=path,
        feature_columns=["sentiment"],
    )
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    for sym, df in with_col.items():
        cols = ["timestamp", "open", "high", "low", "close", "volume", "sentiment"]
        df.rename(columns=RENAME)[cols].to_csv(vendor / f"{sym}.csv", index=False)
    f = build_dataset(
        "files",
        tmp_path / "files",
        path=vendor,
        bar="1min",
        bar_label="start",
        start=replay.START,
        end=replay.END,
        feature_columns=["sentiment"],
    )
    ma, mf = load_split(a, "all"), load_split(f, "all")
    assert ma.feature_names == mf.feature_names == [*FEATURES, "sentiment"]
    np.testing.assert_array_equal(ma.features.numpy(), mf.features.numpy())
    man = json.loads((a / "manifest.json").read_text())
    assert man["user_features"] == json.loads((f / "manifest.json").read_text())["user_features"]
    assert man["source_options"]["feature_columns"] == ["sentiment"]
    assert man["source_options"]["feature_file"] == str(path)


def test_an_alpaca_feature_column_without_its_file_is_one_line(alpaca_env, finpod_cli, tmp_path):
    srv = alpaca_env()
    env = {"APCA_API_KEY_ID": "k", "APCA_API_SECRET_KEY": "s", "FINPOD_ALPACA_DATA_URL": srv.url}
    args = ["download", "--source", "alpaca", "--tickers", "AAA", "--start", replay.START]
    out = finpod_cli(*args, "--feature-column", "sentiment", "--out", str(tmp_path / "d"), env=env)
    one_error_line(out, "alpaca bars carry no column 'sentiment'", "--feature-file")
    assert not srv.requests  # refused before any request


def _daily_with(column: str, values: np.ndarray) -> pd.DataFrame:
    df = make_daily(n=120)
    df[column] = values
    return df


def test_from_frame_places_a_user_column_at_its_own_bar():
    df = _daily_with("sentiment", _signal(360, 3))
    market = from_frame(df, "1d", feature_columns=["sentiment"])
    assert market.feature_names == [*FEATURES, "sentiment"]
    want = df.pivot(index="date", columns="tic", values="sentiment").to_numpy(np.float32)
    np.testing.assert_array_equal(market.features[:, :, -1].numpy(), want)


def test_from_frame_refuses_a_look_ahead_column_in_one_line():
    df = make_daily(n=120)
    lr = np.log(df["close"]).groupby(df["tic"]).diff()
    df["tomorrow"] = (lr.groupby(df["tic"]).shift(-1) * 16).fillna(0.0)
    with pytest.raises(FinpodError, match="'tomorrow' looks ahead") as err:
        from_frame(df, "1d", feature_columns=["tomorrow"])
    assert "\n" not in str(err.value)


def test_a_feature_file_row_after_the_last_bar_is_never_read(tmp_path):
    df = make_daily(n=120)
    table = df[["date", "tic"]].assign(sentiment=_signal(len(df), 4))
    later = table[table["date"] == table["date"].max()].assign(date="2030-01-02", sentiment=9.0)
    path = tmp_path / "f.csv"
    table.to_csv(path, index=False)
    base = from_frame(df, "1d", feature_columns=["sentiment"], feature_file=path)
    pd.concat([table, later]).to_csv(path, index=False)
    again = from_frame(df, "1d", feature_columns=["sentiment"], feature_file=path)
    np.testing.assert_array_equal(base.features.numpy(), again.features.numpy())
    missing = tmp_path / "none.csv"
    with pytest.raises(FinpodError, match="feature file .* does not exist"):
        from_frame(df, "1d", feature_columns=["sentiment"], feature_file=missing)
