"""User features: a named column of a files dataset reaches the observation at its own bar,
is checked like the built-in features, refused in one line when it cannot be trusted, and
recorded in the manifest; the synthetic signal takes the same path."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data import load_split
from finpod.data.features import FEATURES
from finpod.data.inmemory import bars_to_market
from finpod.data.sources.files import load_files
from finpod.data.user_features import USER_SCALING
from finpod.env import EnvConfig, VecTradingEnv
from finpod.env.tables import ObsLayout
from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download, _nothing_left, _one_line

N_BARS = 120


def _table(seed: int = 0) -> pd.DataFrame:
    """Three tickers of daily bars with an honest column ``sentiment`` (noise, O(1))."""
    df = make_daily(n=N_BARS, seed=seed)
    df["sentiment"] = np.random.default_rng(seed + 1).standard_normal(len(df)) * 0.5
    return df


def _tomorrows_return(df: pd.DataFrame) -> pd.Series:
    """Each row's next-bar log return of its ticker (annualized units, 0 on the last row)."""
    lr = np.log(df["close"]).groupby(df["tic"]).diff()
    return (lr.groupby(df["tic"]).shift(-1) * 16).fillna(0.0)


def test_a_user_column_reaches_the_observation_at_its_own_bar(tmp_path, capsys):
    df = _table()
    code, err = _download(
        tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--feature-column", "sentiment"
    )
    assert code == 0, err
    market = load_split(tmp_path / "ds", "all")
    assert market.feature_names == [*FEATURES, "sentiment"]
    j = market.feature_names.index("sentiment")
    want = df.pivot(index="date", columns="tic", values="sentiment").to_numpy(np.float32)
    np.testing.assert_array_equal(market.features[:, :, j].numpy(), want)
    # ... and the env shows bar t's row at step t, in the ticker's feature block.
    config = EnvConfig()
    env = VecTradingEnv(market, config, num_envs=1, random_start=False)
    layout = ObsLayout.for_env(market, config)
    obs = env.reset()
    for t in range(4):
        block = obs[0, layout.features].view(market.num_stocks, market.num_features)
        np.testing.assert_array_equal(block[:, j].numpy(), want[t])
        obs, *_ = env.step(torch.zeros(1, market.num_stocks))


def test_the_manifest_records_the_user_column_and_its_checks(tmp_path, capsys):
    df = _table()
    code, err = _download(
        tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--feature-column", "sentiment"
    )
    assert code == 0, err
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["features"][-1] == "sentiment"
    assert manifest["feature_scaling"]["sentiment"] == USER_SCALING
    assert manifest["source_options"]["feature_columns"] == ["sentiment"]
    check = manifest["user_features"]["sentiment"]["lookahead_check"]
    assert check["horizons_checked"][0] == 1  # 360 pairs: enough for 1 bar ahead
    assert abs(check["forward_corr"]) < 0.2 and abs(check["backward_corr"]) < 0.2


def test_a_look_ahead_column_is_refused_in_one_line(tmp_path, capsys):
    df = _table().assign(tomorrow=lambda d: _tomorrows_return(d))
    code, err = _download(
        tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--feature-column", "tomorrow"
    )
    _one_line(code, err, "'tomorrow' looks ahead", "next 1 bar(s) is +1.00")
    _nothing_left(tmp_path)


def test_the_same_return_known_at_its_bar_is_accepted(tmp_path, capsys):
    # Today's return (close t-1 → t) is known at t: the look-ahead rule lets it through.
    df = _table()
    df["today"] = (np.log(df["close"]).groupby(df["tic"]).diff() * 16).fillna(0.0)
    code, err = _download(
        tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--feature-column", "today"
    )
    assert code == 0, err


@pytest.mark.parametrize(
    "change, name, words",
    [
        (lambda d: d, "nope", ("no column 'nope'", "other columns: sentiment")),
        (lambda d: d.assign(text="high"), "text", ("'text' holds a value that is not a number",)),
        (
            lambda d: d.assign(holes=d["sentiment"].where(d.index != 7)),
            "holes",
            ("'holes' has no number on 1 real bar(s)", "AAA at 2019-01-11"),
        ),
        (lambda d: d, "close", ("'close' is one of the bar's own columns",)),
        (lambda d: d.assign(big=d["volume"]), "big", ("'big' has 100% of its values beyond",)),
    ],
)
def test_a_column_that_cannot_be_a_feature_is_refused_in_one_line(
    tmp_path, capsys, change, name, words
):
    df = change(_table())
    folder = _csv(tmp_path, df)
    code, err = _download(tmp_path, capsys, "--path", str(folder), "--feature-column", name)
    _one_line(code, err, *words)
    _nothing_left(tmp_path)


def test_an_unnamed_extra_column_is_reported_unused_not_dropped_silently(tmp_path, capsys):
    df = _table()
    code, err = _download(tmp_path, capsys, "--path", str(_csv(tmp_path, df)))
    assert code == 0, err
    report = json.loads((tmp_path / "ds" / "cleaning_report.json").read_text())
    assert report["unused_columns"]["bars.csv"]["sentiment"].startswith("not read")
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert "sentiment" not in manifest["features"]
    assert any("not used: sentiment" in n for n in manifest["notes"])


@pytest.mark.parametrize("t", [20, 60])
def test_a_change_after_t_leaves_the_observation_at_t_unchanged(tmp_path, t):
    df = _table()
    days = sorted(df["date"].unique())
    later = df["date"] > days[t]
    changed = df.copy()
    changed.loc[later, "sentiment"] = 3.0
    for col in ("open", "high", "low", "close"):
        changed.loc[later, col] *= 1.3
    markets = []
    for name, table in (("base", df), ("changed", changed)):
        folder = tmp_path / name
        folder.mkdir()
        table.to_csv(folder / "bars.csv", index=False)
        loaded = load_files(folder, feature_columns=["sentiment"])
        markets.append(bars_to_market(loaded.bars))
    base, moved = markets
    assert torch.equal(base.features[: t + 1], moved.features[: t + 1])
    assert not torch.equal(base.features[t + 1 :], moved.features[t + 1 :])
    config = EnvConfig()
    layout = ObsLayout.for_env(base, config)
    envs = [VecTradingEnv(m, config, num_envs=1, random_start=False) for m in markets]
    obs = [e.reset() for e in envs]
    for _ in range(t):
        obs = [e.step(torch.zeros(1, base.num_stocks))[0] for e in envs]
    assert torch.equal(obs[0][:, layout.features], obs[1][:, layout.features])


def test_the_synthetic_signal_as_a_files_column_gives_the_same_features(tmp_path, capsys):
    from finpod.cli import main

    main(["download", "--source", "synthetic", "--regime", "alpha", "--n-tickers", "4",
          "--out", str(tmp_path / "syn")])  # fmt: skip
    capsys.readouterr()
    syn = load_split(tmp_path / "syn", "all")
    bars = pd.read_parquet(tmp_path / "syn" / "bars.parquet")
    table = bars[["timestamp", "tic", "open", "high", "low", "close", "volume", "alpha_signal"]]
    table = table.assign(timestamp=table["timestamp"].dt.strftime("%Y-%m-%d"))
    folder = _csv(tmp_path, table, float_format="%.9g")
    code, err = _download(
        tmp_path, capsys, "--path", str(folder), "--feature-column", "alpha_signal"
    )
    assert code == 0, err
    files = load_split(tmp_path / "ds", "all")
    assert files.feature_names == syn.feature_names
    assert torch.equal(files.features, syn.features)
    assert torch.equal(files.close, syn.close) and torch.equal(files.open, syn.open)
    for name in ("syn", "ds"):
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["feature_scaling"]["alpha_signal"] == USER_SCALING


def test_the_build_time_perturbation_check_refuses_a_transform_that_reads_later_bars():
    from finpod.data.user_features import check_causal_transform, place_on_bars
    from finpod.errors import FinpodError

    values = np.random.default_rng(0).standard_normal((50, 3))
    real = np.ones((50, 3), dtype=bool)
    check_causal_transform(lambda v: place_on_bars(v, real), values, "x")  # causal: passes
    with pytest.raises(FinpodError, match="'x': its value at bar 25 changes when bars after 25"):
        check_causal_transform(lambda v: np.roll(v, -1, axis=0), values, "x")


def test_the_tearsheet_sentence_names_the_user_columns_and_their_check(tmp_path, capsys):
    from finpod.data.manifest import load_manifest
    from finpod.data.user_features import feature_disclosure

    df = _table()
    code, err = _download(
        tmp_path, capsys, "--path", str(_csv(tmp_path, df)), "--feature-column", "sentiment"
    )
    assert code == 0, err
    text = feature_disclosure(load_manifest(tmp_path / "ds"))
    assert "user column(s) sentiment (look-ahead check: corr" in text
    assert feature_disclosure({"features": list(FEATURES)}) is None


def test_an_end_stamped_intraday_column_lands_on_the_bar_it_closes(tmp_path):
    from finpod.data.calendar import bar_grid, sessions

    grid = bar_grid(sessions("2019-01-02", "2019-01-10"), "5min")
    rng = np.random.default_rng(3)
    rows = []
    for k, tic in enumerate(("AAA", "BBB")):
        close = 50 * (k + 1) * np.exp(np.cumsum(0.001 * rng.standard_normal(len(grid))))
        rows.append(
            pd.DataFrame(
                {
                    # Stamped at each bar's end (09:35 … 16:00), as many vendors do.
                    "timestamp": (grid + pd.Timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M"),
                    "tic": tic,
                    "open": close,
                    "high": close * 1.001,
                    "low": close * 0.999,
                    "close": close,
                    "volume": 100.0,
                    "tag": np.arange(len(grid)) / 1000 + k,
                }
            )
        )
    folder = tmp_path / "in"
    folder.mkdir()
    pd.concat(rows).to_csv(folder / "bars.csv", index=False)
    loaded = load_files(folder, feature_columns=["tag"])
    market = bars_to_market(loaded.bars)
    assert list(market.timestamps) == list(grid)
    tag = market.features[:, :, market.feature_names.index("tag")].numpy()
    want = np.stack([np.arange(len(grid)) / 1000 + k for k in (0, 1)], axis=1)
    np.testing.assert_array_equal(tag, want.astype(np.float32))
