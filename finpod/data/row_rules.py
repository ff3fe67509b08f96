"""The rules one bad row must not break: a few rows far from the rest of their ticker (a
mistyped year), a ticker with too few bars, naive stamps written in UTC, and vendors that
label their bars differently. Each is named in one line, never silently turned into a
different dataset (see :mod:`finpod.data.clean`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.calendar import TZ
from finpod.data.ticker_rule import ORIGIN, row_place
from finpod.errors import FinpodError

#: A ticker needs at least this many bars (one bar has no return, no feature and no fill).
MIN_TICKER_BARS = 2
#: Rows of a ticker this many calendar days away from the rest of its bars are strays...
STRAY_GAP_DAYS = 60
#: ...when they are at most this many rows...
STRAY_MAX_ROWS = 5
#: ...and at most this share of the ticker's rows (a real listing gap is neither).
STRAY_MAX_SHARE = 0.1
#: Calendar days without a bar of any ticker before the data's last (or after its first)
#: few rows, all of one ticker, that make those rows a mistyped date rather than the
#: range's end: longer than any market closure (the longest, in 2001: 7 days bar to bar).
EDGE_GAP_DAYS = 7
#: A stamp written like a date (``2024-13-01``, ``2024/02/30 10:00``, ``20241301``): when
#: it cannot be read it is a typo, not a junk line.
_DATE_SHAPED = r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[ T].*)?|\d{8}(?:\d{6})?"
_DAY_NS = 86_400_000_000_000


def _day(ns: int) -> str:
    return str(pd.Timestamp(ns, tz="UTC").tz_convert(TZ).date())


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

    dates = ", ".join(_day(int(ts[k])) for k in in_piece[:3])
    body_span = f"{_day(int(ts[b[0]]))} → {_day(int(ts[b[-1]]))}"
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


def refuse_impossible_dates(
    values: pd.Series, wall: pd.Series, raw: pd.DataFrame, where: str
) -> None:
    """Raise naming the first stamp written like a date that is none (``2024-13-01``,
    ``2025-21-03``: a mistyped month or day). Dropped as unreadable it would leave a hole,
    or read another way a bar on another date. ``values`` are the raw stamps of ``raw``'s
    rows, ``wall`` their parsed wall times (NaT where unreadable)."""
    unread = wall.isna().to_numpy(dtype=bool) & values.notna().to_numpy(dtype=bool)
    if not unread.any():
        return
    text = values[unread].astype("string").str.strip()
    shaped = text.str.fullmatch(_DATE_SHAPED).fillna(False).to_numpy(dtype=bool)
    if not shaped.any():
        return
    row = int(np.flatnonzero(unread)[np.flatnonzero(shaped)[0]])
    more = f" ({int(shaped.sum())} stamps like it)" if shaped.sum() > 1 else ""
    raise FinpodError(
        f"{where}: {row_place(raw, row)}: timestamp {str(values.iloc[row])[:40]!r} is not a "
        f"real date or time{more}: a mistyped month or day?",
        "fix the stamp to YYYY-MM-DD[ HH:MM], or remove the row",
    )


def refuse_stray_edges(
    ts_ns: np.ndarray,
    tic_codes: np.ndarray,
    tic_names: pd.Index,
    rows: np.ndarray,
    raw: pd.DataFrame,
    where: str,
) -> None:
    """Raise when a ticker's few last (or first) rows, at most :data:`STRAY_MAX_ROWS`, lie
    more than :data:`EDGE_GAP_DAYS` after (before) every bar of the other tickers, while
    the rest of its rows lie among theirs: a month typed wrong at the end (2024-07-28 for
    2024-06-28). Kept, it would stretch the range past every other ticker's end and read
    them all as delisted.

    Arguments as :func:`refuse_stray_rows`; needs two tickers (one alone says nothing of
    where the range ends).
    """
    n_tic = len(tic_names)
    if n_tic < 2 or len(ts_ns) < 2:
        return
    codes = tic_codes.astype(np.int64)
    for side in ("after", "before"):
        sign = 1 if side == "after" else -1
        t_ns = sign * ts_ns  # "after" in these units: later for the end, earlier for the start
        edge = np.full(n_tic, np.iinfo(np.int64).min)
        np.maximum.at(edge, codes, t_ns)
        t = int(np.argmax(edge))
        others = int(np.delete(edge, t).max())
        beyond = (codes == t) & (t_ns > others)
        k = int(beyond.sum())
        inside = int((codes == t).sum()) - k
        gap = int(t_ns[beyond].min()) - others if k else 0
        if not (0 < k <= STRAY_MAX_ROWS and inside > 0 and gap > EDGE_GAP_DAYS * _DAY_NS):
            continue
        at = np.flatnonzero(beyond)
        first = int(at[np.argmin(t_ns[at])])
        stamps = sorted(int(x) for x in ts_ns[at])
        dates = ", ".join(_day(x) for x in stamps[:3])
        which = "last" if side == "after" else "first"
        place = row_place(raw, int(rows[first]))
        rows_of = (
            f"the data's {which} row ({tic_names[t]}, {place}: {dates}) lies"
            if k == 1
            else f"the data's {which} {k} rows, all of {tic_names[t]} ({place}: {dates}), lie"
        )
        raise FinpodError(
            f"{where}: {rows_of} {gap // _DAY_NS} days {side} every bar of the other tickers "
            f"({which}: {_day(int(sign * others))}): a mistyped month?",
            f"fix or remove the row{'s' if k != 1 else ''}, or cut "
            f"{'them' if k != 1 else 'it'} off with {'--end' if side == 'after' else '--start'}",
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


def refuse_mixed_bar_labels(
    local: pd.DatetimeIndex,
    codes: np.ndarray,
    names: list[str],
    origin: np.ndarray | None,
    bar_label: str,
    where: str,
) -> None:
    """Raise when the files of one ticker label their bars differently, or a file's stamps
    contradict a declared ``bar_label``: read as one, that file's bars would move by one.

    ``local`` are the rows' New York wall times, ``codes`` their ticker codes into
    ``names``, ``origin`` the file of each row (None: one input). A file labels at the start
    when its stamps hit the open (09:30), at the end when they hit the close (16:00) and
    not the open (as :func:`bar_label_per_ticker` reads a ticker); a declared label is
    contradicted only by a file that hits one of the two and not the other.
    """
    tod = np.asarray(local.hour * 60 + local.minute)
    file_codes, files = (
        (np.zeros(len(codes), dtype=np.int64), pd.Index([""]))
        if origin is None
        else pd.factorize(origin)
    )
    n_files = len(files)
    pair = codes.astype(np.int64) * n_files + file_codes
    size = len(names) * n_files
    has_open = np.bincount(pair[tod == 9 * 60 + 30], minlength=size) > 0
    has_close = np.bincount(pair[tod == 16 * 60], minlength=size) > 0

    def file_of(p: int) -> str:
        name = Path(str(files[p % n_files])).name
        return f"{name} ({names[p // n_files]})" if name else names[p // n_files]

    if bar_label in ("start", "end"):
        other = "end" if bar_label == "start" else "start"
        wrong = (has_close & ~has_open) if bar_label == "start" else (has_open & ~has_close)
        if wrong.any():
            p = int(np.flatnonzero(wrong)[0])
            hits = "16:00 and never 09:30" if other == "end" else "09:30 and never 16:00"
            raise FinpodError(
                f"{where}: --bar-label {bar_label}, but the stamps of {file_of(p)} label "
                f"bars at the {other} (they reach {hits}): its bars would move by one",
                "pass --bar-label auto to read each file's label from its stamps, or make the "
                "files agree",
            )
        return
    at_end = (has_close & ~has_open).reshape(len(names), n_files)
    at_start = has_open.reshape(len(names), n_files)
    mixed = np.flatnonzero(at_end.any(axis=1) & at_start.any(axis=1))
    if len(mixed):
        t = int(mixed[0])
        start = file_of(t * n_files + int(np.flatnonzero(at_start[t])[0]))
        end = file_of(t * n_files + int(np.flatnonzero(at_end[t])[0]))
        raise FinpodError(
            f"{where}: the files of {names[t]} label their bars differently: {start} at the "
            f"start (its stamps reach 09:30), {end} at the end (16:00 and never 09:30); read "
            "as one ticker, the bars of one of them would move by one",
            "shift one file's stamps by one bar so both agree, or build the files "
            "separately with --bar-label start or --bar-label end",
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


def far_pieces(observed: np.ndarray, grid: pd.DatetimeIndex) -> str | None:
    """``"90 days apart (80 bars 2019-01-02 → 2019-04-29, 8 bars 2019-07-29 → …)"`` when
    the (T,) ``observed`` bars of one ticker on ``grid`` have a gap of more than
    :data:`STRAY_GAP_DAYS` days (far rows too many for :func:`refuse_stray_rows` to call
    strays), else None."""
    at = np.flatnonzero(observed)
    if len(at) < 2:
        return None
    ns = grid[at].as_unit("ns").asi8
    k = int(np.argmax(np.diff(ns)))
    days = int((ns[k + 1] - ns[k]) // _DAY_NS)
    if days <= STRAY_GAP_DAYS:
        return None

    def span(a: int, b: int) -> str:
        return f"{b - a + 1} bar{'s' if b > a else ''} {grid[at[a]].date()} → {grid[at[b]].date()}"

    return f"{days} days apart ({span(0, k)}, {span(k + 1, len(at) - 1)})"


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
    ``min_coverage`` of the bars between its first and last is dropped and listed, unless
    its bars lie in pieces far apart (:func:`far_pieces`: far rows too many for strays, a
    relisting or a mistyped year): that is an error naming it, as a too-short ticker is
    (dropped and listed with ``drop_bad_tickers``)."""
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
        why = {
            names[i]: f"{int(counts[i])} bars over {int(life[i])} sessions "
            f"({coverage[i]:.0%} coverage)"
            for i in np.flatnonzero(low)
        }
        for i in np.flatnonzero(low):
            split = far_pieces(observed[:, i], grid)
            if split is None:
                continue
            if not drop_bad_tickers:
                raise FinpodError(
                    f"{where}: ticker {names[i]} would vanish: its bars lie in two pieces "
                    f"{split}, so they cover {coverage[i]:.0%} of the sessions from its first "
                    f"bar to its last (< --min-coverage {min_coverage:g})",
                    "fix or remove the far rows, keep one piece with --start/--end, lower "
                    "--min-coverage to keep both, or pass --drop-bad-tickers to build without it",
                )
            why[names[i]] += f": bars in two pieces {split}"
        report.setdefault("tickers_dropped", {}).update(why)
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
