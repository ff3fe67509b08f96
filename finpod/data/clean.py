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
  negative volume. A missing (empty) volume is read as 0; a volume that is text but no
  number (``740K``) is an error naming its row.
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
- one bad row is one bad row (:mod:`finpod.data.row_rules`): a few rows far from the rest
  of their ticker (a typed year, 2016-03-15 among 2019 rows) are an error naming them, and
  so is a ticker with fewer than ``min_bars`` bars (dropped and listed with its cause
  under ``--drop-bad-tickers``), a ticker whose bars lie in two pieces too far apart to
  keep its coverage, a stamp written like a date that is none (``2024-13-01``), a ticker's
  last (first) few rows lying over a week past every other ticker's (a typed month), and
  minute files of one ticker labelled two ways (or against ``--bar-label``).
- tickers whose bars cover less than ``min_coverage`` of the sessions between their first
  and last bar are dropped and reported. This is a choice of universe made over the whole
  range (like picking the tickers to download); it never changes a price or a feature of
  the tickers kept.
- the dataset's range is the span of the tickers kept: a ticker that is dropped never
  moves the range, the splits or the other tickers' listing dates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.data.bars import (
    COLUMN_ALIASES,
    PRICE_COLUMNS,
    TICKER_CHARS,
    Bars,
    check_tickers,
    normalize_columns,
    require_columns,
    ticker_problem,
)
from finpod.data.calendar import TZ, bar_grid, bar_minutes, normalize_bar, sessions
from finpod.data.columns import refuse_separated_numbers, refuse_unread_volumes
from finpod.data.row_rules import (
    MIN_TICKER_BARS,
    bar_label_per_ticker,
    refuse_impossible_dates,
    refuse_mixed_bar_labels,
    refuse_naive_utc,
    refuse_stray_edges,
    refuse_stray_rows,
    sparse_tickers,
)
from finpod.data.stages import (
    DELISTING_RULE,
    LARGE_MOVE_LOG,
    bar_faults,
    delisting_mask,
    duplicate_rows,
    forward_fill,
    large_moves,
    outside_range,
)
from finpod.data.ticker_rule import (
    EXACT_DUPLICATE,
    ORIGIN,
    OUT_OF_RANGE,
    OUTSIDE_SESSIONS,
    ticker_rule,
)
from finpod.data.timestamps import (
    EPOCH_UNITS,
    infer_bar,
    infer_bar_per_ticker,
    one_bar_size,
    parse_timestamps,
    read_stamps,
    stamp_dates,
)
from finpod.data.vendor import refuse_excel_serials
from finpod.errors import FinpodError

# Bars, the column and ticker readers, the timestamp readers and the grid stages live in
# finpod.data.bars/.timestamps/.stages; they stay importable from here.
__all__ = [
    "COLUMN_ALIASES",
    "DELISTING_RULE",
    "EPOCH_UNITS",
    "LARGE_MOVE_LOG",
    "PRICE_COLUMNS",
    "TICKER_CHARS",
    "Bars",
    "check_tickers",
    "clean_long",
    "delisting_mask",
    "forward_fill",
    "infer_bar",
    "large_moves",
    "normalize_columns",
    "one_bar_size",
    "parse_timestamps",
    "read_stamps",
    "stamp_dates",
    "ticker_problem",
]


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
    min_bars: int = MIN_TICKER_BARS,
    ticker: str | None = None,
    where: str = "input",
    date_format: str | None = None,
    drop_bad_tickers: bool = False,
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
        min_bars: a ticker with fewer bars is an error naming it (dropped and listed with
            ``drop_bad_tickers``).
        ticker: ticker for every row when the table has no ``tic`` column.
        where: name of the input, used in error messages.
        date_format: ``strftime`` pattern of every timestamp (e.g. ``%d/%m/%Y``); needed
            only when the stamps do not say how to read them (see :func:`read_stamps`).
        drop_bad_tickers: drop, and list with its cause, a ticker that breaks the ticker
            rule (:mod:`finpod.data.ticker_rule`: every ticker of the input reaches the
            bars or is named) instead of failing.

    Returns:
        (bars, report): the grid arrays and the cleaning report.
    """
    if df is None or len(df) == 0:
        raise FinpodError(f"{where} has no rows", "check the file, the tickers and the date range")
    df = normalize_columns(df, columns).reset_index(drop=True)
    if "tic" not in df.columns and ticker is not None:
        df = df.assign(tic=ticker)
    require_columns(df, ("timestamp", "tic", *PRICE_COLUMNS, "volume"), where)
    refuse_separated_numbers(df, where)
    refuse_unread_volumes(df, where)
    report: dict = {"input_rows": int(len(df)), "dropped": {}, "repaired": {}}
    dropped = report["dropped"]
    repaired = report["repaired"]

    if date_format is None:
        refuse_excel_serials(df["timestamp"], where, df["tic"].astype("string").str.strip())
    instant, wall, notes = read_stamps(df["timestamp"], timezone, date_format)
    refuse_impossible_dates(df["timestamp"], wall, df, where)
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
        bar = infer_bar_per_ticker(instant, tic)
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
    # Why each input row (by position) left: "" = kept. Read by the ticker rule.
    cause = np.full(len(frame), "", dtype=object)

    def lose(mask: np.ndarray, why: str) -> None:
        cause[frame.index.to_numpy()[np.asarray(mask, dtype=bool)]] = why

    bad_ts = frame["timestamp"].isna().to_numpy()
    if bad_ts.any():
        dropped["unreadable_timestamp"] = int(bad_ts.sum())
        lose(bad_ts, "unreadable_timestamp")
        frame = frame[~bad_ts]
    no_tic = (frame["tic"] == "").to_numpy()
    if no_tic.any():
        dropped["missing_ticker"] = int(no_tic.sum())
        lose(no_tic, "missing_ticker")
        frame = frame[~no_tic]
    vol_nan = frame["volume"].isna()
    if vol_nan.any():
        repaired["missing_volume_set_to_0"] = int(vol_nan.sum())
        frame.loc[vol_nan, "volume"] = 0.0

    reasons = bar_faults(
        frame[list(PRICE_COLUMNS)].to_numpy(dtype=np.float64),
        frame["volume"].to_numpy(dtype=np.float64),
    )
    for name, mask in reasons:
        if mask.any():
            dropped[name] = int(mask.sum())
            lose(mask, name)
    frame = frame[~np.logical_or.reduce([mask for _, mask in reasons])]

    before, after = outside_range(frame["timestamp"], start, end)
    for name, out in (("before_start", before), ("after_end", after)):
        if out.any():
            dropped[name] = int(out.sum())
            lose(out, OUT_OF_RANGE)
    frame = frame[~(before | after)]
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

    # Duplicates: exact copies go (a repair); rows of one key that disagree all go.
    vals = frame[list(PRICE_COLUMNS) + ["volume"]].to_numpy(dtype=np.float64)
    exact, clash = duplicate_rows(ts_ns, tic_codes, vals)
    if exact.any():
        repaired["exact_duplicates_dropped"] = int(exact.sum())
        lose(exact, EXACT_DUPLICATE)
    if clash.any():
        dropped["conflicting_duplicates"] = int(clash.sum())
        lose(clash, "conflicting_duplicates")
    keep = ~(exact | clash)
    frame, ts_ns, tic_codes = frame[keep], ts_ns[keep], tic_codes[keep]

    if len(frame) == 0:
        raise FinpodError(
            f"{where}: no usable bars left after cleaning ({_summary(dropped)})",
            "each (timestamp, ticker) needs one row; fix the conflicting rows",
        )

    refuse_stray_rows(ts_ns, tic_codes, tic_names, frame.index.to_numpy(), df, where)
    refuse_stray_edges(ts_ns, tic_codes, tic_names, frame.index.to_numpy(), df, where)

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
        shift = np.int64(minutes) * 60_000_000_000
        if ORIGIN in df.columns:  # user files (a vendor API's label is its own)
            origin = df[ORIGIN].to_numpy()[frame.index.to_numpy()]
            refuse_mixed_bar_labels(
                local, tic_codes, [str(x) for x in tic_names], origin, bar_label, where
            )
        if bar_label == "auto":
            names_now = [str(x) for x in tic_names]
            is_end, by_label = bar_label_per_ticker(local, tic_codes, names_now, minutes, where)
            stamp = np.where(is_end[tic_codes], ts_ns - shift, ts_ns)
            if set(by_label) == {"end"}:
                report["bar_label"] = "end (shifted to bar start)"
            elif len(by_label) > 1:
                report["bar_label"] = (
                    f"per ticker: end (shifted to bar start) for {', '.join(by_label['end'])}; "
                    f"start for {', '.join(by_label['start'])}"
                )
        elif bar_label == "end":
            stamp = ts_ns - shift
    pos = np.searchsorted(grid_ns, stamp)
    pos_c = np.minimum(pos, len(grid_ns) - 1)
    on_grid = grid_ns[pos_c] == stamp
    if not daily and timezone != "UTC" and str(notes.get("input_timezone", "")).startswith("naive"):
        refuse_naive_utc(
            wall, frame.index.to_numpy(), on_grid, grid_ns, bar_label, minutes, where, timezone
        )
    if (~on_grid).any():
        dropped["outside_sessions"] = int((~on_grid).sum())
        lose(~on_grid, OUTSIDE_SESSIONS)
    if not on_grid.any():
        raise FinpodError(
            f"{where}: no bar falls on an exchange session of the {bar} grid",
            "check the timezone (--timezone), the bar size and the bar label",
        )
    lost = ticker_rule(df, tic, cause, where, drop_bad_tickers)
    if lost:
        report["tickers_dropped"] = lost
    keep_rows = on_grid & ~frame["tic"].isin(list(lost)).to_numpy(dtype=bool)
    if not keep_rows.any():
        raise FinpodError(
            f"{where}: every ticker was dropped ({'; '.join(f'{k}: {v}' for k, v in lost.items())})",
            "fix the input (the causes are named)",
        )
    frame = frame[keep_rows]
    t_idx = pos_c[keep_rows]
    n_idx, kept_names = pd.factorize(frame["tic"].to_numpy(), sort=True)
    names = [str(x) for x in kept_names]

    # Trim the grid to the span of kept bars (again below, once sparse tickers are gone).
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

    keep = sparse_tickers(
        observed, grid, names, min_bars, min_coverage, drop_bad_tickers, where, report
    )
    names = [n for n, k in zip(names, keep, strict=True) if k]
    observed = observed[:, keep]
    # The range is the span of the tickers kept: a dropped one never stretches it.
    alive = np.flatnonzero(observed.any(axis=1))
    t0, t1 = int(alive[0]), int(alive[-1]) + 1
    grid = grid[t0:t1]
    observed = observed[t0:t1]
    arrays = {k: v[t0:t1][:, keep] for k, v in arrays.items()}
    T = len(grid)
    first = observed.argmax(axis=0)
    last = T - 1 - observed[::-1].argmax(axis=0)

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


def _summary(d: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items()) or "nothing usable"
