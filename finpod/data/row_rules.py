"""The rules one bad row must not break: a few rows far from the rest of their ticker (a
mistyped year), a ticker with too few bars, naive stamps written in UTC, and vendors that
label their bars differently. Each is named in one line, never silently turned into a
different dataset (see :mod:`finpod.data.clean`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ
from finpod.data.ticker_rule import ORIGIN
from finpod.errors import FinpodError

#: A ticker needs at least this many bars (one bar has no return, no feature and no fill).
MIN_TICKER_BARS = 2
#: Rows of a ticker this many calendar days away from the rest of its bars are strays...
STRAY_GAP_DAYS = 60
#: ...when they are at most this many rows...
STRAY_MAX_ROWS = 5
#: ...and at most this share of the ticker's rows (a real listing gap is neither).
STRAY_MAX_SHARE = 0.1


def refuse_stray_rows(
    ts_ns: np.ndarray,
    tic_codes: np.ndarray,
    tic_names: pd.Index,
    rows: np.ndarray,
    raw: pd.DataFrame,
    where: str,
) -> None:
    """Raise when a few rows of one ticker lie far from the rest of its own bars.

    ``ts_ns`` (n,) int64 UTC stamps and ``tic_codes`` (n,) codes into ``tic_names`` are
    the cleaned rows; ``rows`` their positions in the raw table ``raw`` (for the file
    name). A ticker's rows are cut at every gap above :data:`STRAY_GAP_DAYS`; a piece
    other than the largest with at most :data:`STRAY_MAX_ROWS` rows and
    :data:`STRAY_MAX_SHARE` of the ticker's rows is a stray (a typed year): kept, it would
    stretch the dataset's range and fill the ticker across the gap.
    """
    if len(ts_ns) < 2:
        return
    order = np.lexsort((ts_ns, tic_codes))
    ts, codes = ts_ns[order], tic_codes[order]
    gap = np.int64(STRAY_GAP_DAYS) * 86_400_000_000_000
    new_piece = np.r_[True, (np.diff(codes) != 0) | (np.diff(ts) > gap)]
    piece = np.cumsum(new_piece) - 1
    size = np.bincount(piece)
    piece_tic = codes[new_piece]
    per_tic = np.bincount(codes, minlength=len(tic_names))
    # The body of each ticker: its largest piece (the first of equals).
    body = np.full(len(tic_names), -1)
    for p in np.argsort(-size, kind="stable"):
        if body[piece_tic[p]] < 0:
            body[piece_tic[p]] = p
    stray = (
        (np.arange(len(size)) != body[piece_tic])
        & (size <= STRAY_MAX_ROWS)
        & (size <= STRAY_MAX_SHARE * per_tic[piece_tic])
    )
    if not stray.any():
        return
    p = int(np.flatnonzero(stray)[0])
    t = int(piece_tic[p])
    in_piece = np.flatnonzero(piece == p)
    b = np.flatnonzero(piece == body[t])

    def day(ns: int) -> str:
        return str(pd.Timestamp(ns, tz="UTC").tz_convert(TZ).date())

    dates = ", ".join(day(int(ts[k])) for k in in_piece[:3])
    body_span = f"{day(int(ts[b[0]]))} → {day(int(ts[b[-1]]))}"
    away = abs(int(ts[in_piece[0]]) - int(ts[b[0] if ts[in_piece[0]] < ts[b[0]] else b[-1]]))
    origin = ""
    if ORIGIN in raw.columns:
        origin = f" in {Path(str(raw[ORIGIN].iloc[int(rows[order[in_piece[0]]])])).name}"
    n = len(in_piece)
    raise FinpodError(
        f"{where}: {n} row{'s' if n != 1 else ''} of {tic_names[t]}{origin} ({dates}) "
        f"lie{'s' if n == 1 else ''} {away // 86_400_000_000_000} days away from its other "
        f"{len(b)} bars ({body_span}): a mistyped year?",
        "fix or remove the row(s), or leave them out with --start/--end",
    )


def refuse_naive_utc(
    wall: pd.Series,
    rows: np.ndarray,
    on_grid: np.ndarray,
    grid_ns: np.ndarray,
    bar_label: str,
    minutes: int,
    where: str,
    timezone: str,
) -> None:
    """Raise when naive intraday stamps read in ``timezone`` mostly miss the session but
    would fit it read as UTC: a vendor writing UTC without saying so. Lowering the
    coverage would then build prices hours late; ``--timezone UTC`` reads them right.
    ``wall`` are the raw naive stamps, ``rows`` the kept rows' positions in it."""
    if on_grid.mean() >= 0.5:
        return
    naive = wall.iloc[rows]
    as_utc = naive.dt.tz_localize("UTC", ambiguous="NaT", nonexistent="NaT")
    ns = as_utc.dt.tz_localize(None).to_numpy(dtype="datetime64[ns]").astype(np.int64)
    ok = as_utc.notna().to_numpy()
    shift = np.int64(minutes) * 60_000_000_000
    best = 0.0
    for delta in (0,) if bar_label == "start" else (shift,) if bar_label == "end" else (0, shift):
        pos = np.minimum(np.searchsorted(grid_ns, ns - delta), len(grid_ns) - 1)
        best = max(best, float((ok & (grid_ns[pos] == ns - delta)).mean()))
    if best >= 0.9 and best > 2 * on_grid.mean():
        raise FinpodError(
            f"{where}: {1 - on_grid.mean():.0%} of the naive stamps fall outside the "
            f"sessions read as {timezone} time, but {best:.0%} fit the sessions read as UTC",
            "the stamps look like UTC: pass --timezone UTC (do not lower --min-coverage)",
        )


def bar_label_per_ticker(
    local: pd.DatetimeIndex, codes: np.ndarray, names: list[str], minutes: int, where: str
) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Each ticker's bar label from its own stamps (New York wall time ``local``, ticker
    ``codes`` into ``names``): ``"end"`` when it hits the session close (16:00) and never
    the open (09:30), ``"start"`` when it hits the open; files of several vendors may
    differ. A ticker whose stamps show neither takes the label of the others when they
    agree; when they differ it cannot be told, and the input is refused.

    Returns ``(is_end, by_label)``: (len(names),) bool and ``{label: tickers}``.
    """
    tod = np.asarray(local.hour * 60 + local.minute)
    n = len(names)
    has_open = np.bincount(codes[tod == 9 * 60 + 30], minlength=n) > 0
    has_close = np.bincount(codes[tod == 16 * 60], minlength=n) > 0
    is_end = has_close & ~has_open
    known = has_open | has_close
    labels = {"end" if e else "start" for e, k in zip(is_end, known, strict=True) if k}
    unknown = [names[i] for i in np.flatnonzero(~known)]
    if unknown and len(labels) > 1:
        raise FinpodError(
            f"{where}: the files label their bars differently (some at the start, some at "
            f"the end), and the stamps of {', '.join(unknown[:5])} show neither the open "
            "(09:30) nor the close (16:00), so their label cannot be told",
            "build those tickers separately with --bar-label start or --bar-label end",
        )
    if unknown and labels == {"end"}:
        is_end = is_end | ~known
    by_label: dict[str, list[str]] = {}
    for i, e in enumerate(is_end):
        by_label.setdefault("end" if e else "start", []).append(names[i])
    return is_end, by_label


def sparse_tickers(
    observed: np.ndarray,
    grid: pd.DatetimeIndex,
    names: list[str],
    min_bars: int,
    min_coverage: float,
    drop_bad_tickers: bool,
    where: str,
    report: dict,
) -> np.ndarray:
    """(N,) bool: the tickers of the (T, N) ``observed`` grid to keep. A ticker with fewer
    than ``min_bars`` bars is an error naming it (dropped and listed in
    ``report["tickers_dropped"]`` with ``drop_bad_tickers``); one with bars on less than
    ``min_coverage`` of the bars between its first and last is dropped and listed."""
    T = len(grid)
    counts = observed.sum(axis=0)
    first = np.where(counts > 0, observed.argmax(axis=0), T)
    last = np.where(counts > 0, T - 1 - observed[::-1].argmax(axis=0), -1)
    life = np.maximum(last - first + 1, 1)
    coverage = counts / life
    too_few = counts < min_bars
    if too_few.any():
        i = int(np.flatnonzero(too_few)[0])
        when = ", ".join(str(grid[t].date()) for t in np.flatnonzero(observed[:, i])[:3])
        why = {
            names[k]: f"only {int(counts[k])} bar{'s' if counts[k] != 1 else ''} "
            f"(a ticker needs at least {min_bars})"
            for k in np.flatnonzero(too_few)
        }
        if not drop_bad_tickers:
            raise FinpodError(
                f"{where}: ticker {names[i]} has only {int(counts[i])} usable bar"
                f"{'s' if counts[i] != 1 else ''} ({when}); a ticker needs at least {min_bars}",
                "add its bars, remove it from the input, or pass --drop-bad-tickers to build "
                "without it",
            )
        report.setdefault("tickers_dropped", {}).update(why)
    low = (coverage < min_coverage) & ~too_few
    if low.any():
        report.setdefault("tickers_dropped", {}).update(
            {
                names[i]: f"{int(counts[i])} bars over {int(life[i])} sessions "
                f"({coverage[i]:.0%} coverage)"
                for i in np.flatnonzero(low)
            }
        )
    keep = ~(too_few | low)
    if not keep.any():
        dropped = report.get("dropped") or {}
        cause = f" after dropping rows ({', '.join(f'{k}: {v}' for k, v in dropped.items())})"
        raise FinpodError(
            f"{where}: every ticker is too sparse to use (< {min_coverage:.0%} coverage or "
            f"< {min_bars} bars){cause if dropped else ''}",
            "fix the rows named, or lower --min-coverage",
        )
    return keep
