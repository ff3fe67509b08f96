"""Vendor timestamps → instants and session dates: naive, aware and mixed stamps, Unix
epochs, compact ``YYYYMMDD[HHMMSS]`` values, day/month order, and the bar size and label
the stamps imply."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ
from finpod.errors import FinpodError


def _offset_length(text: pd.Series) -> np.ndarray:
    """(n,) int: length of the zone suffix of each text stamp (``+01:00`` 6, ``-0500`` 5,
    `` UTC`` 4, ``UTC`` 3, ``Z`` 1), 0 for a naive stamp. Looks at the last 6 characters
    only: a regular expression over whole stamps is ~20× slower on millions of rows."""
    tail = text.str.slice(-6)
    n = len(text)
    cut = np.zeros(n, dtype=np.int64)

    def hit(mask: pd.Series) -> np.ndarray:
        return mask.fillna(False).to_numpy(dtype=bool) & (cut == 0)

    cut[hit(tail.str.match(r"[+-]\d\d:\d\d$"))] = 6
    cut[hit(tail.str.slice(-5).str.match(r"[+-]\d{4}$") & text.str.contains(":", regex=False))] = 5
    cut[hit(tail.str.endswith(" UTC"))] = 4
    cut[hit(tail.str.endswith("UTC"))] = 3
    cut[hit(tail.str.endswith("Z"))] = 1
    return cut


def read_stamps(
    values: pd.Series, timezone: str, date_format: str | None = None
) -> tuple[pd.Series, pd.Series, dict]:
    """Parse vendor timestamps into instants and wall-clock times.

    Naive stamps are read in ``timezone``; stamps with an offset or zone keep it. A column
    that mixes both (e.g. files from two vendors) is repaired the same way, element by
    element: naive = ``timezone``, aware = converted; the count goes into the notes
    (``mixed_naive_and_aware``). Compact ``YYYYMMDD`` and ``YYYYMMDDHHMMSS`` values are
    read as dates/times, never as integers; other all-digit values of 9–10, 12–13, 15–16 or
    18–19 digits are Unix epoch seconds, milliseconds, microseconds or nanoseconds (UTC).
    Dates written ``DD/MM/YYYY`` or ``MM/DD/YYYY`` are read in the order the column proves
    (a day above 12 in one place and never in the other); a column that proves neither or
    both is an error, unless ``date_format`` (a ``strftime`` pattern such as ``%d/%m/%Y``)
    says how to read every stamp.

    Returns:
        ``(instant, wall, notes)``: ``instant`` tz-aware (America/New_York), ``wall`` the
        naive clock time where the stamp was written (its own zone), both NaT where
        unreadable or impossible in ``timezone`` (a DST gap).
    """
    notes: dict = {}
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        notes["input_timezone"] = str(values.dt.tz)
        return values.dt.tz_convert(TZ), values.dt.tz_localize(None), notes
    if pd.api.types.is_datetime64_dtype(values.dtype):
        naive = pd.Series(values, copy=False)
        notes["input_timezone"] = f"naive, read as {timezone}"
        return _localize(naive, timezone), naive, notes
    if date_format is not None:
        return _read_with_format(values, timezone, date_format, notes)
    if pd.api.types.is_float_dtype(values.dtype):
        finite = values.where(np.isfinite(values.to_numpy(dtype=np.float64, na_value=np.nan)))
        values = finite.round().astype("Int64")
    values = _whole_numbers_as_text(values)
    epoch = _read_epoch(values)
    if epoch is not None:
        instant, unit = epoch
        notes["input_timezone"] = f"Unix epoch {unit} (UTC)"
        return instant.dt.tz_convert(TZ), instant.dt.tz_localize(None), notes
    if pd.api.types.is_integer_dtype(values.dtype):
        values = values.astype("string")  # 20260126 is a date, not nanoseconds since 1970
    values, order = _day_month_to_iso(values)
    if order is not None:
        notes["date_order"] = order
    try:
        # Fast path: one kind of stamp in the whole column (all naive, or one offset).
        parsed = pd.to_datetime(values, errors="coerce", format="mixed")
    except (ValueError, TypeError):
        parsed = None  # naive and aware mixed, or several offsets (e.g. across DST)
    if parsed is not None and isinstance(parsed.dtype, pd.DatetimeTZDtype):
        notes["input_timezone"] = "offsets in the stamps"
        return parsed.dt.tz_convert(TZ), parsed.dt.tz_localize(None), notes
    if parsed is not None and pd.api.types.is_datetime64_dtype(parsed.dtype):
        notes["input_timezone"] = f"naive, read as {timezone}"
        return _localize(parsed, timezone), parsed, notes
    # Element by element (vectorized on Arrow strings): naive = timezone, aware = converted.
    text = values.astype("string[pyarrow]").str.strip()
    cut = _offset_length(text)
    aware = cut > 0
    wall_text = text.copy()
    for k in np.unique(cut[aware]):
        rows = cut == k
        wall_text[rows] = text[rows].str.slice(0, -int(k))
    wall = _to_datetime(wall_text)
    instant = pd.Series(pd.NaT, index=values.index, dtype=f"datetime64[ns, {TZ}]")
    if aware.any():
        instant[aware] = _to_datetime(text[aware], utc=True).dt.tz_convert(TZ)
    naive = ~aware & wall.notna().to_numpy()
    if naive.any():
        instant[naive] = _localize(wall[naive], timezone)
    if not naive.any():
        notes["input_timezone"] = "offsets in the stamps"
    else:
        notes["input_timezone"] = f"mixed: naive read as {timezone}, aware converted"
        notes["mixed_naive_and_aware"] = (
            f"{int(naive.sum())} naive stamps read as {timezone}, {int(aware.sum())} aware converted"
        )
    return instant, wall, notes


#: Digits of an all-digit stamp → Unix epoch unit (8 and 14 digits are YYYYMMDD[HHMMSS]).
EPOCH_UNITS = {9: "s", 10: "s", 12: "ms", 13: "ms", 15: "us", 16: "us", 18: "ns", 19: "ns"}
_EPOCH_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
#: ``DD/MM/YYYY`` or ``MM/DD/YYYY`` (also with ``.`` or ``-``) at the start of a stamp.
_DMY = r"^(\d{1,2})([/.\-])(\d{1,2})\2(\d{4}|\d{2})(?=$|[ T])"
#: The same without groups, to find such stamps.
_DMY_FIND = r"^\d{1,2}[/.\-]\d{1,2}[/.\-](?:\d{4}|\d{2})(?:$|[ T])"


def _whole_numbers_as_text(values: pd.Series) -> pd.Series:
    """Text stamps written as floats (``20180521.0``, ``1520260200.0``: an integer column a
    spreadsheet or a NaN turned into floats) without their ``.0``; others unchanged."""
    if not (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
        return values
    text = values.astype("string").str.strip()
    if not text.str.fullmatch(r"\d+\.0*").fillna(True).all() or text.isna().all():
        return values
    return text.str.replace(r"\.0*$", "", regex=True)


def _read_epoch(values: pd.Series) -> tuple[pd.Series, str] | None:
    """UTC instants when every readable value is an all-digit epoch of one unit, else None."""
    if pd.api.types.is_integer_dtype(values.dtype):
        text = values.astype("string")
    elif values.dtype == object or isinstance(values.dtype, pd.StringDtype):
        text = values.astype("string").str.strip()
        if not text.str.fullmatch(r"\d+").fillna(True).all():
            return None
    else:
        return None
    lengths = text.str.len().dropna().unique()
    units = {EPOCH_UNITS.get(int(n)) for n in lengths}
    if len(units) != 1 or None in units:
        return None
    unit = units.pop()
    number = pd.to_numeric(text, errors="coerce").astype("Int64")
    instant = pd.to_datetime(number, unit=unit, utc=True, errors="coerce")
    return instant, _EPOCH_NAMES[unit]


def _day_month_to_iso(values: pd.Series) -> tuple[pd.Series, str | None]:
    """Dates written ``a/b/YYYY`` rewritten ``YYYY-MM-DD`` in the order the column proves.

    Returns (values, note); values unchanged (note None) when no stamp is written that way.
    Raises :class:`FinpodError` when the order is not proven, or contradicted, by the values.
    """
    if not (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
        return values, None
    text = values.astype("string[pyarrow]").str.strip()
    hit = text.str.contains(_DMY_FIND, regex=True).fillna(False).to_numpy(dtype=bool)
    if not hit.any():
        return values, None
    parts = text[hit].str.extract(_DMY)
    same_sep = parts[0].notna().to_numpy(dtype=bool)  # "04/01-2016" is no date: left as is
    hit[np.flatnonzero(hit)[~same_sep]] = False
    if not hit.any():
        return values, None
    parts = parts[same_sep]
    first, second, year = parts[0].astype(int), parts[2].astype(int), parts[3]
    example = str(text[hit].iloc[0])
    hint = "pass --date-format, e.g. --date-format '%d/%m/%Y' or '%m/%d/%Y %H:%M'"
    if (year.str.len() == 2).any():
        raise FinpodError(f"dates with two-digit years (e.g. {example!r}) are ambiguous", hint)
    day_first, month_first = bool((first > 12).any()), bool((second > 12).any())
    if day_first and month_first:
        a = str(text[hit][(first > 12).to_numpy()].iloc[0])
        b = str(text[hit][(second > 12).to_numpy()].iloc[0])
        raise FinpodError(
            f"the dates mix day/month ({a!r}) and month/day ({b!r}) order", "use one order"
        )
    if not (day_first or month_first):
        raise FinpodError(
            f"dates like {example!r} may be day/month or month/day, and no value tells "
            "which (none has a day above 12)",
            hint,
        )
    day = first if day_first else second
    month = second if day_first else first
    iso = year + "-" + month.astype(str).str.zfill(2) + "-" + day.astype(str).str.zfill(2)
    rest = text[hit].str.replace(_DMY, "", regex=True)
    out = values.astype("string").copy()
    out[hit] = (iso + rest).to_numpy()
    order = "day/month" if day_first else "month/day"
    return out, f"{order} (read from values with a day above 12, e.g. {example!r})"


def _read_with_format(
    values: pd.Series, timezone: str, date_format: str, notes: dict
) -> tuple[pd.Series, pd.Series, dict]:
    """Every stamp read with the ``strftime`` pattern ``date_format`` (NaT where it fails)."""
    text = values.astype("string").str.strip()
    try:
        parsed = pd.to_datetime(text, format=date_format, errors="coerce")
    except (ValueError, TypeError) as err:
        raise FinpodError(
            f"--date-format {date_format!r} cannot read the timestamps ({err})",
            "give a strftime pattern, e.g. '%d/%m/%Y %H:%M'",
        ) from err
    notes["date_format"] = date_format
    if isinstance(parsed.dtype, pd.DatetimeTZDtype):
        notes["input_timezone"] = "offsets in the stamps"
        return parsed.dt.tz_convert(TZ), parsed.dt.tz_localize(None), notes
    notes["input_timezone"] = f"naive, read as {timezone}"
    return _localize(parsed, timezone), parsed, notes


def _to_datetime(text: pd.Series, utc: bool = False) -> pd.Series:
    """Text → datetimes: the format inferred from the first stamp (fast); stamps written
    another way are then read one by one."""
    try:
        out = pd.to_datetime(text, errors="coerce", utc=utc, format="ISO8601")
    except (ValueError, TypeError):
        return pd.to_datetime(text, errors="coerce", utc=utc, format="mixed")
    redo = (out.isna() & text.notna()).to_numpy(dtype=bool)
    if redo.any():
        again = pd.to_datetime(text[redo], errors="coerce", utc=utc, format="mixed")
        out = out.astype(again.dtype) if again.dtype != out.dtype else out
        out[redo] = again
    return out


def _localize(naive: pd.Series, timezone: str) -> pd.Series:
    try:
        out = naive.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT")
    except Exception as err:  # noqa: BLE001 - zoneinfo and pytz raise different types
        raise FinpodError(
            f"unknown time zone {timezone!r}", "use an IANA name, e.g. America/New_York or UTC"
        ) from err
    return out.dt.tz_convert(TZ)


def stamp_dates(instant: pd.Series, wall: pd.Series) -> pd.Series:
    """The session date a daily stamp names (naive midnight).

    A stamp at midnight where it was written (a date, or ``2019-01-02 00:00+00:00``) is
    that date: converting a UTC-midnight date to New York would move it to the previous
    evening. Any other stamp is an instant, dated in New York (``2019-01-02 16:00-05:00``
    and ``2019-01-02 21:00Z`` are both 2019-01-02).
    """
    date = wall.dt.normalize()
    at_midnight = (wall == date).fillna(True)
    ny_date = instant.dt.tz_localize(None).dt.normalize()
    return date.where(at_midnight, ny_date)


def parse_timestamps(values: pd.Series, timezone: str, daily: bool) -> tuple[pd.Series, dict]:
    """Timestamps → tz-aware New York; returns (series with NaT where unusable, notes).

    Daily stamps become session dates (:func:`stamp_dates`); intraday stamps are instants
    (see :func:`read_stamps`).
    """
    instant, wall, notes = read_stamps(values, timezone)
    if daily:
        return stamp_dates(instant, wall).dt.tz_localize(TZ), notes
    return instant, notes


def one_bar_size(instant: pd.Series, wall: pd.Series, tic: pd.Series, where: str) -> None:
    """Raise when the tickers' stamps are spaced by different bar sizes (daily files beside
    1-minute files), or when intraday bars sit beside date-only rows of the same ticker.

    Each ticker's bar is the most common spacing of its own stamps; tickers with fewer
    than three stamps say nothing.
    """
    ok = (instant.notna() & (tic != "")).to_numpy(dtype=bool)
    if ok.sum() < 3:
        return
    ns = utc_ns(instant[ok])
    codes, names = pd.factorize(tic[ok])
    order = np.lexsort((ns, codes))
    ns, codes = ns[order], codes[order]
    step = np.diff(ns)
    keep = (np.diff(codes) == 0) & (step > 0)
    if not keep.any():
        return
    pairs = pd.DataFrame({"tic": codes[1:][keep], "step": step[keep]})
    counts = pairs.value_counts().reset_index(name="n")
    mode = counts.sort_values(["tic", "n"], ascending=[True, False]).drop_duplicates("tic")
    minutes = mode["step"].to_numpy() // 60_000_000_000
    label = np.where(minutes >= 24 * 60, "1d", np.char.add(minutes.astype(str), "min"))
    by_bar: dict[str, list[str]] = {}
    for t, lab in zip(mode["tic"].to_numpy(), label, strict=True):
        by_bar.setdefault(str(lab), []).append(str(names[t]))
    if len(by_bar) > 1:
        parts = "; ".join(
            f"{lab}: {', '.join(sorted(v)[:5])}{' …' if len(v) > 5 else ''}"
            for lab, v in sorted(by_bar.items())
        )
        raise FinpodError(
            f"{where}: the tickers have different bar sizes ({parts})",
            "build one dataset per bar size (--tickers or separate folders)",
        )
    if next(iter(by_bar)) != "1d":
        w = wall[ok]
        midnight = (w == w.dt.normalize()).to_numpy(dtype=bool)
        if midnight.any():
            tics = sorted(set(tic[ok][midnight].astype(str)))
            raise FinpodError(
                f"{where}: {int(midnight.sum())} date-only (daily) rows of "
                f"{', '.join(tics[:5])} sit beside {next(iter(by_bar))} bars",
                "put daily and intraday bars in separate datasets",
            )


def infer_bar(values: pd.Series, timezone: str = TZ) -> str:
    """Most common positive spacing of the timestamps: ``"1d"`` or ``"<N>min"``."""
    instant, _, _ = read_stamps(values, timezone)
    return infer_bar_ns(utc_ns(instant))


def utc_ns(instant: pd.Series) -> np.ndarray:
    """Readable instants of a tz-aware Series as int64 UTC nanoseconds."""
    ok = instant.dropna()
    return (
        ok.dt.tz_convert("UTC")
        .dt.tz_localize(None)
        .to_numpy(dtype="datetime64[ns]")
        .astype(np.int64)
    )


def infer_bar_ns(ns: np.ndarray) -> str:
    """The bar size (``"1d"``, ``"5min"``, …) of int64 UTC nanosecond stamps ``ns``."""
    uniq = np.unique(ns)
    if len(uniq) < 2:
        raise FinpodError("cannot infer the bar size from fewer than two timestamps", "pass --bar")
    diffs = np.diff(uniq)
    vals, counts = np.unique(diffs, return_counts=True)
    step = int(vals[counts.argmax()])
    minutes = step // 60_000_000_000
    if minutes >= 24 * 60 or minutes <= 0:
        return "1d"
    return f"{minutes}min"


def infer_bar_per_ticker(instant: pd.Series, tic: pd.Series) -> str:
    """The bar size read from each ticker's own spacing: the most common positive step
    between consecutive stamps of the same ticker. Stamps of different tickers are never
    subtracted: daily bars written three ways (a date, ``16:00`` New York, UTC midnight)
    are daily, not a 3-hour grid. Falls back to :func:`infer_bar_ns` over all stamps
    when no ticker has two."""
    ok = (instant.notna() & tic.notna() & (tic != "")).to_numpy(dtype=bool)
    ns = utc_ns(instant[ok])
    codes, _ = pd.factorize(tic[ok])
    order = np.lexsort((ns, codes))
    ns, codes = ns[order], codes[order]
    step = np.diff(ns)
    step = step[(np.diff(codes) == 0) & (step > 0)]
    if len(step) == 0:
        return infer_bar_ns(utc_ns(instant))
    vals, counts = np.unique(step, return_counts=True)
    minutes = int(vals[counts.argmax()]) // 60_000_000_000
    if minutes >= 24 * 60 or minutes <= 0:
        return "1d"
    return f"{minutes}min"


def detect_bar_label(local: pd.DatetimeIndex, minutes: int) -> str:
    """``"end"`` when intraday stamps of New York wall time ``local`` hit 16:00 but never
    09:30 (each bar is stamped at its end), else ``"start"``."""
    tod = local.hour * 60 + local.minute
    has_open = bool((tod == 9 * 60 + 30).any())
    has_close = bool((tod == 16 * 60).any())
    return "end" if has_close and not has_open else "start"
