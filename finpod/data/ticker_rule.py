"""The ticker rule: every ticker of the input reaches the dataset, or the build fails with
one line naming it, or (``--drop-bad-tickers``) it is dropped and listed with its cause.

The cleaner drops bad rows one by one (an unreadable stamp, a missing price, two rows that
disagree). Row by row that is right; but when most rows of one ticker go (its file's
numbers are in a format the parser does not take, its stamps are unreadable, two
spellings of it collide) the ticker vanishes from the dataset while the build succeeds.
:func:`ticker_rule` looks at the rows per ticker after the cleaner has marked why each
left, and names such a ticker with the share of its bars lost, the file, the column and a
sample value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.bars import PRICE_COLUMNS
from finpod.errors import FinpodError

#: Optional column of a long table: the file each row was read from (for messages).
ORIGIN = "_finpod_file"
#: Optional column: the ticker as written in its file (a cell, or the file name).
SPELLING = "_finpod_spelling"
#: Optional column: the row's number in its file as a spreadsheet shows it (for messages).
LINE = "_finpod_line"
#: A ticker that loses more than this share of its bars to cleaning fails the rule.
MOST_BARS = 0.5
#: Row causes that are no loss of the ticker's data: the user's date range, an exact copy
#: of a kept row, and stamps off the session grid (pre/after-market minutes, weekends).
OUT_OF_RANGE, EXACT_DUPLICATE, OUTSIDE_SESSIONS = "out_of_range", "exact_duplicate", "outside"
_NOT_LOST = ("", OUT_OF_RANGE, EXACT_DUPLICATE, OUTSIDE_SESSIONS, "missing_ticker")
_HINT = "fix the input, or pass --drop-bad-tickers to build without it and list it in the manifest"


def ticker_rule(
    df: pd.DataFrame, tic: pd.Series, cause: np.ndarray, where: str, drop: bool
) -> dict[str, str]:
    """Apply the rule to the input table ``df`` (its raw cells), the canonical ticker of
    each row ``tic`` and why each row left ``cause`` (``""`` = kept; see the constants).

    Returns ``{ticker: cause}`` of the tickers to drop: those whose every row is outside
    the date range, and, with ``drop``, those that break the rule. Raises
    :class:`FinpodError` naming the first ticker that breaks it otherwise.
    """
    tic_codes, tic_names = pd.factorize(tic.fillna(""), sort=True)
    cause_codes, cause_names = pd.factorize(pd.Series(cause, dtype=object))
    n_tic, n_cause = len(tic_names), len(cause_names)
    # counts[t, c]: rows of ticker t that left for cause c (one pass, no group-by).
    counts = np.bincount(tic_codes * n_cause + cause_codes, minlength=n_tic * n_cause)
    counts = counts.reshape(n_tic, n_cause)
    names = [str(c) for c in cause_names]
    col = {name: k for k, name in enumerate(names)}
    considered_cols = [k for k, c in enumerate(names) if c not in (OUT_OF_RANGE, EXACT_DUPLICATE)]
    lost_cols = [k for k, c in enumerate(names) if c not in _NOT_LOST]
    considered = counts[:, considered_cols].sum(axis=1)
    lost = counts[:, lost_cols].sum(axis=1)
    kept = counts[:, col[""]] if "" in col else np.zeros(n_tic, dtype=np.int64)
    clashes = counts[:, col["conflicting_duplicates"]] if "conflicting_duplicates" in col else 0
    clashes = np.broadcast_to(clashes, (n_tic,))
    out: dict[str, str] = {}
    bad: dict[str, str] = {}
    suspects = [
        t
        for t in range(n_tic)
        if tic_names[t] != ""
        and (
            considered[t] == 0
            or kept[t] == 0
            or lost[t] > MOST_BARS * considered[t]
            or clashes[t] > 0
        )
    ]
    spelling, labels = _spellings(df) if suspects else (None, {})
    for t in suspects:
        name = str(tic_names[t])
        rows = np.flatnonzero(tic_codes == t)
        if considered[t] == 0:
            out[name] = "no bar between the start and end dates"
            continue
        ways = np.unique(spelling[rows])
        collide = len(ways) > 1 and clashes[t] > 0
        if not collide and kept[t] > 0 and lost[t] <= MOST_BARS * considered[t]:
            continue
        if collide:
            text = _collision(name, sorted(labels[int(k)] for k in ways), int(clashes[t]))
        elif lost[t] == 0:  # every bar off the sessions
            first = int(rows[0])
            text = (
                f"none of its {considered[t]} bars falls on an exchange session "
                f"({_origin(df, first)}, e.g. {_cell(df, 'timestamp', first)})"
            )
        else:
            main = max(lost_cols, key=lambda k: counts[t, k])
            first = int(rows[cause_codes[rows] == main][0])
            text = (
                f"{lost[t]} of its {considered[t]} bars ({lost[t] / considered[t]:.0%}) "
                f"are lost in cleaning: {_describe(df, names[main], first)}"
            )
        bad[name] = text
    if bad and not drop:
        name = next(iter(bad))
        more = f" (and {len(bad) - 1} more: {', '.join(list(bad)[1:4])})" if len(bad) > 1 else ""
        hint = _HINT
        if bad[name].startswith(("two spellings", "two files")):
            hint = f"keep one of them and rename or remove the other, or {_HINT.split(', or ')[1]}"
        raise FinpodError(f"{where}: ticker {name} would vanish: {bad[name]}{more}", hint)
    return {**out, **bad}


def _spellings(df: pd.DataFrame) -> tuple[np.ndarray, dict[int, tuple[str, str]]]:
    """(n,) int64 code of the way each row names its ticker (its cell as written, or its
    file name, and its file), and the (label, spelling) of each code: the label
    ``'brk.b' in b.csv``, the spelling ``brk.b``."""
    raw = df[SPELLING] if SPELLING in df.columns else df["tic"]
    origin = df[ORIGIN] if ORIGIN in df.columns else pd.Series("", index=df.index)
    raw_codes, raw_names = pd.factorize(raw.astype("string").str.strip(), use_na_sentinel=False)
    file_codes, files = pd.factorize(origin, use_na_sentinel=False)
    codes = raw_codes.astype(np.int64) * len(files) + file_codes
    labels = {}
    for code in np.unique(codes):
        name, file = raw_names[code // len(files)], files[code % len(files)]
        file = Path(str(file)).name if file else ""
        if name is pd.NA or str(name) == "":
            labels[int(code)] = (f"file {file}" if file else "no name", f"file {file}")
        else:
            text = f"{str(name)!r} in {file}" if file else repr(str(name))
            labels[int(code)] = (text, str(name))
    return codes, labels


def _collision(name: str, ways: list[tuple[str, str]], rows: int) -> str:
    """``ways``: (label, spelling) of each way the rows name ticker ``name``."""
    shown = " and ".join(label for label, _ in ways[:3])
    more = f" (of {len(ways)})" if len(ways) > 3 else ""
    what = "spellings" if len({spelled for _, spelled in ways}) > 1 else "files"
    return (
        f"two {what} collide: {shown}{more} all read as {name}, and {rows} of their "
        "rows disagree on the same bar"
    )


def row_place(df: pd.DataFrame, row: int) -> str:
    """Where input row ``row`` (a position in ``df``) is: ``row 12 of AAPL.csv`` (from the
    :data:`ORIGIN` and :data:`LINE` columns) or ``row 12`` (counted from 1)."""
    line = int(df[LINE].iloc[row]) if LINE in df.columns else row + 1
    if ORIGIN in df.columns:
        return f"row {line} of {Path(str(df[ORIGIN].iloc[row])).name}"
    return f"row {line}"


def _origin(df: pd.DataFrame, row: int) -> str:
    if ORIGIN in df.columns:
        return f"file {df[ORIGIN].iloc[row]}"
    return "its rows"


def _cell(df: pd.DataFrame, column: str, row: int) -> str:
    value = df[column].iloc[row]
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return f"an empty {column} cell"
    return f"{column} = {str(value)[:40]!r}"


def _describe(df: pd.DataFrame, cause: str, row: int) -> str:
    """What is wrong with input row ``row``, dropped for ``cause``: file, column, value."""
    where = _origin(df, row)
    if cause == "unreadable_timestamp":
        return f"unreadable timestamps ({where}, e.g. {_cell(df, 'timestamp', row)})"
    if cause == "conflicting_duplicates":
        return (
            f"rows that share a timestamp but disagree ({where}, e.g. "
            f"{_cell(df, 'timestamp', row)})"
        )
    if cause in ("non_finite_volume", "negative_volume"):
        what = (
            "a volume that is not finite" if cause == "non_finite_volume" else "a negative volume"
        )
        return f"{what} ({where}, e.g. {_cell(df, 'volume', row)})"
    if cause == "high_below_low":
        return f"high below low ({where}, e.g. {_cell(df, 'high', row)}, {_cell(df, 'low', row)})"
    numbers = {
        c: pd.to_numeric(pd.Series([df[c].iloc[row]]), errors="coerce")[0] for c in PRICE_COLUMNS
    }
    if cause == "missing_price":
        col = next((c for c in PRICE_COLUMNS if pd.isna(numbers[c])), "close")
        raw = df[col].iloc[row]
        if pd.isna(raw) or str(raw).strip() == "":
            return f"missing prices ({where}, {_cell(df, col, row)})"
        return f"prices that are not numbers ({where}, column {col}, e.g. {str(raw)[:40]!r})"
    if cause == "non_finite_price":
        col = next((c for c in PRICE_COLUMNS if not np.isfinite(numbers[c])), "close")
        return f"prices that are not finite ({where}, e.g. {_cell(df, col, row)})"
    col = next((c for c in PRICE_COLUMNS if numbers[c] <= 0), "close")
    return f"prices at or below zero ({where}, e.g. {_cell(df, col, row)})"
