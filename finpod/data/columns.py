"""Columns of a vendor file are used or refused, never ignored silently.

- Two columns that read as one field (``close`` twice, which pandas reads as ``close`` and
  ``close.1``; ``Close`` beside ``close``; ``close`` beside its alias ``last``) are refused:
  which one holds the prices is a guess.
- A column that changes prices (a split ratio, an adjustment factor, a dividend) beside the
  prices is refused when it holds a value that would change them: finpod does not apply
  it, and ignoring it would trade a split as a crash. An all-neutral one (ratio 1, dividend
  0, as a vendor writes on most days) is harmless and listed in the report as unused.
- Numbers written with thousands separators or a decimal comma (``1,234.56``,
  ``1.234,56``) are refused: the parser reads them as no number at all.
"""

from __future__ import annotations

import re

import pandas as pd

from finpod.data.bars import COLUMN_ALIASES, PRICE_COLUMNS
from finpod.data.ticker_rule import ORIGIN
from finpod.data.vendor import prepare_vendor_frame
from finpod.errors import FinpodError

#: Column names (lower-case, non-alphanumerics as ``_``) that change prices, by kind, and
#: the values that change nothing (a split ratio of 0 is Yahoo's "no split").
PRICE_CHANGING: tuple[tuple[str, re.Pattern[str], tuple[float, ...]], ...] = (
    (
        "a split ratio",
        re.compile(r"(stock_)?splits?(_?(ratio|factor|coefficient|coef|multiplier))?"),
        (0.0, 1.0),
    ),
    (
        "an adjustment factor",
        re.compile(r"(adj(ustment)?|price|cum(ulative)?(_adj)?)_?(factor|ratio|multiplier)|factor"),
        (1.0,),
    ),
    ("a dividend", re.compile(r"(cash_)?(div|dividends?)(_?(amount|cash|paid))?"), (0.0,)),
)
#: A number with a thousands separator or a decimal comma, as text.
_SEPARATED = re.compile(r"[+-]?\d{1,3}(?:[,.' \u00a0\u202f]\d{3})+(?:[.,]\d+)?|[+-]?\d+,\d+")


def _bare(name: object) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")


def _field(name: object) -> str | None:
    bare = _bare(name)
    for canonical, aliases in COLUMN_ALIASES.items():
        if bare == canonical or bare in aliases:
            return canonical
    return None


def refuse_ambiguous_columns(
    df: pd.DataFrame, columns: dict[str, str] | None, where: str
) -> dict[str, str]:
    """Raise when two columns of ``df`` (as read, after the renames ``columns``) would both
    be read as one field. A column renamed explicitly (``--column 'Adj Close=close'``)
    wins over the others of its field: returns ``{other column: why unused}``."""
    explicit = {str(v): str(k) for k, v in (columns or {}).items()}
    unused: dict[str, str] = {}
    prepared = prepare_vendor_frame(df.rename(columns=dict(columns or {})))
    names = [str(c) for c in prepared.columns]
    for name in names:
        mangled = re.fullmatch(r"(.+)\.(\d+)", name)  # pandas' name for a repeated header
        if mangled and mangled.group(1) in names:
            raise FinpodError(
                f"{where}: the column {mangled.group(1)!r} appears twice",
                "keep one of the two columns (which one holds the prices is a guess)",
            )
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise FinpodError(
            f"{where}: the column {twice!r} appears twice",
            "keep one of the two columns (which one holds the prices is a guess)",
        )
    by_field: dict[str, list[str]] = {}
    for name in names:
        field = _field(name)
        if field is not None:
            by_field.setdefault(field, []).append(name)
    for field, found in by_field.items():
        if len(found) > 1 and field in explicit and found.count(field) == 1:
            for other in found:
                if other != field:
                    unused[other] = f"replaced by --column '{explicit[field]}={field}'"
        elif len(found) > 1:
            shown = " and ".join(repr(n) for n in found)
            raise FinpodError(
                f"{where}: the columns {shown} would both be read as {field}",
                "keep one of them, or rename the other, e.g. --column NAME=canonical",
            )
    return unused


def price_changing_columns(df: pd.DataFrame, where: str) -> dict[str, str]:
    """Raise when a column that changes prices holds a value that would change them;
    return ``{column: why unused}`` for those that hold only neutral values."""
    unused: dict[str, str] = {}
    for col in df.columns:
        if _field(col) is not None:
            continue
        bare = _bare(col)
        for kind, pattern, neutral in PRICE_CHANGING:
            if not pattern.fullmatch(bare):
                continue
            values = pd.to_numeric(df[col], errors="coerce")
            text = df[col].astype("string").str.strip()
            # Text with a digit ("2:1", "2-for-1") is a ratio too; other text is no number.
            active = (values.notna() & ~values.isin(neutral)) | (
                values.isna() & text.str.contains(r"\d", regex=True).fillna(False)
            )
            if active.any():
                sample = str(df[col][active.to_numpy()].iloc[0])[:40]
                raise FinpodError(
                    f"{where}: column {str(col)!r} looks like {kind} (e.g. {sample!r}), which "
                    "finpod does not apply to the prices",
                    "give prices already adjusted for splits and dividends and remove the "
                    "column, or rename it if it holds something else",
                )
            shown = " or ".join(f"{v:g}" for v in neutral)
            unused[str(col)] = f"{kind}, every value {shown} or empty: nothing to apply"
            break
    return unused


def refuse_separated_numbers(df: pd.DataFrame, where: str) -> None:
    """Raise when a price or volume cell of ``df`` is a number written with thousands
    separators or a decimal comma, naming the file (``ORIGIN`` column, if any) and value."""
    for col in (*PRICE_COLUMNS, "volume"):
        if col not in df.columns:
            continue
        values = df[col]
        if not (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
            continue
        text = values.astype("string").str.strip()
        unread = pd.to_numeric(values, errors="coerce").isna() & text.notna()
        if not unread.any():
            continue
        hit = (unread & text.str.fullmatch(_SEPARATED.pattern).fillna(False)).to_numpy(bool)
        if not hit.any():
            continue
        row = int(hit.nonzero()[0][0])
        source = df[ORIGIN].iloc[row] if ORIGIN in df.columns else where
        raise FinpodError(
            f"{source}: column {col} holds numbers written with a thousands separator or a "
            f"decimal comma (e.g. {str(text.iloc[row])!r}, {int(hit.sum())} cells), which "
            "finpod does not read",
            "save the file with plain numbers like 1234.56: no separator, a decimal point",
        )
