"""Dates on the command line are read one way: ISO ``YYYY-MM-DD`` (or ``--date-format``,
strictly); anything else is one error line, never a guess and never a traceback."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pandas as pd
import pytest
from cli_runner import one_error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finpod.cli.data_cmd import _one_date, _split_dates
from finpod.data.dataset import split_gaps
from finpod.data.splits import plan_splits
from finpod.dates import check_date_format, iso_text, parse_date, parse_date_range
from finpod.errors import FinpodError

#: Every date option of ``finpod download``: one value (``--start``/``--end``) or a range.
ONE_DATE = ("--start", "--end")
DATE_RANGES = ("--train", "--validation", "--backtest")
SPLITS = ["--train", "2010-01-04:2016-12-30", "--validation", "2017-01-10:2018-12-31"]


# ------------------------------------------------------------------------- the parser
@pytest.mark.parametrize(
    "text,expected",
    [
        ("2019-01-09", datetime(2019, 1, 9)),
        ("2019-01-09 09:30", datetime(2019, 1, 9, 9, 30)),
        ("2019-01-09T16:00:05", datetime(2019, 1, 9, 16, 0, 5)),
        (" 2019-12-31 ", datetime(2019, 12, 31)),
        ("2020-02-29", datetime(2020, 2, 29)),
    ],
)
def test_an_iso_date_is_read_as_written(text, expected):
    assert parse_date(text, "--start") == expected
    assert parse_date(iso_text(expected), "--start") == expected


@pytest.mark.parametrize(
    "text,readings,pattern",
    [
        ("09/01/2019", ["2019-01-09", "2019-09-01"], "'%d/%m/%Y' or '%m/%d/%Y'"),
        ("1/9/2019", ["2019-09-01", "2019-01-09"], "'%d/%m/%Y' or '%m/%d/%Y'"),
        ("2019/09/01", ["2019-09-01"], "'%Y/%m/%d'"),
        ("01-09-2019", ["2019-09-01", "2019-01-09"], "'%d-%m-%Y' or '%m-%d-%Y'"),
        ("31/12/2019", ["2019-12-31"], "'%d/%m/%Y'"),
        ("20190901", ["2019-09-01"], "'%Y%m%d'"),
    ],
)
def test_a_date_that_is_not_iso_is_refused_naming_its_readings_and_date_format(
    text, readings, pattern
):
    with pytest.raises(FinpodError) as err:
        parse_date(text, "--backtest")
    line = str(err.value)
    assert line.startswith(f"--backtest: {text!r} is not an ISO date (YYYY-MM-DD)"), line
    assert "write " + " or ".join(readings) in line and f"--date-format {pattern}" in line
    assert "\n" not in line


@pytest.mark.parametrize(
    "text,why",
    [
        ("2015-13-01", "month 13 does not exist"),
        ("2019-02-30", "February 2019 has 28 days"),
        ("2019-01-01 24:00", "hour 24 does not exist"),
        ("0001-01-01", "years 1678 to 2261"),
        ("2019-1-1x", "is not an ISO date"),
        ("", "is empty"),
    ],
)
def test_an_impossible_date_is_one_line(text, why):
    with pytest.raises(FinpodError, match=re.escape(why)):
        parse_date(text, "--start")


def test_date_format_reads_every_date_with_its_pattern_strictly():
    assert parse_date("09/01/2019", "--start", "%d/%m/%Y") == datetime(2019, 1, 9)
    assert parse_date("09/01/2019", "--start", "%m/%d/%Y") == datetime(2019, 9, 1)
    # A pattern with a time of day also reads a date alone written its way.
    assert parse_date("09/01/2019", "--train", "%d/%m/%Y %H:%M") == datetime(2019, 1, 9)
    assert parse_date("09/01/2019 10:30", "--end", "%d/%m/%Y %H:%M") == datetime(2019, 1, 9, 10, 30)
    with pytest.raises(FinpodError, match=r"'2019-01-09' does not match --date-format"):
        parse_date("2019-01-09", "--start", "%d/%m/%Y")  # strictly: ISO is not guessed either
    with pytest.raises(FinpodError, match="cannot read a date back"):
        check_date_format("%H:%M")  # no year, month or day: every date would be 1900-01-01
    with pytest.raises(FinpodError, match="cannot read a date back"):
        check_date_format("%Y-%Q")


def test_a_range_is_first_to_last_whole_dates():
    assert parse_date_range("2019-01-01:2019-12-31", "--backtest") == (
        datetime(2019, 1, 1),
        datetime(2019, 12, 31),
    )
    assert parse_date_range(":2019-12-31", "--backtest") == (None, datetime(2019, 12, 31))
    with pytest.raises(FinpodError, match="FIRST 2019-12-31 is after LAST 2019-01-01"):
        parse_date_range("2019-12-31:2019-01-01", "--backtest")
    with pytest.raises(FinpodError, match="without a time of day"):
        parse_date_range("2019-01-01 09:30:2019-02-01", "--train")
    with pytest.raises(FinpodError, match="has a time of day"):
        parse_date_range("20190101T0930:20190201T0000", "--train", "%Y%m%dT%H%M")


# ------------------------------------------------------------------------- the CLI
def test_the_reported_command_is_refused_naming_both_readings(finpod_cli, tmp_path):
    out = finpod_cli(
        "download", "--source", "sample", "--out", str(tmp_path / "ds"), *SPLITS,
        "--backtest", "09/01/2019:31/12/2019",
    )  # fmt: skip
    one_error_line(out, "--backtest", "'09/01/2019'", "2019-01-09", "2019-09-01", "--date-format")
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("text", ["2015-13-01", "2019-02-30", "2019-1-1x", "2019/01/02"])
def test_a_bad_start_is_one_red_line_not_a_traceback(finpod_cli, tmp_path, text):
    out = finpod_cli("download", "--source", "sample", "--start", text, "--out", str(tmp_path))
    one_error_line(out, "--start", repr(text))


@pytest.mark.parametrize(
    "args,words",
    [
        (["--backtest", "2019-12-31:2019-01-09"], ["FIRST 2019-12-31 is after LAST 2019-01-09"]),
        (["--backtest", "2016-06-01:2019-12-31"], ["validation and backtest splits overlap"]),
        (["--backtest", "2008-01-01:2009-12-31"], ["--backtest", "comes before --validation"]),
        (["--backtest", "2019-01-09:2019-12-31", "--start", "2019-06-01", "--end", "2019-01-01"],
         ["--end 2019-01-01 is before --start 2019-06-01"]),
    ],
)  # fmt: skip
def test_splits_out_of_order_are_one_line(finpod_cli, tmp_path, args, words):
    out = finpod_cli("download", "--out", str(tmp_path / "ds"), *SPLITS, *args)
    one_error_line(out, *words)


def test_date_format_reads_the_split_dates_of_the_sample(finpod_cli, tmp_path):
    out = finpod_cli(
        "download", "--source", "sample", "--tickers", "AAPL,MSFT", "--out", str(tmp_path / "ds"),
        "--train", "04/01/2010:30/12/2016", "--validation", "10/01/2017:31/12/2018",
        "--backtest", "09/01/2019:31/12/2019", "--date-format", "%d/%m/%Y",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    splits = json.loads((tmp_path / "ds" / "manifest.json").read_text())["splits"]
    assert splits["backtest"]["start"].startswith("2019-01-09")
    assert splits["validation"]["end"].startswith("2018-12-31")
    assert "notice" not in out.stderr  # the gaps are the embargo: every session has a split


def test_date_format_reads_start_for_the_synthetic_source(finpod_cli, tmp_path):
    out = finpod_cli(
        "download", "--source", "synthetic", "--n-tickers", "2", "--years", "0.2",
        "--start", "02/03/2015", "--date-format", "%d/%m/%Y", "--out", str(tmp_path / "ds"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["start"].startswith("2015-03-02")


def test_date_format_reads_the_files_and_the_split_dates(finpod_cli, tmp_path):
    from tests.data.conftest import make_daily

    df = make_daily(n=60, start="2019-01-02")
    df = df.assign(date=pd.to_datetime(df["date"]).dt.strftime("%d/%m/%Y"))
    (tmp_path / "in").mkdir()
    df.to_csv(tmp_path / "in" / "bars.csv", index=False)
    out = finpod_cli(
        "download", "--source", "files", "--path", str(tmp_path / "in"),
        "--out", str(tmp_path / "ds"), "--date-format", "%d/%m/%Y", "--min-coverage", "0",
        "--train", "02/01/2019:28/02/2019", "--validation", "01/03/2019:12/03/2019",
        "--backtest", "13/03/2019:31/03/2019", "--embargo", "0",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    splits = json.loads((tmp_path / "ds" / "manifest.json").read_text())["splits"]
    assert splits["train"]["end"].startswith("2019-02-28")
    assert splits["backtest"]["start"].startswith("2019-03-13")


def test_sessions_between_splits_beyond_the_embargo_are_a_notice(finpod_cli, tmp_path):
    out = finpod_cli(
        "download", "--source", "sample", "--tickers", "AAPL,MSFT", "--out", str(tmp_path / "ds"),
        *SPLITS, "--backtest", "2019-09-01:2019-12-31",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    notice = [line for line in out.stderr.splitlines() if line.startswith("notice:")]
    assert notice == [
        "notice: no split holds 2019-01-02 → 2019-08-30 (168 sessions between validation "
        "and backtest; the embargo is 5)"
    ]
    notes = json.loads((tmp_path / "ds" / "manifest.json").read_text())["notes"]
    assert notice[0].removeprefix("notice: ") in notes


def test_split_gaps_names_only_what_lies_beyond_the_embargo():
    days = pd.bdate_range("2019-01-01", periods=60, tz="America/New_York")
    dates = {
        "train": ("2019-01-01", "2019-01-31"),
        "validation": ("2019-02-01", "2019-02-28"),  # meets train: the embargo moves it
        "backtest": ("2019-03-15", "2019-03-26"),  # 10 sessions after validation ends
    }
    plan = plan_splits(days, dates, 2)
    assert split_gaps(days, plan, 2) == [
        "no split holds 2019-03-01 → 2019-03-14 (10 sessions between validation and "
        "backtest; the embargo is 2)"
    ]
    assert split_gaps(days, plan_splits(days, None, 2), 2) == []


# ------------------------------------------------------------------------- the fuzzer
_ISO_READER = re.compile(
    r"\s*([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?\s*"
)


def _iso_reading(text: str) -> datetime | None:
    """What a reader of ISO 8601 reads in ``text`` (None: no date, or one finpod does not
    hold), written apart from finpod's parser."""
    m = _ISO_READER.fullmatch(text)
    if m is None:
        return None
    try:
        when = datetime(*(int(g) for g in m.groups() if g is not None))
    except ValueError:
        return None
    return when if 1678 <= when.year <= 2261 else None


_NUMBER = st.integers(0, 40).map(str) | st.integers(0, 9999).map(lambda n: f"{n:04d}")
_SEP = st.sampled_from(["-", "/", ".", "", " "])
_DATE_LIKE = st.builds(
    lambda a, s1, b, s2, c, clock: f"{a}{s1}{b}{s2}{c}{clock}",
    _NUMBER, _SEP, _NUMBER, _SEP, _NUMBER,
    st.sampled_from(["", " 09:30", "T16:00:00", " 24:00", " 9:5", "Z", "+01:00"]),
)  # fmt: skip
_ISO_DATES = st.datetimes(datetime(1600, 1, 1), datetime(2300, 12, 31)).map(
    lambda d: (
        d.replace(microsecond=0).isoformat(sep=" ")
        if d.second
        else d.strftime("%Y-%m-%d" if d.hour == d.minute == 0 else "%Y-%m-%d %H:%M")
    )
)
DATE_TEXT = _DATE_LIKE | _ISO_DATES | st.text(max_size=20)
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(text=DATE_TEXT, flag=st.sampled_from(ONE_DATE))
def test_fuzz_one_date_is_iso_or_one_line(text, flag):
    truth = _iso_reading(text)
    try:
        got = _one_date(text, flag, None)
    except FinpodError as err:
        assert truth is None, (text, str(err))
        assert "\n" not in str(err) and flag in str(err)
        return
    assert got == truth, text
    assert pd.Timestamp(iso_text(got)) == pd.Timestamp(text.strip())  # pandas reads the same


@FUZZ
@given(first=DATE_TEXT, last=DATE_TEXT, flag=st.sampled_from(DATE_RANGES))
def test_fuzz_a_split_range_is_iso_dates_or_one_line(first, last, flag):
    text = f"{first}:{last}"
    try:
        got = _split_dates(text, flag.lstrip("-"), None)
    except FinpodError as err:
        assert "\n" not in str(err) and flag in str(err), str(err)
        return
    ends = []
    for side in (first, last):  # accepted: each side is empty or a whole ISO date
        truth = _iso_reading(side)
        assert side.strip() == "" or (truth is not None and truth.time() == datetime.min.time())
        ends.append(None if not side.strip() else truth.strftime("%Y-%m-%d"))
    assert got == tuple(ends)
    assert None in ends or ends[0] <= ends[1]


_PATTERNS = ["%d/%m/%Y", "%m/%d/%Y", "%Y%m%d", "%d.%m.%Y %H:%M", "%m-%d-%y", "%Y/%m/%d"]


@FUZZ
@given(
    when=st.datetimes(datetime(1970, 1, 1), datetime(2068, 12, 31)),
    pattern=st.sampled_from(_PATTERNS),
    flag=st.sampled_from(ONE_DATE),
)
def test_fuzz_date_format_reads_back_exactly_what_it_wrote(when, pattern, flag):
    when = when.replace(second=0, microsecond=0)
    if "%H" not in pattern:
        when = when.replace(hour=0, minute=0)
    assert _one_date(when.strftime(pattern), flag, pattern) == when


@FUZZ
@given(text=DATE_TEXT, pattern=st.sampled_from(_PATTERNS))
def test_fuzz_date_format_is_strict_or_one_line(text, pattern):
    try:
        got = parse_date(text, "--end", pattern)
    except FinpodError as err:
        assert "\n" not in str(err)
        return
    readers = [pattern] + ([pattern.split(" ")[0]] if " " in pattern else [])
    expected = []
    for reader in readers:
        try:
            expected.append(datetime.strptime(text.strip(), reader))
        except ValueError:
            continue
    assert expected and got == expected[0], (text, pattern)


@pytest.mark.parametrize("flag", [*ONE_DATE, *DATE_RANGES])
@pytest.mark.parametrize("text", ["31/31/2019", "2019-02-29", "\u0662\u0660\u0661\u0669-01-01"])
def test_every_date_option_refuses_in_one_line_through_the_cli(finpod_cli, tmp_path, flag, text):
    value = text if flag in ONE_DATE else f"2019-01-02:{text}"
    out = finpod_cli("download", "--source", "sample", flag, value, "--out", str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    one_error_line(out, flag)


def test_build_dataset_from_python_reads_dates_the_same_one_way(tmp_path):
    """A notebook's ``build_dataset(..., splits=...)`` refuses a non-ISO date as the
    command line does, instead of handing it to pandas to guess."""
    from finpod.data import build_dataset
    from finpod.errors import FinpodError

    splits = {
        "train": ("2010-01-04", "2016-12-30"),
        "validation": ("2017-01-10", "2018-12-31"),
        "backtest": ("09/01/2019", "31/12/2019"),
    }
    with pytest.raises(FinpodError, match="not an ISO date"):
        build_dataset("sample", tmp_path / "ds", splits=splits)
    with pytest.raises(FinpodError, match="month 13"):
        build_dataset("sample", tmp_path / "ds", start="2015-13-01")
    assert not (tmp_path / "ds").exists()
