"""Vendor file formats: reading a CSV/Parquet file and bringing its columns to finpod's names.

What is understood, besides the column aliases of :mod:`finpod.data.clean`:

- bracketed headers, as Stooq ships them: ``<TICKER>,<PER>,<DATE>,<TIME>,<OPEN>,…,<VOL>``
  (the brackets are removed before matching);
- separate date and time columns (Stooq, Kibot): ``<DATE>,<TIME>`` = ``20260126,153000``
  or ``01/26/2026,15:30`` are joined into one timestamp; compact ``YYYYMMDD`` dates and
  ``HHMMSS`` times (a leading zero lost by a spreadsheet, ``93000``, is put back);
- symbol suffixes (``AAPL.US``): :func:`apply_ticker_pattern` keeps the first group of a
  regular expression, on file names and on ticker columns alike.

Refused: Excel serial dates (``43467`` for 2019-01-02, a date cell saved as a number),
named as such (:func:`refuse_excel_serials`).

A ticker cell is a name, never a missing value: ``NA``, ``NAN``, ``NULL`` or ``N/A`` in a
ticker column stay tickers (only an empty cell is no ticker); the other columns read
pandas' usual missing-value spellings (:data:`MISSING_TEXT`) as missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from finpod.errors import FinpodError

#: File endings the ``files`` source reads.
TABLE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".txt")
#: Column names (lower-cased, brackets removed) read as the date part of a split stamp.
DATE_COLUMNS = ("date", "day", "trade_date")
#: Column names read as the time-of-day part of a split stamp.
TIME_COLUMNS = ("time", "hhmmss", "trade_time")
#: Column names (lower-cased, brackets removed) that hold tickers (the ``tic`` aliases).
TICKER_COLUMNS = ("tic", "ticker", "symbol", "sym")
#: Cells read as missing in every column but a ticker column: pandas' default
#: ``na_values`` (a ticker column reads only an empty cell as missing).
MISSING_TEXT = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
    "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


def read_table(path: Path, columns: dict[str, str] | None = None) -> pd.DataFrame:
    """Read one CSV (optionally .gz, or .txt) or Parquet file; an empty or unreadable file is
    an error. ``columns`` (vendor → canonical renames) names further ticker columns: a
    ticker column's cells are read as written (``NA`` is a ticker, see the module doc)."""
    name = path.name.lower()
    try:
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(path)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            header = pd.read_csv(path, nrows=0).columns
            tickers = ticker_columns(header, columns)
            # Dates and times are read as text: 20260126 must not become an integer count.
            dtype: dict[str, type] = {c: str for c in header if _is_stamp_part(c) or c in tickers}
            missing = {c: [""] if c in tickers else list(MISSING_TEXT) for c in header}
            return pd.read_csv(path, dtype=dtype, keep_default_na=False, na_values=missing)
    except pd.errors.EmptyDataError as err:
        raise FinpodError(f"{path} is empty", "remove it or fill it with bars") from err
    except (pd.errors.ParserError, OSError, ValueError) as err:
        raise FinpodError(
            f"cannot read {path}: {str(err).splitlines()[0]}",
            "is it a CSV or Parquet file of bars?",
        ) from err
    raise FinpodError(f"{path} is neither CSV nor Parquet", "use .csv, .csv.gz or .parquet files")


def _is_stamp_part(column: object) -> bool:
    """Whether a column of a CSV header holds dates or times (read as ``str``)."""
    return _bare(column) in (*DATE_COLUMNS, *TIME_COLUMNS)


def ticker_columns(header: pd.Index, columns: dict[str, str] | None = None) -> set[object]:
    """The columns of ``header`` that hold tickers: a ``tic`` alias, or renamed to ``tic``
    by ``columns``."""
    renamed = {k for k, v in (columns or {}).items() if v == "tic"}
    return {c for c in header if _bare(c) in TICKER_COLUMNS or c in renamed}


def _bare(name: object) -> str:
    return str(name).strip().strip("<>").strip().lower().replace(" ", "_")


def strip_brackets(df: pd.DataFrame) -> pd.DataFrame:
    """``<OPEN>`` → ``OPEN`` (Stooq-style headers); other names unchanged."""
    rename = {
        c: str(c).strip()[1:-1].strip() for c in df.columns if re.fullmatch(r"\s*<.*>\s*", str(c))
    }
    return df.rename(columns=rename) if rename else df


def combine_date_time(df: pd.DataFrame) -> pd.DataFrame:
    """Join a date column and a time column into one ``timestamp`` text column.

    Compact values are spelled out: ``20260126`` → ``2026-01-26``, ``153000`` →
    ``15:30:00``, ``93000`` → ``09:30:00``. A table without both columns, or that already
    has a ``timestamp``/``datetime`` column, is returned unchanged.
    """
    names = {_bare(c): c for c in df.columns}
    if "timestamp" in names or "datetime" in names:
        return df
    date_col = next((names[n] for n in DATE_COLUMNS if n in names), None)
    time_col = next((names[n] for n in TIME_COLUMNS if n in names), None)
    if date_col is None or time_col is None:
        return df
    date = compact_dates(df[date_col])
    time = df[time_col].astype("string").str.strip()
    digits = time.str.fullmatch(r"\d{1,6}").fillna(False)
    if digits.any():
        t = time[digits].str.zfill(6)
        time = time.where(~digits, t.str[0:2] + ":" + t.str[2:4] + ":" + t.str[4:6])
    out = df.drop(columns=[date_col, time_col])
    out.insert(0, "timestamp", date + " " + time)
    return out


def compact_dates(values: pd.Series) -> pd.Series:
    """Text dates, with compact ``YYYYMMDD`` values spelled ``YYYY-MM-DD``."""
    if pd.api.types.is_float_dtype(values):
        values = values.astype("Int64")
    s = values.astype("string").str.strip()
    compact = s.str.fullmatch(r"\d{8}").fillna(False)
    if compact.any():
        c = s[compact]
        s = s.where(~compact, c.str[0:4] + "-" + c.str[4:6] + "-" + c.str[6:8])
    return s


def apply_ticker_pattern(values: pd.Series, pattern: str) -> pd.Series:
    """Tickers rewritten to the first group of ``pattern`` where it matches (case-insensitive);
    others unchanged. ``^(.*)\\.US$``: ``AAPL.US`` → ``AAPL``."""
    rx = compile_ticker_pattern(pattern)
    return values.astype("string").str.strip().str.replace(rx, lambda m: m.group(1), regex=True)


def compile_ticker_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled (case-insensitive); it must be valid and have a group."""
    try:
        rx = re.compile(pattern, flags=re.IGNORECASE)
    except re.error as err:
        raise FinpodError(
            f"--ticker-pattern {pattern!r} is not a regular expression ({err})",
            r"e.g. --ticker-pattern '^(.*)\.US$'",
        ) from err
    if rx.groups < 1:
        raise FinpodError(
            f"--ticker-pattern {pattern!r} has no group to keep",
            r"put the ticker in parentheses, e.g. '^(.*)\.US$'",
        )
    return rx


def prepare_vendor_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Bracketed headers removed and date + time columns joined (see the module docstring)."""
    return combine_date_time(strip_brackets(df))


#: Excel's day count (days since 1899-12-30) of 1927-05-18 … 2173-10-13: what a
#: spreadsheet writes for a date cell saved as a number. No stamp finpod reads is a number
#: of five integer digits (dates are 8 digits, epochs 9 or more).
_EXCEL_SERIAL = r"\d{5}(?:\.\d*)?"
_EXCEL_EPOCH = pd.Timestamp("1899-12-30")


def excel_serials(values: pd.Series) -> np.ndarray:
    """(n,) bool: values that are Excel serial dates (``43467`` or ``43467.5``)."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        number = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            return (number >= 10_000) & (number < 100_000)
    if not (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
        return np.zeros(len(values), dtype=bool)
    if values.dtype == object:
        # A column of mixed cells (text from one file, numbers from another).
        values = values.map(lambda v: f"{v:.10g}" if isinstance(v, (int, float)) else v)
    text = values.astype("string[pyarrow]")
    # Only short cells can be serials; a column of full stamps is passed over quickly.
    short = (text.str.len() <= 20).fillna(False).to_numpy(dtype=bool)
    out = np.zeros(len(values), dtype=bool)
    if short.any():
        found = text[short].str.strip().str.fullmatch(_EXCEL_SERIAL).fillna(False)
        out[short] = found.to_numpy(dtype=bool)
    return out


def refuse_excel_serials(values: pd.Series, where: str, tickers: pd.Series | None = None) -> None:
    """Raise :class:`FinpodError` when some stamps are Excel serial dates, naming where
    (and which tickers) and the date the first one stands for."""
    hit = excel_serials(values)
    if not hit.any():
        return
    first = values[hit].iloc[0]
    day = (_EXCEL_EPOCH + pd.Timedelta(days=float(first))).strftime("%Y-%m-%d")
    whose = ""
    if tickers is not None:
        names = sorted({str(t) for t in tickers[hit].dropna().unique() if str(t)})
        if names:
            whose = f" of {', '.join(names[:5])}{' …' if len(names) > 5 else ''}"
    raise FinpodError(
        f"Excel serial dates are not supported: {where}: {int(hit.sum())} timestamps{whose} "
        f"are day counts like {str(first)!r} (Excel's {day})",
        "format the date column as YYYY-MM-DD in the spreadsheet and save it again",
    )
