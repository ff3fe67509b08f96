"""Fuzzing the benchmark and reference weights readers with the ticker rule's oracle.

Hypothesis writes benchmark files (dates given twice, with the same or another level,
unreadable dates and levels, shuffled rows, one or two symbols) and reference weights
files (tickers given twice, unsorted or repeated dates, weights that are not numbers, that
are negative or that sum past 1). For every file:

- either the reader fails with one :class:`FinpodError` line;
- or what it read is what the file says: each benchmark level at its own session (a
  session given two different levels is an error, never a silent pick), no level invented;
  each reference column under the ticker the file names (never renamed), each weight at
  its own date.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finpod.data.benchmark import level_times, read_benchmark_file
from finpod.data.calendar import TZ, sessions
from finpod.env.reference import load_reference_file
from finpod.errors import FinpodError

#: Examples per reader (deterministic); each is a file read, no dataset build.
READER_EXAMPLES = 60
SETTINGS = settings(
    max_examples=READER_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
BAD_NUMBERS = [np.nan, "n/a", -1.0, 0.0, "", "1,5"]


def _one_line(err: FinpodError) -> None:
    assert "\n" not in str(err), str(err)


@st.composite
def benchmark_files(draw) -> dict:
    """A benchmark table and the truth: each row's session date (None: unreadable) and
    its level as a correct reader reads it (NaN: none)."""
    start = pd.Timestamp(draw(st.dates(dt.date(2018, 1, 2), dt.date(2020, 6, 30))))
    days = list(sessions(start, start + pd.Timedelta(days=120))[: draw(st.integers(1, 60))])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    levels = list(1000 * np.exp(np.cumsum(0.01 * rng.standard_normal(len(days)))))
    dates: list[object] = list(days)
    cells: list[object] = list(levels)
    for _ in range(draw(st.integers(0, 4))):  # a date given twice: same or another level
        k = draw(st.integers(0, len(dates) - 1))
        again = levels[k] if k < len(levels) and draw(st.booleans()) else levels[k] * 1.5
        dates.append(dates[k])
        cells.append(again)
        levels.append(again)
    for _ in range(draw(st.integers(0, 3))):  # an unreadable level
        k = draw(st.integers(0, len(cells) - 1))
        cells[k] = draw(st.sampled_from(BAD_NUMBERS))
        levels[k] = pd.to_numeric(pd.Series([cells[k]]), errors="coerce")[0]
    if draw(st.integers(0, 4)) == 4:  # an unreadable date
        dates[draw(st.integers(0, len(dates) - 1))] = "someday"
    frame = pd.DataFrame(
        {
            draw(st.sampled_from(["date", "Date", "timestamp"])): [
                d.strftime("%Y-%m-%d") if isinstance(d, pd.Timestamp) else d for d in dates
            ],
            draw(st.sampled_from(["close", "Close", "level", "value"])): cells,
        }
    )
    truth = pd.DataFrame(
        {"date": [d if isinstance(d, pd.Timestamp) else None for d in dates], "level": levels}
    )
    if draw(st.integers(0, 5)) == 5:
        frame["tic"] = draw(
            st.sampled_from([["^NDX"] * len(frame), ["^NDX", "^SPX"] * len(frame)])
        )[: len(frame)]
    order = draw(st.permutations(range(len(frame)))) if draw(st.booleans()) else range(len(frame))
    return {"frame": frame.iloc[list(order)], "truth": truth.iloc[list(order)]}


@SETTINGS
@given(case=benchmark_files())
def test_a_benchmark_file_is_one_line_or_every_level_at_its_own_session(case):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ndx.csv"
        case["frame"].to_csv(path, index=False)
        try:
            series, _ = read_benchmark_file(path)
            known, values, _ = level_times(series, where=str(path))
        except FinpodError as err:
            _one_line(err)
            return
    got = pd.Series(
        values,
        index=pd.DatetimeIndex(pd.to_datetime(known, utc=True)).tz_convert(TZ).normalize(),
    )
    truth = case["truth"]
    ok = truth["date"].notna() & np.isfinite(truth["level"]) & (truth["level"] > 0)
    given_levels: dict[pd.Timestamp, set[float]] = {}
    for day, level in zip(truth["date"][ok], truth["level"][ok], strict=True):
        given_levels.setdefault(pd.Timestamp(day).tz_localize(TZ), set()).add(float(level))
    assert got.index.is_unique
    assert set(got.index) == set(given_levels), "a level invented or lost"
    for day, level in got.items():
        assert given_levels[day] == {float(level)}, (day, level, given_levels[day])


REF_TICKERS = ["AAA", "BBB", "CCC", "DDD", "aaa", "AAA"]


@st.composite
def reference_files(draw) -> dict:
    """A reference weights table (``date`` + one column per ticker) as text cells."""
    tickers = draw(st.lists(st.sampled_from(REF_TICKERS), min_size=1, max_size=4))
    start = pd.Timestamp(draw(st.dates(dt.date(2018, 1, 2), dt.date(2020, 6, 30))))
    n = draw(st.integers(1, 12))
    days = list(sessions(start, start + pd.Timedelta(days=60))[:n])
    if draw(st.integers(0, 4)) == 4:
        days.append(days[draw(st.integers(0, len(days) - 1))])  # a date twice
    if draw(st.booleans()):
        days = draw(st.permutations(days))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([1.0, 1.0, 0.5, 1.5]))
    weights = rng.dirichlet(np.ones(len(tickers)), size=len(days)) * scale
    cells = weights.astype(object)
    for _ in range(draw(st.integers(0, 2))):
        cells[draw(st.integers(0, len(days) - 1)), draw(st.integers(0, len(tickers) - 1))] = draw(
            st.sampled_from(BAD_NUMBERS)
        )
    lines = ["date," + ",".join(tickers)]
    for day, row in zip(days, cells, strict=True):
        lines.append(day.strftime("%Y-%m-%d") + "," + ",".join(_csv_cell(c) for c in row))
    return {"text": "\n".join(lines) + "\n", "tickers": tickers, "days": days, "cells": cells}


def _csv_cell(value: object) -> str:
    if isinstance(value, float) and np.isnan(value):
        return ""
    text = repr(value) if isinstance(value, float) else str(value)
    return f'"{text}"' if "," in text else text


@SETTINGS
@given(case=reference_files())
def test_a_reference_file_is_one_line_or_every_weight_under_its_own_ticker(case):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "weights.csv"
        path.write_text(case["text"], encoding="utf-8")
        try:
            frame = load_reference_file(str(path))
        except FinpodError as err:
            _one_line(err)
            return
    assert list(frame.columns) == case["tickers"], "a ticker column renamed or lost"
    days = pd.DatetimeIndex(case["days"]).tz_localize(TZ)
    assert list(frame.index) == list(days)
    expected = pd.DataFrame(list(case["cells"])).apply(pd.to_numeric, errors="coerce")
    assert np.allclose(frame.to_numpy(np.float64), expected.to_numpy(np.float64), rtol=1e-12)
