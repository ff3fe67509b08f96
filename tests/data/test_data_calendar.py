"""Bars per year counted on the exchange calendar (half days included)."""

from __future__ import annotations

import pytest

from finpod.data import build_dataset, load_manifest, load_split
from finpod.data.calendar import bar_grid, bars_per_year, get_calendar, sessions
from finpod.data.market import periods_per_year
from finpod.data.sources import SAMPLE_DIR

# 2019 on XNYS: 252 sessions, 3 of them half days closing at 13:00 (07-03, 11-29, 12-24).
FULL, HALF = 249, 3


def test_2019_has_249_full_sessions_and_3_half_days():
    sched = get_calendar("XNYS").schedule.loc["2019"]
    hours = (sched["close"] - sched["open"]).dt.total_seconds() / 3600
    assert (hours == 6.5).sum() == FULL and (hours == 3.5).sum() == HALF


@pytest.mark.parametrize(
    "bar,per_full,per_half",
    [("1min", 390, 210), ("5min", 78, 42), ("60min", 7, 4), ("1h", 7, 4), ("1d", 1, 1)],
)
def test_bars_per_year_against_the_calendar(bar, per_full, per_half):
    expected = FULL * per_full + HALF * per_half
    assert bars_per_year(bar, start="2019-03-01", end="2019-03-08") == expected
    assert len(bar_grid(sessions("2019-01-01", "2019-12-31"), bar)) == expected


def test_hourly_bars_are_seven_a_full_session():
    grid = bar_grid(sessions("2019-02-11", "2019-02-11"), "60min")
    assert list(grid.strftime("%H:%M")) == [f"{h:02d}:30" for h in range(9, 16)]
    # 390 / 60 = 6.5 a session undercounts the bars by 7 %, the Sharpe by ~3.4 %.
    ratio = (
        bars_per_year("60min", start="2019-01-01", end="2019-12-31") / periods_per_year("1h")
    ) ** 0.5
    assert ratio == pytest.approx(1.035, abs=0.002)


def test_years_are_averaged_over_whole_calendar_years():
    assert bars_per_year("1d", start="2010-01-04", end="2019-12-31") == pytest.approx(251.6)


def test_dataset_records_and_loads_bars_per_year(tmp_path):
    out = build_dataset("files", tmp_path / "m", path=SAMPLE_DIR / "minute_samples")
    man = load_manifest(out)
    assert man["bars_per_year"] == FULL * 390 + HALF * 210
    assert "half days included" in man["bars_per_year_rule"]
    m = load_split(out, "validation")
    assert m.bars_per_year == man["bars_per_year"] and m.annualization == man["bars_per_year"]
