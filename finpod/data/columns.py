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
- A column named as a user feature (``--feature-column NAME``) must exist in every file and
  hold numbers; it is placed on the bar grid at its own bar (:func:`place_feature_columns`)
  and then checked and scaled by :mod:`finpod.data.user_features`. Any other extra column
  is listed in the report as unused (``unused_columns``), with a note in the manifest.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from finpod.data.bars import COLUMN_ALIASES, PRICE_COLUMNS, Bars
from finpod.data.calendar import TZ, bar_minutes
from finpod.data.ticker_rule import ORIGIN, row_place
from finpod.data.timestamps import read_stamps, stamp_dates
from finpod.data.vendor import MISSING_TEXT, prepare_vendor_frame
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


def refuse_unread_volumes(df: pd.DataFrame, where: str) -> None:
    """Raise when a volume cell holds text that is no number (``740K``, ``1.2M``, ``-``),
    naming its row: read as missing it would become a volume of 0. An empty cell (or
    pandas' ``NA``, ``null``…) is a missing volume; separated numbers (``1,234``) are
    :func:`refuse_separated_numbers`' to name."""
    if "volume" not in df.columns:
        return
    values = df["volume"]
    if not (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
        return
    text = values.astype("string").str.strip()
    unread = pd.to_numeric(values, errors="coerce").isna() & text.notna()
    unread &= ~text.isin(MISSING_TEXT) & ~text.str.fullmatch(_SEPARATED.pattern).fillna(False)
    hit = unread.to_numpy(dtype=bool)
    if not hit.any():
        return
    row = int(hit.nonzero()[0][0])
    more = f" ({int(hit.sum())} cells like it)" if hit.sum() > 1 else ""
    raise FinpodError(
        f"{where}: {row_place(df, row)}: volume {str(text.iloc[row])[:40]!r} is not a "
        f"number{more}; read as missing it would become 0",
        "write volumes as plain share counts like 740000; finpod reads no K/M suffix",
    )


#: Columns of a bar, which no feature column may name.
_BAR_COLUMNS = ("timestamp", "tic", *PRICE_COLUMNS, "volume")


def refuse_feature_columns(df: pd.DataFrame, names: list[str], where: str) -> None:
    """Raise when a column named as a user feature (``--feature-column``) is one of the
    bar's own columns, is not in ``df`` (its names after the renames), or holds a cell
    that is no number. Empty cells are checked later, on the bars they would fill."""
    for name in names:
        if name in _BAR_COLUMNS:
            raise FinpodError(
                f"--feature-column {name!r} is one of the bar's own columns",
                "name an extra column of the file (the built-in features already use prices)",
            )
        if name not in df.columns:
            found = ", ".join(str(c) for c in df.columns if c not in (ORIGIN, *_BAR_COLUMNS))
            raise FinpodError(
                f"{where}: no column {name!r} named by --feature-column (other columns: "
                f"{found or 'none'})",
                "check the spelling (it is case-sensitive), or rename with --column VENDOR=NAME",
            )
        values = df[name]
        if pd.api.types.is_bool_dtype(values.dtype) or not (
            pd.api.types.is_numeric_dtype(values.dtype)
        ):
            text = values.astype("string").str.strip()
            unread = pd.to_numeric(values, errors="coerce").isna() & text.notna() & (text != "")
            if pd.api.types.is_bool_dtype(values.dtype) or unread.any():
                sample = str(values[unread.to_numpy()].iloc[0]) if unread.any() else "True"
                raise FinpodError(
                    f"{where}: feature column {name!r} holds a value that is not a number "
                    f"(e.g. {sample[:40]!r}, {max(int(unread.sum()), 1)} cell(s))",
                    "a feature column must hold plain numbers like 0.25",
                )


def unnamed_columns(df: pd.DataFrame, used: set[str]) -> dict[str, str]:
    """``{column: why unused}`` for the columns of ``df`` that are no bar column, are not in
    ``used`` (feature columns, columns already reported) and are not finpod's own."""
    skip = {ORIGIN, *_BAR_COLUMNS, *used}
    return {
        str(c): "not read: pass --feature-column to use it as a feature"
        for c in df.columns
        if str(c) not in skip and not str(c).startswith("_finpod")
    }


def place_feature_columns(
    df: pd.DataFrame,
    names: list[str],
    bars: Bars,
    report: dict,
    *,
    timezone: str,
    bar_label: str,
    date_format: str | None,
) -> dict[str, np.ndarray]:
    """The feature columns ``names`` of the long table ``df`` on the grid of ``bars`` (what
    :func:`~finpod.data.clean.clean_long` made of ``df``): ``{name: (T, N) float32}``, the
    value of each row at its own bar, NaN where no row is. Stamps are read as the cleaner
    read them (same ``timezone``, ``date_format`` and bar label, see ``report``).

    Raises when a real bar of ``bars`` has no number in a column, or when two rows of one
    bar and ticker give a column different values.
    """
    instant, wall, _ = read_stamps(df["timestamp"], timezone, date_format)
    minutes = bar_minutes(bars.bar)
    ts = stamp_dates(instant, wall).dt.tz_localize(TZ) if minutes is None else instant
    ns = ts.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    if minutes is not None:
        end_label = bar_label == "end" or (
            bar_label == "auto" and str(report.get("bar_label", "")).startswith("end")
        )
        if end_label:
            ns = ns - np.int64(minutes) * 60_000_000_000
    grid = bars.timestamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    pos = np.minimum(np.searchsorted(grid, ns), len(grid) - 1)
    tic = df["tic"].astype("string").str.strip().str.upper()
    col = pd.Index(bars.tickers).get_indexer(tic.fillna(""))
    keep = (grid[pos] == ns) & (col >= 0) & ~pd.isna(ts).to_numpy()
    T, N = bars.shape
    cell = pos[keep] * N + col[keep]
    order = np.argsort(cell, kind="stable")
    cell = cell[order]
    real = bars.tradable.reshape(-1)
    out: dict[str, np.ndarray] = {}
    for name in names:
        v = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64)[keep][order]
        same = (v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1]))
        twin = (cell[1:] == cell[:-1]) & ~same & real[cell[1:]]
        if twin.any():
            k = int(np.flatnonzero(twin)[0])
            t, i = divmod(int(cell[k]), N)
            raise FinpodError(
                f"feature column {name!r}: two rows of {bars.tickers[i]} at "
                f"{bars.timestamps[t]} give it different values ({v[k]:g} and {v[k + 1]:g})",
                "keep one row per bar and ticker",
            )
        a = np.full(T * N, np.nan, dtype=np.float64)
        a[cell] = v
        out[name] = a.reshape(T, N).astype(np.float32)
    return out


def feature_names(feature_columns: list[str] | str | None) -> list[str]:
    """``"a,b"`` or a list → the feature column names, in order, once each."""
    if feature_columns is None:
        return []
    items = feature_columns.split(",") if isinstance(feature_columns, str) else feature_columns
    return list(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))


def unused_note(unused: dict[str, dict[str, str]]) -> list[str]:
    """The manifest note naming the extra columns no feature reads (empty when none)."""
    names = sorted({c for cols in unused.values() for c, why in cols.items() if "not read" in why})
    if not names:
        return []
    return [
        f"columns of the input not used: {', '.join(names[:8])}{' …' if len(names) > 8 else ''} "
        "(pass --feature-column NAME to use one as a feature)"
    ]
