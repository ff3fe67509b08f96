"""Input that used to change the dataset without a word: a ticker named like a missing value,
a volume written ``740K``, far rows beyond the stray limits, minute files labelled two ways
and a date typed wrong. Each reaches the dataset as written, or is one line naming it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from finpod.data.sources.files import load_files
from finpod.errors import FinpodError
from tests.data.conftest import make_daily

MINUTES = Path(__file__).resolve().parents[2] / "data" / "sample" / "minute_samples"


def _long(tmp_path: Path, df: pd.DataFrame, name: str = "bars.csv") -> Path:
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


# ----------------------------------------------------------- tickers named like "missing"
@pytest.mark.parametrize("name", ["NA", "NAN", "NULL", "N/A", "NONE", "nan"])
def test_a_ticker_named_like_a_missing_value_stays_a_ticker(tmp_path, name):
    df = make_daily(("AAA", name), n=40)
    src = load_files(_long(tmp_path, df))
    assert src.bars.tickers == sorted(["AAA", name.upper()])
    assert "missing_ticker" not in src.report["dropped"]
    assert int(src.bars.tradable.sum()) == 80


def test_a_ticker_column_renamed_by_the_user_keeps_a_ticker_named_na(tmp_path):
    df = make_daily(("AAA", "NA"), n=40).rename(columns={"tic": "Security"})
    src = load_files(_long(tmp_path, df), columns={"Security": "tic"})
    assert src.bars.tickers == ["AAA", "NA"]


def test_an_empty_ticker_cell_is_still_no_ticker(tmp_path):
    df = make_daily(("AAA", "BBB"), n=40)
    df.loc[3, "tic"] = None
    src = load_files(_long(tmp_path, df))
    assert src.report["dropped"]["missing_ticker"] == 1


# --------------------------------------------------------------------- volumes as text
def test_a_volume_written_with_a_suffix_is_refused_naming_its_row(tmp_path):
    df = make_daily(("AAA", "BBB"), n=40)
    df["volume"] = df["volume"].astype(object)
    df.loc[3, "volume"] = "740K"
    with pytest.raises(FinpodError) as err:
        load_files(_long(tmp_path, df))
    # Row 5 as a spreadsheet shows it: the header is row 1, df row 3 is row 5.
    assert "row 5 of bars.csv: volume '740K' is not a number" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_empty_volume_is_still_a_missing_volume_of_zero(tmp_path):
    df = make_daily(("AAA", "BBB"), n=40)
    df.loc[3, "volume"] = None
    src = load_files(_long(tmp_path, df))
    assert src.report["repaired"]["missing_volume_set_to_0"] == 1


# ------------------------------------------------- far rows beyond the stray-row limits
def _relisted(n: int = 200) -> pd.DataFrame:
    """AAA halts for 90 days and trades its last 8 sessions again: too many rows for a
    stray, too few to keep its coverage."""
    df = make_daily(("AAA", "BBB"), n=n)
    days = pd.DatetimeIndex(sorted(df["date"].unique()))
    date = pd.to_datetime(df["date"])
    halted = (df["tic"] == "AAA") & (date > days[-9] - pd.Timedelta(days=90))
    return df[~(halted & (date <= days[-9]))]


def test_far_rows_beyond_the_stray_limits_are_named_not_a_silently_dropped_ticker(tmp_path):
    with pytest.raises(FinpodError) as err:
        load_files(_long(tmp_path, _relisted()))
    line = str(err.value)
    assert "ticker AAA would vanish: its bars lie in two pieces 94 days apart" in line
    assert "8 bars 2019-10-07 → 2019-10-16" in line and "--drop-bad-tickers" in line


def test_far_rows_beyond_the_stray_limits_are_dropped_with_their_cause_on_request(tmp_path):
    src = load_files(_long(tmp_path, _relisted()), drop_bad_tickers=True)
    assert src.bars.tickers == ["BBB"]
    assert "bars in two pieces 94 days apart" in src.report["tickers_dropped"]["AAA"]


# ------------------------------------------------------------------- minute bar labels
def _minute_files(folder: Path, second_label: str) -> Path:
    """AAPL's sample minutes (labelled at bar end) in two files; the second relabelled at
    ``second_label``."""
    raw = pd.read_csv(MINUTES / "AAPL_1min.csv")
    stamp = pd.to_datetime(raw["datetime"])
    cut = stamp.dt.date <= sorted(stamp.dt.date.unique())[2]
    later = raw[~cut].copy()
    if second_label == "start":
        moved = pd.to_datetime(later["datetime"]) - pd.Timedelta(minutes=1)
        later["datetime"] = moved.dt.strftime("%Y-%m-%d %H:%M:%S")
    folder.mkdir()
    raw[cut].to_csv(folder / "AAPL_1min_a.csv", index=False)
    later.to_csv(folder / "AAPL_1min_b.csv", index=False)
    return folder


def test_minute_files_of_one_ticker_labelled_two_ways_are_refused(tmp_path):
    with pytest.raises(FinpodError) as err:
        load_files(_minute_files(tmp_path / "m", "start"))
    line = str(err.value)
    assert "the files of AAPL label their bars differently" in line
    assert "AAPL_1min_b.csv (AAPL) at the start" in line
    assert "AAPL_1min_a.csv (AAPL) at the end" in line


def test_minute_files_of_one_ticker_labelled_one_way_are_read_whole(tmp_path):
    src = load_files(_minute_files(tmp_path / "m", "end"))
    whole = load_files(MINUTES, tickers=["AAPL"])
    assert src.bars.timestamps.equals(whole.bars.timestamps)
    assert (src.bars.close == whole.bars.close).all()


def test_a_minute_file_that_contradicts_the_declared_bar_label_is_refused(tmp_path):
    with pytest.raises(FinpodError) as err:
        load_files(MINUTES, tickers=["AAPL"], bar_label="start")
    line = str(err.value)
    assert "--bar-label start, but the stamps of AAPL_1min.csv (AAPL) label bars at the end" in line


# ------------------------------------------------------------------------- typed dates
@pytest.mark.parametrize("typed", ["2019-13-28", "2019-28-03", "20191328"])
def test_a_date_with_an_impossible_month_is_refused_naming_its_row(tmp_path, typed):
    df = make_daily(("AAA", "BBB"), n=60)
    df["date"] = df["date"].astype(object)
    df.loc[59, "date"] = typed  # AAA's last row
    with pytest.raises(FinpodError) as err:
        load_files(_long(tmp_path, df))
    assert f"row 61 of bars.csv: timestamp {typed!r} is not a real date" in str(err.value)


def test_a_junk_line_that_is_no_date_is_still_dropped_and_counted(tmp_path):
    df = make_daily(("AAA", "BBB"), n=60)
    df.loc[59, "date"] = "Total"
    src = load_files(_long(tmp_path, df))
    assert src.report["dropped"]["unreadable_timestamp"] == 1


@pytest.mark.parametrize(
    ("row", "typed", "side"), [(59, "2019-04-26", "last"), (0, "2018-12-03", "first")]
)
def test_a_month_typed_wrong_at_an_end_of_the_range_is_refused_naming_the_row(
    tmp_path, row, typed, side
):
    df = make_daily(("AAA", "BBB", "CCC"), n=60)  # 2019-01-02 → 2019-03-28
    df.loc[row, "date"] = typed  # AAA's last (first) session, a month off
    with pytest.raises(FinpodError) as err:
        load_files(_long(tmp_path, df))
    line = str(err.value)
    assert f"the data's {side} row (AAA, row {row + 2} of bars.csv: {typed})" in line
    assert "a mistyped month?" in line


def test_a_ticker_a_week_past_the_others_is_kept_as_the_range_end(tmp_path):
    df = make_daily(("AAA", "BBB", "CCC"), n=60)  # 2019-01-02 → 2019-03-28
    df.loc[59, "date"] = "2019-04-04"  # 7 days after the others' last bar
    src = load_files(_long(tmp_path, df))
    assert str(src.bars.timestamps[-1].date()) == "2019-04-04"


def test_a_ticker_eight_days_past_the_others_is_refused(tmp_path):
    df = make_daily(("AAA", "BBB", "CCC"), n=60)
    df.loc[59, "date"] = "2019-04-05"  # 8 days after the others' last bar
    with pytest.raises(FinpodError, match="lies 8 days after every bar of the other tickers"):
        load_files(_long(tmp_path, df))
