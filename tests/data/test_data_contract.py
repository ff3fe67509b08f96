"""The data contract, end to end: every ticker in the input reaches the dataset or the
build fails naming it; columns are used or refused, never ignored; benchmark files are
held to the standard of prices; interrupted builds leave nothing behind; messages say
what is true. Each case runs ``finpod download`` as a user does."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.data.conftest import make_daily
from tests.data.test_bad_input import _csv, _download, _nothing_left, _one_line


def _excel_serials(df: pd.DataFrame) -> pd.DataFrame:
    days = pd.to_datetime(df["date"]) - pd.Timestamp("1899-12-30")
    return df.assign(date=days.dt.days)


@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_excel_serial_dates_are_refused_as_such(tmp_path, capsys, fraction):
    df = make_daily(("AAA", "BBB"))
    bad = _excel_serials(df[df.tic == "BBB"])
    bad = bad.assign(date=bad["date"] + fraction)
    folder = _csv(tmp_path, df[df.tic == "AAA"].drop(columns="tic"), "AAA.csv")
    _csv(tmp_path, bad.drop(columns="tic"), "BBB.csv")
    line = _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "Excel serial dates are not supported",
        "BBB",
        "2019-01-02",
        "YYYY-MM-DD",
    )
    assert "bar size" not in line and "0min" not in line
    _nothing_left(tmp_path)


def test_a_file_of_excel_serial_dates_alone_is_refused_as_such(tmp_path, capsys):
    df = _excel_serials(make_daily(("AAA",)))
    folder = _csv(tmp_path, df)
    _one_line(
        *_download(tmp_path, capsys, "--path", str(folder)),
        "Excel serial dates are not supported",
        "43467",
    )
