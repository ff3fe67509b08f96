"""The typed dataset manifest: exact round trip, readable errors, typed fields."""

from __future__ import annotations

import json

import pytest

from finpod.data import Manifest, load_manifest, load_split
from finpod.errors import FinpodError


def _copy(sample_dir, tmp_path, edit=None):
    """A dataset directory holding the sample's manifest, changed by ``edit(dict)``."""
    raw = json.loads((sample_dir / "manifest.json").read_text())
    if edit is not None:
        edit(raw)
    (tmp_path / "manifest.json").write_text(json.dumps(raw))
    return tmp_path


def test_the_sample_manifest_round_trips_exactly(sample_dir):
    raw = json.loads((sample_dir / "manifest.json").read_text())
    man = Manifest.load(sample_dir)
    assert man.to_dict() == raw
    assert Manifest.from_dict(man.to_dict()) == man
    # Typed attribute access agrees with the raw dict the notebooks index.
    assert man.splits["backtest"].start == raw["splits"]["backtest"]["start"]
    assert man.splits["train"].stop_index == raw["splits"]["train"]["stop_index"]
    assert man.tickers == tuple(raw["tickers"]) and man.hash == raw["hash"]
    assert man.missing == frozenset() and man.extra == {}
    assert load_manifest(sample_dir) == raw


def test_older_and_newer_manifests_keep_their_keys(sample_dir, tmp_path):
    def edit(raw):
        for key in ("bars_per_year", "bars_per_year_rule", "masks"):  # format 1
            del raw[key]
        raw["universe"] = "3 tickers"
        raw["from_a_newer_finpod"] = {"x": 1}
        raw["splits"]["train"]["note"] = "newer"

    raw = json.loads((_copy(sample_dir, tmp_path, edit) / "manifest.json").read_text())
    man = Manifest.load(tmp_path)
    assert man.to_dict() == raw
    assert man.bars_per_year is None and "bars_per_year" in man.missing
    assert man.extra == {"from_a_newer_finpod": {"x": 1}}
    assert man.splits["train"].extra == {"note": "newer"}


@pytest.mark.parametrize("text", ["{", "[1, 2]", '"a string"'])
def test_a_malformed_manifest_is_a_one_line_finpod_error(sample_dir, tmp_path, text):
    (tmp_path / "manifest.json").write_text(text)
    for load in (Manifest.load, load_manifest, lambda d: load_split(d, "train")):
        with pytest.raises(FinpodError) as err:
            load(tmp_path)
        assert "manifest.json" in str(err.value) and "\n" not in str(err.value)


def test_a_manifest_without_a_required_key_names_it(sample_dir, tmp_path):
    _copy(sample_dir, tmp_path, lambda raw: raw.pop("splits"))
    with pytest.raises(FinpodError, match="has no 'splits' entry"):
        Manifest.load(tmp_path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("bars", "2516"),
        ("bars", True),
        ("hash", 12),
        ("tickers", "AAPL"),
        ("tickers", ["AAPL", 3]),
        ("bars_per_year", "252"),
        ("splits", {"train": {"start": "x"}}),
        ("splits", {"train": [0, 10]}),
    ],
)
def test_a_wrong_typed_field_is_refused(sample_dir, tmp_path, key, value):
    _copy(sample_dir, tmp_path, lambda raw: raw.__setitem__(key, value))
    with pytest.raises(FinpodError, match=key) as err:
        Manifest.load(tmp_path)
    assert "\n" not in str(err.value)
    with pytest.raises(FinpodError):
        load_manifest(tmp_path)


def test_a_wrong_typed_split_index_is_refused(sample_dir, tmp_path):
    _copy(sample_dir, tmp_path, lambda raw: raw["splits"]["train"].__setitem__("stop_index", 1.5))
    with pytest.raises(FinpodError, match=r"splits\.train\.stop_index"):
        Manifest.load(tmp_path)


@pytest.mark.parametrize(
    "value",
    [[{"start": "2020-01-02", "stop_index": 10}], "train", 3, None],
    ids=["list", "text", "number", "null"],
)
def test_splits_that_are_not_a_table_are_one_line_naming_splits(sample_dir, tmp_path, value):
    _copy(sample_dir, tmp_path, lambda raw: raw.__setitem__("splits", value))
    kind = type(value).__name__
    for load in (Manifest.load, load_manifest, lambda d: load_split(d, "train")):
        with pytest.raises(FinpodError) as err:
            load(tmp_path)
        msg = str(err.value)
        assert f"the manifest's 'splits' is {kind}" in msg and "expected a table" in msg, msg
        assert "\n" not in msg and "manifest.json" in msg
