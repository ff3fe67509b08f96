"""Reference portfolios of the benchmark-relative (``"active"``) action mode.

A reference is a table of weights ``(T, N)`` float64 over a market's bars: the weights a
passive account re-targets at each decision bar (``EnvConfig.reference``). Everything here
is built once per (market, config) on the host side of :func:`finpod.env.tables.build_tables`
and reads bar ``t`` (and earlier bars) only for row ``t``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from finpod.data.calendar import TZ, bar_minutes
from finpod.data.market import MarketData
from finpod.env.config import EQUAL_WEIGHT, EnvConfig
from finpod.env.prices import mark_prices
from finpod.errors import FinpodError

#: Tolerance on a reference file's row sums (weights may sum to 1 up to rounding).
SUM_TOLERANCE = 1e-6


def eligible_names(market: MarketData) -> torch.Tensor:
    """(T, N) bool: names the reference may hold at each bar (tradable, a valid close, and
    buyable where the market says which names are buyable): point in time."""
    close = market.close.to(torch.float64)
    ok = market.tradable.to(torch.bool) & torch.isfinite(close) & (close > 0)
    if market.buyable is not None:
        ok &= market.buyable.to(torch.bool)
    return ok.cpu()


def reference_weights(market: MarketData, config: EnvConfig) -> torch.Tensor:
    """(T, N) float64 host tensor of the reference's target weights at each bar.

    ``"equal_weight"``: 1/n on the n eligible names, restored at each session's first bar;
    for intraday bars the weights drift with the marks inside a session (a buy-and-hold
    within the session, so holding the reference costs no intraday trading). A file: its
    rows as of each bar, weight on ineligible names spread over the eligible ones in
    proportion (a row's total is kept when any of its names is eligible).
    """
    ok = eligible_names(market)
    if config.reference == EQUAL_WEIGHT:
        w = ok.to(torch.float64)
        w = w / w.sum(1, keepdim=True).clamp(min=1.0)
        return _drift_within_sessions(market, w, ok)
    raw = torch.as_tensor(_file_rows(config.reference, market), dtype=torch.float64)
    total = raw.sum(1, keepdim=True)
    kept = raw * ok
    kept_sum = kept.sum(1, keepdim=True)
    return torch.where(kept_sum > 0, kept * total / kept_sum.clamp(min=1e-300), kept)


def _drift_within_sessions(market: MarketData, w: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    if bar_minutes(market.bar) is None or market.num_bars < 2:
        return w
    dates = pd.DatetimeIndex(market.timestamps).tz_convert(TZ).normalize()
    codes = torch.as_tensor(pd.factorize(dates)[0])
    first = torch.ones(len(codes), dtype=torch.bool)
    first[1:] = codes[1:] != codes[:-1]
    rows = torch.arange(len(codes))
    start = torch.where(first, rows, torch.zeros_like(rows)).cummax(0).values
    mark = mark_prices(market.close.to(torch.float64).cpu(), market.tradable.cpu().to(torch.bool))
    base = mark[start]
    rel = torch.where(base > 0, mark / base.clamp(min=1e-300), torch.zeros_like(mark))
    drifted = w[start] * rel * ok
    total = drifted.sum(1, keepdim=True)
    return torch.where(total > 0, drifted / total.clamp(min=1e-300), w)


def _file_rows(path: str, market: MarketData) -> np.ndarray:
    """(T, N) weights of a reference file as of each bar of ``market`` (validated)."""
    frame = load_reference_file(path, market.tickers)
    bars = pd.DatetimeIndex(market.timestamps)
    if bars[0] < frame.index[0]:
        raise FinpodError(
            f"reference file {path} starts at {frame.index[0]}, after the {market.split} "
            f"split's first bar {bars[0]}",
            "add a row at or before the split's first bar",
        )
    rows = frame.index.get_indexer(bars, method="ffill")
    wide = frame.reindex(columns=list(market.tickers), fill_value=0.0).to_numpy(np.float64)
    return wide[rows]


def load_reference_file(path: str, tickers: Sequence[str] | None = None) -> pd.DataFrame:
    """A reference weights file as a frame (index: tz-aware timestamps, New York; columns:
    tickers; weights ≥ 0, rows summing to ≤ 1). With ``tickers`` (the dataset's), a column
    naming any other ticker is refused. Raises :class:`FinpodError` in one line."""
    p = Path(path)
    if not p.is_file():
        raise FinpodError(f"reference file {path} not found", "check env.reference")
    frame = _load(str(p.resolve()), os.stat(p).st_mtime_ns)
    known = set(frame.columns if tickers is None else tickers)
    unknown = [c for c in frame.columns if c not in known]
    if unknown:
        raise FinpodError(
            f"reference file {path} names tickers not in the dataset: {', '.join(unknown[:5])}",
            "drop those columns or rebuild the dataset with them",
        )
    return frame


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path) if path.lower().endswith(".csv") else pd.read_parquet(path)
    except Exception as err:  # a parser's own error, in one line
        raise FinpodError(
            f"cannot read reference file {path}: {str(err).splitlines()[0]}",
            "write a CSV/Parquet file with a timestamp column and one column per ticker",
        ) from err
    _refuse_repeated_columns(path, frame)
    key = next((c for c in frame.columns if str(c).lower() in ("timestamp", "date")), None)
    if key is None:
        raise FinpodError(
            f"reference file {path} has no 'timestamp' or 'date' column",
            "name the first column timestamp (or date) and add one column per ticker",
        )
    try:
        stamps = pd.DatetimeIndex(pd.to_datetime(frame.pop(key)))
    except (ValueError, TypeError) as err:
        raise FinpodError(
            f"reference file {path}: column {key!r} holds values that are not dates",
            "use ISO dates such as 2020-01-02",
        ) from err
    stamps = stamps.tz_localize(TZ) if stamps.tz is None else stamps.tz_convert(TZ)
    frame.index = stamps
    frame.columns = [str(c) for c in frame.columns]
    if frame.shape[1] == 0 or len(frame) == 0:
        raise FinpodError(f"reference file {path} has no weights", "add tickers and rows")
    if not frame.index.is_monotonic_increasing or frame.index.has_duplicates:
        raise FinpodError(
            f"reference file {path}: timestamps are not strictly increasing",
            "sort the rows by time and keep one row per time",
        )
    try:
        values = frame.to_numpy(np.float64)
    except (ValueError, TypeError) as err:
        raise FinpodError(
            f"reference file {path} holds a weight that is not a number", "use numbers only"
        ) from err
    if not np.isfinite(values).all():
        raise FinpodError(
            f"reference file {path} has an empty or non-finite weight",
            "write 0 for a name the reference does not hold",
        )
    if (values < 0).any():
        raise FinpodError(
            f"reference file {path} has a negative weight", "reference weights are long only"
        )
    sums = values.sum(1)
    if (sums > 1.0 + SUM_TOLERANCE).any():
        at = frame.index[int(np.argmax(sums))]
        raise FinpodError(
            f"reference file {path}: weights at {at} sum to {sums.max():.4f} > 1",
            "weights are fractions of the account; the rest is cash",
        )
    return frame.astype(np.float64)


def _refuse_repeated_columns(path: str, frame: pd.DataFrame) -> None:
    """A ticker given two columns is one line: pandas' CSV reader would rename the second
    (``AAA.1``), and the message would then name a ticker the file does not hold."""
    if path.lower().endswith(".csv"):
        header = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0].fillna("")
        names = [str(c) for c in header]
    else:
        names = [str(c) for c in frame.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FinpodError(
            f"reference file {path} gives ticker {twice[0]!r} more than one column",
            "keep one column per ticker",
        )
