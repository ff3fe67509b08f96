"""Every dataset open compares manifest.json with the Parquet footers (row counts, row
group time statistics): a manifest that lies is one line in ``finpod info``, ``finpod
train`` and ``finpod walkforward``, not only under ``info --verify``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import one_error_line
from tiny_strategy import tiny_agent

from finpod.errors import FinpodError

#: The tiny agent in the default action mode, never scored while it trains.
STRATEGY = tiny_agent(env={"action_mode": None}, train={"eval_every": None})


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """A 4-ticker, 240-bar synthetic dataset, two row groups of 128 bars."""
    from finpod.data import build_dataset, store

    old = store.ROWS_PER_GROUP_BARS
    store.ROWS_PER_GROUP_BARS = 128
    try:
        out = tmp_path_factory.mktemp("manifest-files") / "ds"
        return build_dataset("synthetic", out, n_tickers=4, n_bars=240, seed=0)
    finally:
        store.ROWS_PER_GROUP_BARS = old


def _lying(honest: Path, tmp_path: Path, edit) -> Path:
    data = tmp_path / "lying"
    shutil.copytree(honest, data)
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return data


def _fewer_bars(manifest: dict) -> None:
    manifest["bars"] = 200


def test_an_honest_manifest_opens(honest):
    import pyarrow.parquet as pq

    from finpod.data import Manifest, load_manifest

    assert pq.read_metadata(honest / "bars.parquet").num_row_groups == 2
    assert Manifest.load(honest).bars == 240
    assert load_manifest(honest)["bars"] == 240


def test_a_lying_bar_count_is_one_line_in_info(honest, tmp_path, finpod_cli):
    data = _lying(honest, tmp_path, _fewer_bars)
    one_error_line(finpod_cli("info", str(data)), "200 bars", "holds 240", alone=False)


def test_a_lying_bar_count_is_one_line_when_training_opens_it(honest, tmp_path, finpod_cli):
    data = _lying(honest, tmp_path, _fewer_bars)
    strategy = tmp_path / "s.toml"
    strategy.write_text(STRATEGY, encoding="utf-8")
    runs = tmp_path / "runs"
    out = finpod_cli("train", "--strategy", str(strategy), "--data", str(data), "--runs", str(runs))
    one_error_line(out, "200 bars", alone=False)
    assert not runs.exists() or not any(runs.iterdir())


def test_a_lying_bar_count_is_one_line_when_walkforward_opens_it(honest, tmp_path, finpod_cli):
    data = _lying(honest, tmp_path, _fewer_bars)
    strategy = tmp_path / "s.toml"
    strategy.write_text(STRATEGY, encoding="utf-8")
    out = finpod_cli(
        "walkforward", "--data", str(data), "--strategy", str(strategy),
        "--out", str(tmp_path / "wf"), "--train", "100", "--validation", "30",
        "--backtest", "30", "--seeds", "1", "--steps", "128", "--folds", "1",
    )  # fmt: skip
    one_error_line(out, "200 bars", alone=False)


def test_a_shifted_split_time_is_refused(honest, tmp_path):
    from finpod.data import Manifest

    def shift(manifest: dict) -> None:
        # The validation split (bars 173-203) lies in the second row group (bars 128-239);
        # the dataset's first bar is in the first.
        manifest["splits"]["validation"]["start"] = manifest["start"]

    with pytest.raises(FinpodError, match="validation split's first bar"):
        Manifest.load(_lying(honest, tmp_path, shift))


def test_a_split_whose_bars_do_not_match_its_rows_is_refused(honest, tmp_path):
    from finpod.data import load_split

    def grow(manifest: dict) -> None:
        manifest["splits"]["train"]["stop_index"] += 3

    with pytest.raises(FinpodError, match="train split says"):
        load_split(_lying(honest, tmp_path, grow), "train")
