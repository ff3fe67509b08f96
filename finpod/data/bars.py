"""Bars on the calendar grid (:class:`Bars`, what the cleaner hands on), and the first reading
of a vendor table: its column names (aliases, bracketed headers) and its ticker cells."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from finpod.data.vendor import TICKER_COLUMNS, prepare_vendor_frame
from finpod.errors import FinpodError

#: Accepted spellings of each canonical column (matched after lower-casing and stripping).
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "timestamp": ("timestamp", "date", "datetime", "time", "dt", "ts"),
    "tic": TICKER_COLUMNS,
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
        open, high, low, close: (T, N) prices (float64 from the cleaner, as the source
            gave them; some sources float32); NaN before a ticker's first bar.
        volume: (T, N) shares (float64 from the cleaner); 0 on filled bars and before the
            first bar.
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


def require_columns(df: pd.DataFrame, needed: tuple[str, ...], where: str) -> None:
    """Raise a one-line error naming the columns of ``needed`` that ``df`` lacks."""
    missing = [c for c in needed if c not in df.columns]
    if missing:
        found = ", ".join(map(str, df.columns)) or "none"
        raise FinpodError(
            f"{where}: missing column(s) {', '.join(missing)} (found: {found})",
            "rename them or pass a column mapping, e.g. --column Date=timestamp",
        )


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
