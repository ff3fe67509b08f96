"""The run's candidate record: compact, append-only, torn-write safe, idempotent, finite."""

from __future__ import annotations

import numpy as np
import pytest

from finpod.errors import FinpodError
from finpod.runs.candidates import CANDIDATES_FILE, load_candidates, record_candidate


def test_recorded_candidates_read_back_as_one_matrix(tmp_path):
    rng = np.random.default_rng(0)
    cols = [rng.normal(0, 0.01, 50) for _ in range(3)]
    for i, col in enumerate(cols):
        record_candidate(tmp_path, f"pod-{i}", col, score=float(i), kind="pod")
    got = load_candidates(tmp_path)
    assert got.ids == ["pod-0", "pod-1", "pod-2"]
    assert got.kinds == ["pod"] * 3
    np.testing.assert_array_equal(got.scores, [0.0, 1.0, 2.0])
    assert got.returns.shape == (50, 3) and got.returns.dtype == np.float64
    np.testing.assert_array_equal(got.returns, np.stack(cols, axis=1))
    # compact: 50 float64 plus a small header per record
    assert (tmp_path / CANDIDATES_FILE).stat().st_size < 3 * (50 * 8 + 120)


def test_recording_an_id_again_does_not_double_count(tmp_path):
    r = np.linspace(-0.01, 0.01, 20)
    record_candidate(tmp_path, "ppo-0@100", r, score=1.0, kind="checkpoint")
    record_candidate(tmp_path, "ppo-0@100", r * 2, score=5.0, kind="checkpoint")
    got = load_candidates(tmp_path)
    assert got.ids == ["ppo-0@100"] and got.scores.tolist() == [1.0]
    np.testing.assert_array_equal(got.returns[:, 0], r)


def test_a_torn_last_record_is_ignored_and_cut_off_by_the_next_writer(tmp_path):
    r = np.full(30, 0.001)
    record_candidate(tmp_path, "a", r, score=0.5)
    path = tmp_path / CANDIDATES_FILE
    whole = path.stat().st_size
    record_candidate(tmp_path, "b", r, score=0.7)
    with path.open("r+b") as fh:  # a crash in the middle of writing "b"
        fh.truncate(whole + 25)
    assert load_candidates(tmp_path).ids == ["a"]
    record_candidate(tmp_path, "c", -r, score=0.1)
    got = load_candidates(tmp_path)
    assert got.ids == ["a", "c"]
    np.testing.assert_array_equal(got.returns[:, 1], -r)


def test_a_corrupt_record_is_not_read(tmp_path):
    record_candidate(tmp_path, "a", np.full(10, 0.01), score=1.0)
    path = tmp_path / CANDIDATES_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # flip bits inside the returns: the checksum no longer matches
    path.write_bytes(bytes(data))
    assert len(load_candidates(tmp_path)) == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_returns_never_become_a_candidate(tmp_path, bad):
    r = np.zeros(10)
    r[4] = bad
    with pytest.raises(FinpodError, match="non-finite"):
        record_candidate(tmp_path, "x", r, score=0.0)
    with pytest.raises(FinpodError, match="non-finite"):
        record_candidate(tmp_path, "y", np.zeros(10), score=bad)
    assert len(load_candidates(tmp_path)) == 0


def test_no_record_is_an_empty_set(tmp_path):
    got = load_candidates(tmp_path)
    assert len(got) == 0 and got.returns.shape == (0, 0)


def test_per_bar_sharpes_of_the_candidates(tmp_path):
    a = np.array([0.01, 0.02, 0.03, 0.0])
    record_candidate(tmp_path, "a", a, score=1.0)
    record_candidate(tmp_path, "flat", np.zeros(4), score=0.0)
    s = load_candidates(tmp_path).sharpes()
    assert s[0] == pytest.approx(a.mean() / a.std(ddof=1))
    assert s[1] == 0.0
