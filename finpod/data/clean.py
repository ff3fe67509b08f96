"""Cleaning: a long table of vendor bars → wide arrays on the exchange-calendar grid.

What the cleaner does, and records in the cleaning report (``report`` dict, saved as
``cleaning_report.json`` next to the dataset):

- column names: matched case-insensitively, common aliases accepted (``date``/``datetime``/
  ``time`` → ``timestamp``, ``ticker``/``symbol`` → ``tic``); a missing column is an error
  that names what was found. Bracketed headers (``<CLOSE>``) and separate date and time
  columns (``<DATE>,<TIME>`` = ``20260126,153000``) are understood (:mod:`finpod.data.vendor`).
- timestamps: naive ones are read in ``timezone`` (default America/New_York); aware ones
  are converted; a mix of both (files from two vendors) is repaired the same way and
  counted (``mixed_naive_and_aware``). Compact ``YYYYMMDD[HHMMSS]`` values are dates.
  Unparseable timestamps and DST-impossible local times are dropped.
- unsorted rows are sorted (recorded); exact duplicate rows are dropped; rows that share a
  (timestamp, ticker) but disagree are **all** dropped, since neither can be trusted.
- impossible bars are rejected: a missing (NaN) or non-positive price, ``high < low``,
  negative volume. A missing volume is read as 0.
- rows outside the calendar's sessions (weekends, holidays, pre/after-market minutes,
  minutes off the bar grid) are dropped.
- every kept bar is placed on the session grid. Before a ticker's first bar it has no
  price (NaN here, 0.0 in tensors) and is not tradable. A missing bar after that is
  filled **from the past only**: a flat bar at the previous close with volume 0, marked
  ``filled`` and not tradable. Nothing is ever back-filled and no price is ever set to 0.
- a ticker whose data ends before the range's last session is ``delisted`` from the next
  bar on, for good (``report["delisted"]``): the env converts such a position to cash at
  its last valid close (:data:`DELISTING_RULE`).
- close-to-close moves beyond ±50 % in log terms are listed (``large_moves``) but kept.
- tickers whose bars cover less than ``min_coverage`` of the sessions between their first
  and last bar (or that have fewer than ``min_bars`` bars) are dropped and reported.
  This is a choice of universe made over the whole range (like picking the tickers to
  download); it never changes a price or a feature of the tickers kept.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ, bar_grid, bar_minutes, normalize_bar, session_of, sessions
from finpod.data.vendor import prepare_vendor_frame
from finpod.errors import FinpodError

#: Accepted spellings of each canonical column (matched after lower-casing and stripping).
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamp", "date", "datetime", "time", "dt", "ts"),
    "tic": ("tic", "ticker", "symbol", "sym"),
    "open": ("open", "o"),
    "high": ("high", "h"),
    "low": ("low", "l"),
    "close": ("close", "c", "last"),
    "volume": ("volume", "vol", "v"),
}
PRICE_COLUMNS = ("open", "high", "low", "close")


@dataclass
class Bars:
    """Bars on the calendar grid, time-major.

    Attributes:
        timestamps: (T,) tz-aware (America/New_York) bar times.
        tickers: (N,) symbols, column order of every array.
        open, high, low, close: (T, N) float32 prices; NaN before a ticker's first bar.
        volume: (T, N) float32 shares; 0 on filled bars and before the first bar.
        tradable: (T, N) bool, True only on bars the source really had.
        filled: (T, N) bool, True on bars forward-filled from the past.
        bar: canonical bar size (``"1d"`` or ``"<N>min"``).
    """

    timestamps: pd.DatetimeIndex
    tickers: list[str]
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    tradable: np.ndarray
    filled: np.ndarray
    bar: str = "1d"
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    """Additional (T, N) float32 features provided by the source (e.g. ``alpha_signal``)."""
    buyable: np.ndarray | None = None
    """(T, N) bool or None: False where a ticker may be sold but not bought (outside a
    point-in-time index membership); None = no such restriction."""
    delisted: np.ndarray | None = None
    """(T, N) bool or None: True from the bar after a ticker's last valid price, for good,
    when its data ends before the range does; None = nothing delists."""

    @property
    def shape(self) -> tuple[int, int]:
        return self.close.shape  # type: ignore[return-value]

    def take_tickers(self, keep: np.ndarray) -> Bars:
        """Same bars restricted to the tickers where ``keep`` (N,) is True."""
        idx = np.flatnonzero(keep)
        return Bars(
            timestamps=self.timestamps,
            tickers=[self.tickers[i] for i in idx],
            open=self.open[:, idx],
            high=self.high[:, idx],
            low=self.low[:, idx],
            close=self.close[:, idx],
            volume=self.volume[:, idx],
            tradable=self.tradable[:, idx],
            filled=self.filled[:, idx],
            bar=self.bar,
            extra={k: v[:, idx] for k, v in self.extra.items()},
            buyable=None if self.buyable is None else self.buyable[:, idx],
            delisted=None if self.delisted is None else self.delisted[:, idx],
        )


def normalize_columns(df: pd.DataFrame, columns: dict[str, str] | None = None) -> pd.DataFrame:
    """Rename ``df``'s columns to the canonical names (``columns`` maps vendor → canonical).

    Explicit renames come first; then bracketed headers (``<CLOSE>``) lose their brackets
    and separate date and time columns are joined (see :mod:`finpod.data.vendor`); then
    the aliases of :data:`COLUMN_ALIASES` are matched case-insensitively.
    """
    if df.empty and len(df.columns) == 0:
        raise FinpodError("the input has no columns at all", "is the file empty?")
    explicit = dict(columns or {})
    df = prepare_vendor_frame(df.rename(columns=explicit))
    rename: dict[str, str] = {}
    taken = {c for c in df.columns if c in COLUMN_ALIASES}
    for canonical, aliases in COLUMN_ALIASES.items():
        if canonical in taken:
            continue
        for col in df.columns:
            if col in rename or col in COLUMN_ALIASES:
                continue
            if str(col).strip().lower().replace(" ", "_") in aliases:
                rename[col] = canonical
                taken.add(canonical)
                break
    return df.rename(columns=rename)


def _require(df: pd.DataFrame, needed: tuple[str, ...], where: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        found = ", ".join(map(str, df.columns)) or "none"
        raise FinpodError(
            f"{where}: missing column(s) {', '.join(missing)} (found: {found})",
            "rename them or pass a column mapping, e.g. --column Date=timestamp",
        )


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


def clean_long(
    df: pd.DataFrame,
    bar: str | None = None,
    *,
    columns: dict[str, str] | None = None,
    timezone: str = TZ,
    calendar: str = "XNYS",
    bar_label: str = "auto",
    start: str | pd.Timestamp | None = None,
    end: str | pd.Timestamp | None = None,
    min_coverage: float = 0.8,
    min_bars: int = 2,
    ticker: str | None = None,
    where: str = "input",
    date_format: str | None = None,
) -> tuple[Bars, dict]:
    """Clean a long table of bars into :class:`Bars` on the session grid.

    Args:
        df: rows of ``timestamp, tic, open, high, low, close, volume`` (aliases accepted).
        bar: bar size; ``None`` infers it from the most common spacing of the timestamps.
        columns: explicit vendor → canonical column renames.
        timezone: zone of naive timestamps.
        calendar: ``"XNYS"`` or ``"XNAS"``.
        bar_label: intraday timestamps label the bar ``"start"`` or ``"end"``; ``"auto"``
            reads end-labelled bars when the session close appears and the open does not.
        start, end: optional date range to keep (inclusive).
        min_coverage: a ticker with bars on less than this fraction of the grid between its
            first and last bar is dropped.
        min_bars: a ticker with fewer bars is dropped.
        ticker: ticker for every row when the table has no ``tic`` column.
        where: name of the input, used in error messages.
        date_format: ``strftime`` pattern of every timestamp (e.g. ``%d/%m/%Y``); needed
            only when the stamps do not say how to read them (see :func:`read_stamps`).

    Returns:
        (bars, report): the grid arrays and the cleaning report.
    """
    if df is None or len(df) == 0:
        raise FinpodError(f"{where} has no rows", "check the file, the tickers and the date range")
    df = normalize_columns(df, columns)
    if "tic" not in df.columns and ticker is not None:
        df = df.assign(tic=ticker)
    _require(df, ("timestamp", "tic", *PRICE_COLUMNS, "volume"), where)
    report: dict = {"input_rows": int(len(df)), "dropped": {}, "repaired": {}}
    dropped = report["dropped"]
    repaired = report["repaired"]

    instant, wall, notes = read_stamps(df["timestamp"], timezone, date_format)
    if instant.notna().sum() == 0:
        first = df["timestamp"].dropna()
        example = f" (first: {str(first.iloc[0])[:40]!r})" if len(first) else ""
        raise FinpodError(
            f"{where}: none of the {len(df)} timestamps could be read{example}",
            "write dates as YYYY-MM-DD[ HH:MM], or pass --date-format",
        )
    tic = df["tic"].astype("string").str.strip().str.upper()
    check_tickers(tic, where)
    one_bar_size(instant, wall, tic.fillna(""), where)
    if bar is None:
        bar = _infer_bar_ns(_utc_ns(instant))
        report["bar_inferred"] = bar
    bar = normalize_bar(bar)
    minutes = bar_minutes(bar)
    daily = minutes is None
    # Daily stamps become session dates (see stamp_dates).
    ts = stamp_dates(instant, wall).dt.tz_localize(TZ) if daily else instant
    report.update(notes)
    frame = pd.DataFrame({"timestamp": ts, "tic": tic.fillna("")})
    for col in (*PRICE_COLUMNS, "volume"):
        frame[col] = pd.to_numeric(df[col], errors="coerce")
    frame = frame.reset_index(drop=True)

    bad_ts = frame["timestamp"].isna().to_numpy()
    if bad_ts.any():
        dropped["unreadable_timestamp"] = int(bad_ts.sum())
        frame = frame[~bad_ts]
    no_tic = (frame["tic"] == "").to_numpy()
    if no_tic.any():
        dropped["missing_ticker"] = int(no_tic.sum())
        frame = frame[~no_tic]
    vol_nan = frame["volume"].isna()
    if vol_nan.any():
        repaired["missing_volume_set_to_0"] = int(vol_nan.sum())
        frame.loc[vol_nan, "volume"] = 0.0

    prices = frame[list(PRICE_COLUMNS)].to_numpy(dtype=np.float64)
    volume = frame["volume"].to_numpy(dtype=np.float64)
    nan_price = np.isnan(prices).any(axis=1)
    # ±inf (a vendor's overflow, a spreadsheet's #DIV/0!) is no price: never tradable data.
    inf_price = (~nan_price) & np.isinf(prices).any(axis=1)
    missing = nan_price | inf_price
    nonpos = (~missing) & (prices <= 0).any(axis=1)
    hl = (~missing) & (~nonpos) & (frame["high"].to_numpy() < frame["low"].to_numpy())
    bad_vol = ~np.isfinite(volume)
    negvol = (volume < 0) & ~bad_vol
    earlier = missing | nonpos | hl
    for name, mask in (
        ("missing_price", nan_price),
        ("non_finite_price", inf_price),
        ("non_positive_price", nonpos),
        ("high_below_low", hl),
        ("non_finite_volume", bad_vol & ~earlier),
        ("negative_volume", negvol & ~earlier),
    ):
        if mask.any():
            dropped[name] = int(mask.sum())
    bad = earlier | negvol | bad_vol
    frame = frame[~bad]

    if start is not None:
        lo = _as_ny(start)
        keep = frame["timestamp"] >= lo
        if (~keep).any():
            dropped["before_start"] = int((~keep).sum())
        frame = frame[keep]
    if end is not None:
        hi = _as_ny(end) + (pd.Timedelta(days=1) if _is_date(end) else pd.Timedelta(0))
        keep = frame["timestamp"] < hi if _is_date(end) else frame["timestamp"] <= hi
        if (~keep).any():
            dropped["after_end"] = int((~keep).sum())
        frame = frame[keep]
    if len(frame) == 0:
        raise FinpodError(
            f"{where}: no usable bars left after cleaning ({_summary(dropped)})",
            "check prices, timestamps and the date range",
        )

    # Order: sort by (timestamp, tic); record if the input was not in time order.
    ts_ns = frame["timestamp"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    tic_codes, tic_names = pd.factorize(frame["tic"], sort=True)
    order = np.lexsort((tic_codes, ts_ns))
    if not np.array_equal(order, np.arange(len(order))):
        repaired["rows_sorted"] = True
    frame = frame.iloc[order]
    ts_ns = ts_ns[order]
    tic_codes = tic_codes[order]

    # Duplicates.
    vals = frame[list(PRICE_COLUMNS) + ["volume"]].to_numpy(dtype=np.float64)
    same_key = (np.diff(ts_ns) == 0) & (np.diff(tic_codes) == 0)
    if same_key.any():
        same_vals = np.all(vals[1:] == vals[:-1], axis=1)
        exact = same_key & same_vals
        exact_mask = np.concatenate([[False], exact])
        n_exact = int(exact_mask.sum())
        keep = ~exact_mask
        frame, ts_ns, tic_codes, vals = frame[keep], ts_ns[keep], tic_codes[keep], vals[keep]
        if n_exact:
            repaired["exact_duplicates_dropped"] = n_exact
        same_key = (np.diff(ts_ns) == 0) & (np.diff(tic_codes) == 0)
        if same_key.any():
            key_dup = np.zeros(len(frame), dtype=bool)  # after the exact copies are gone
            key_dup[1:] |= same_key
            key_dup[:-1] |= same_key
            dropped["conflicting_duplicates"] = int(key_dup.sum())
            keep = ~key_dup
            frame, ts_ns, tic_codes = frame[keep], ts_ns[keep], tic_codes[keep]

    if len(frame) == 0:
        raise FinpodError(
            f"{where}: no usable bars left after cleaning ({_summary(dropped)})",
            "each (timestamp, ticker) needs one row; fix the conflicting rows",
        )

    # Calendar grid.
    local = pd.DatetimeIndex(ts_ns.astype("datetime64[ns]")).tz_localize("UTC").tz_convert(TZ)
    sess = sessions(local.min(), local.max(), calendar)
    if len(sess) == 0:
        raise FinpodError(
            f"{where}: no exchange session in the data's date range", "are the dates right?"
        )
    grid = bar_grid(sess, bar, calendar)
    grid_ns = (
        grid.to_numpy(dtype="datetime64[ns]").astype(np.int64)
        if len(grid)
        else np.zeros(0, np.int64)
    )
    stamp = ts_ns
    if not daily:
        label = bar_label
        if label == "auto":
            label = _detect_label(local, minutes)
            if label == "end":
                report["bar_label"] = "end (shifted to bar start)"
        if label == "end":
            stamp = ts_ns - np.int64(minutes) * 60_000_000_000
    pos = np.searchsorted(grid_ns, stamp)
    pos_c = np.minimum(pos, len(grid_ns) - 1)
    on_grid = grid_ns[pos_c] == stamp
    if (~on_grid).any():
        dropped["outside_sessions"] = int((~on_grid).sum())
    if not on_grid.any():
        raise FinpodError(
            f"{where}: no bar falls on an exchange session of the {bar} grid",
            "check the timezone (--timezone), the bar size and the bar label",
        )
    frame = frame[on_grid]
    t_idx = pos_c[on_grid]
    n_idx = tic_codes[on_grid]
    names = [str(x) for x in tic_names]

    # Trim the grid to the span of kept bars.
    t0, t1 = int(t_idx.min()), int(t_idx.max()) + 1
    grid = grid[t0:t1]
    t_idx = t_idx - t0
    T, N = len(grid), len(names)
    arrays = {}
    for col in (*PRICE_COLUMNS, "volume"):
        a = np.full((T, N), np.nan, dtype=np.float64)
        a[t_idx, n_idx] = frame[col].to_numpy(dtype=np.float64)
        arrays[col] = a
    observed = np.zeros((T, N), dtype=bool)
    observed[t_idx, n_idx] = True

    # Sparse tickers.
    counts = observed.sum(axis=0)
    first = np.where(counts > 0, observed.argmax(axis=0), T)
    last = np.where(counts > 0, T - 1 - observed[::-1].argmax(axis=0), -1)
    life = np.maximum(last - first + 1, 1)
    coverage = counts / life
    sparse = (coverage < min_coverage) | (counts < min_bars)
    if sparse.any():
        report["tickers_dropped"] = {
            names[
                i
            ]: f"{int(counts[i])} bars over {int(life[i])} sessions ({coverage[i]:.0%} coverage)"
            for i in np.flatnonzero(sparse)
        }
    keep = ~sparse
    if not keep.any():
        cause = f" after dropping rows ({_summary(dropped)})" if dropped else ""
        raise FinpodError(
            f"{where}: every ticker is too sparse to use (< {min_coverage:.0%} coverage or "
            f"< {min_bars} bars){cause}",
            "fix the rows named, or lower --min-coverage",
        )
    names = [n for n, k in zip(names, keep, strict=True) if k]
    arrays = {k: v[:, keep] for k, v in arrays.items()}
    observed = observed[:, keep]
    first, last = first[keep], last[keep]

    filled_prices, filled = forward_fill(arrays, observed)
    n_filled = filled.sum(axis=0)
    if n_filled.any():
        repaired["bars_forward_filled"] = int(n_filled.sum())
        repaired["bars_forward_filled_per_ticker"] = {
            names[i]: int(n_filled[i]) for i in np.flatnonzero(n_filled)
        }
    report["tickers"] = len(names)
    report["bars"] = int(T)
    report["first_bar"] = {names[i]: str(grid[first[i]]) for i in range(len(names))}
    late = [names[i] for i in range(len(names)) if first[i] > 0]
    report["listed_late"] = {n: report["first_bar"][n] for n in late}
    report["ended_early"] = {
        names[i]: str(grid[last[i]]) for i in range(len(names)) if last[i] < T - 1
    }
    report["kept_rows"] = int(observed.sum())
    report["large_moves"] = large_moves(filled_prices["close"], observed, grid, names)
    delisted = delisting_mask(grid, last)
    if delisted.any():
        report["delisted"] = {
            names[i]: {
                "last_valid_bar": str(grid[last[i]]),
                "last_close": float(filled_prices["close"][last[i], i]),
            }
            for i in np.flatnonzero(delisted.any(axis=0))
        }
        report["delisting_rule"] = DELISTING_RULE
    bars = Bars(
        timestamps=grid,
        tickers=names,
        open=filled_prices["open"],
        high=filled_prices["high"],
        low=filled_prices["low"],
        close=filled_prices["close"],
        volume=filled_prices["volume"],
        tradable=observed,
        filled=filled,
        bar=bar,
        delisted=delisted if delisted.any() else None,
    )
    return bars, report


#: Characters a ticker may hold (after upper-casing): ASCII letters and digits and the
#: punctuation exchanges and vendors use (``BRK.B``, ``BF-B``, ``^NDX``, ``EURUSD=X``).
TICKER_CHARS = re.compile(r"[A-Z0-9.\-^=/_&:+]+")


def ticker_problem(ticker: str) -> str | None:
    """Why ``ticker`` (upper-cased) is not a usable symbol, or None when it is."""
    if TICKER_CHARS.fullmatch(ticker):
        return None
    for ch in ticker:
        if not TICKER_CHARS.fullmatch(ch):
            name = unicodedata.name(ch, "a control character")
            return f"holds U+{ord(ch):04X} ({name})"
    return "is empty"


def check_tickers(tic: pd.Series, where: str, row_offset: int = 0) -> None:
    """Raise naming the first ticker cell with a character no symbol has (a control or
    zero-width character, an emoji, a space inside it). Empty cells are left to the
    cleaner (dropped and counted as ``missing_ticker``).

    ``row_offset`` turns positions into the row numbers a user sees (2 for a CSV with a
    header: the first data row is line 2).
    """
    names = tic.dropna()
    names = names[names != ""]
    for name in names.unique():
        why = ticker_problem(str(name))
        if why is not None:
            pos = int(np.flatnonzero((tic == name).fillna(False).to_numpy(dtype=bool))[0])
            raise FinpodError(
                f"{where}: ticker {str(name)!r} in row {pos + row_offset} {why}",
                "fix the ticker cell (letters, digits and . - ^ = / _ & : + only)",
            )


def one_bar_size(instant: pd.Series, wall: pd.Series, tic: pd.Series, where: str) -> None:
    """Raise when the tickers' stamps are spaced by different bar sizes (daily files beside
    1-minute files), or when intraday bars sit beside date-only rows of the same ticker.

    Each ticker's bar is the most common spacing of its own stamps; tickers with fewer
    than three stamps say nothing.
    """
    ok = (instant.notna() & (tic != "")).to_numpy(dtype=bool)
    if ok.sum() < 3:
        return
    ns = _utc_ns(instant[ok])
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


#: What happens to a position in a ticker whose data ends inside the range (the env applies
#: it; the cleaner records it in the report).
DELISTING_RULE = "a delisted position is converted to cash at its last valid close"


def delisting_mask(grid: pd.DatetimeIndex, last: np.ndarray) -> np.ndarray:
    """(T, N) bool: True after each ticker's last bar when that bar's session ends before the
    grid's last session (data ending inside the range = delisted), for good.

    A ticker whose last bar is in the final session (e.g. a missing last minute) is not
    delisted: its missing bars are ordinary forward-filled gaps.
    """
    T = len(grid)
    sess = session_of(grid) if T else np.zeros(0, dtype=np.int64)
    ended = (last >= 0) & (last < T - 1)
    ended &= sess[np.clip(last, 0, max(T - 1, 0))] < (sess[-1] if T else 0)
    rows = np.arange(T)[:, None]
    return ended[None, :] & (rows > last[None, :])


def forward_fill(
    arrays: dict[str, np.ndarray], observed: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Fill unobserved bars from the past only: a flat bar at the last close, volume 0.

    Args:
        arrays: ``open/high/low/close/volume`` (T, N) with NaN where not observed.
        observed: (T, N) bool.

    Returns:
        (float32 arrays, filled mask). Entries before the first observation stay NaN
        (prices) / 0 (volume) and are not ``filled``.
    """
    T, N = observed.shape
    rows = np.where(observed, np.arange(T)[:, None], -1)
    np.maximum.accumulate(rows, axis=0, out=rows)
    listed = rows >= 0
    filled = listed & ~observed
    src = np.maximum(rows, 0)
    cols = np.arange(N)[None, :]
    last_close = arrays["close"][src, cols]
    out: dict[str, np.ndarray] = {}
    for col in PRICE_COLUMNS:
        a = np.where(observed, arrays[col], np.where(listed, last_close, np.nan))
        out[col] = a.astype(np.float32)
    out["volume"] = np.where(observed, arrays["volume"], 0.0).astype(np.float32)
    return out, filled


#: A close-to-close move larger than this (in log terms, ≈ ±40 %) is listed in the report:
#: often a split, reverse split or spin-off the vendor did not adjust.
LARGE_MOVE_LOG = 0.5


def large_moves(
    close: np.ndarray, observed: np.ndarray, grid: pd.DatetimeIndex, names: list[str]
) -> dict[str, list[str]]:
    """``{ticker: [bar time, …]}`` of moves beyond :data:`LARGE_MOVE_LOG` between two real
    bars. Reported, never changed: the cleaner cannot tell a crash from a bad adjustment."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(np.diff(np.log(close.astype(np.float64)), axis=0))
    hit = (r > LARGE_MOVE_LOG) & observed[1:] & observed[:-1]
    out: dict[str, list[str]] = {}
    for t, j in zip(*np.nonzero(hit), strict=True):
        out.setdefault(names[j], []).append(str(grid[t + 1]))
    return out


def infer_bar(values: pd.Series, timezone: str = TZ) -> str:
    """Most common positive spacing of the timestamps: ``"1d"`` or ``"<N>min"``."""
    instant, _, _ = read_stamps(values, timezone)
    return _infer_bar_ns(_utc_ns(instant))


def _utc_ns(instant: pd.Series) -> np.ndarray:
    """Readable instants of a tz-aware Series as int64 UTC nanoseconds."""
    ok = instant.dropna()
    return (
        ok.dt.tz_convert("UTC")
        .dt.tz_localize(None)
        .to_numpy(dtype="datetime64[ns]")
        .astype(np.int64)
    )


def _infer_bar_ns(ns: np.ndarray) -> str:
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


def _detect_label(local: pd.DatetimeIndex, minutes: int) -> str:
    tod = local.hour * 60 + local.minute
    has_open = bool((tod == 9 * 60 + 30).any())
    has_close = bool((tod == 16 * 60).any())
    return "end" if has_close and not has_open else "start"


def _is_date(x: str | pd.Timestamp) -> bool:
    t = pd.Timestamp(x)
    return t == t.normalize()


def _as_ny(x: str | pd.Timestamp) -> pd.Timestamp:
    t = pd.Timestamp(x)
    return t.tz_localize(TZ) if t.tzinfo is None else t.tz_convert(TZ)


def _summary(d: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items()) or "nothing usable"
