"""In memory: cleaned :class:`~finpod.data.bars.Bars` → features → :class:`MarketData`,
with no dataset on disk (notebooks, tests, the synthetic generator).

Sits between features and the dataset module: it imports no source and no dataset code,
so anything may use it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.data.benchmark import align_benchmark
from finpod.data.calendar import TZ
from finpod.data.clean import Bars, clean_long
from finpod.data.feature_table import check_feature_request, read_feature_file, table_features
from finpod.data.features import FEATURES, compute_features
from finpod.data.liquidity import daily_liquidity
from finpod.data.market import MarketData
from finpod.data.user_features import user_feature


def market_features(
    bars: Bars,
    progress: Callable[[int], None] | None = None,
    checks: dict[str, Any] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """(T, N, F) float32 features of ``bars`` and their names: the built-in ones, then the
    user columns of ``bars.extra`` through :func:`finpod.data.user_features.user_feature`
    (what its checks found goes into ``checks``, by name, when given)."""
    extra = sorted(bars.extra)
    # The user columns are checked first: a refused one fails before the long computation.
    user = {name: user_feature(name, bars) for name in extra}
    # From the float32 prices the env trades on, whatever the stored precision: a float64
    # dataset and a float32 one of the same prices give the agent the same features.
    feats = compute_features(
        np.asarray(bars.close, dtype=np.float32),
        np.asarray(bars.high, dtype=np.float32),
        np.asarray(bars.low, dtype=np.float32),
        bars.timestamps,
        bars.bar,
        progress=progress,
        extra_slots=len(extra),
    )
    names = list(FEATURES)
    for k, name in enumerate(extra):
        feats[:, :, len(FEATURES) + k], found = user.pop(name)
        if checks is not None:
            checks[name] = found
        names.append(name)
    return feats, names


def _to_market(
    bars: Bars,
    features: np.ndarray,
    names: list[str],
    rows: slice,
    split: str,
    device: torch.device | str,
    benchmark: pd.Series | None,
) -> MarketData:
    def tens(a: np.ndarray, dtype=torch.float32) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a[rows])).to(dtype=dtype, device=device)

    open_ = np.nan_to_num(bars.open[rows], nan=0.0)
    close = np.nan_to_num(bars.close[rows], nan=0.0)
    # Over every bar, then cut: a split's first bars see the sessions before it.
    full_close = torch.from_numpy(np.nan_to_num(bars.close, nan=0.0).astype(np.float64))
    sigma, adv = daily_liquidity(
        full_close, torch.from_numpy(np.asarray(bars.volume, dtype=np.float64)), bars.bar
    )
    liquidity = torch.stack([sigma[rows], adv[rows]], dim=2).float().to(device)
    return MarketData(
        timestamps=bars.timestamps[rows],
        tickers=list(bars.tickers),
        open=torch.from_numpy(np.ascontiguousarray(open_, dtype=np.float32)).to(device),
        close=torch.from_numpy(np.ascontiguousarray(close, dtype=np.float32)).to(device),
        features=tens(features),
        feature_names=list(names),
        tradable=tens(bars.tradable, torch.bool),
        bar=bars.bar,
        split=split,
        benchmark=None if benchmark is None else benchmark.iloc[rows],
        buyable=None if bars.buyable is None else tens(bars.buyable, torch.bool),
        delisted=None if bars.delisted is None else tens(bars.delisted, torch.bool),
        volume=tens(bars.volume),
        liquidity=liquidity,
    )


def bars_to_market(
    bars: Bars, device: torch.device | str = "cpu", benchmark: pd.Series | None = None
) -> MarketData:
    """Compute features for ``bars`` and return all of it as one :class:`MarketData`."""
    feats, names = market_features(bars)
    return _to_market(bars, feats, names, slice(None), "all", device, benchmark)


def from_frame(
    df: pd.DataFrame,
    bar: str | None = "1d",
    *,
    device: torch.device | str = "cpu",
    benchmark: pd.Series | None = None,
    feature_columns: list[str] | str | None = None,
    feature_file: str | Path | None = None,
    **clean_opts: Any,
) -> MarketData:
    """A long table of bars → cleaned :class:`MarketData` with features, all bars, no splits.

    Args:
        df: columns ``date|timestamp, tic, open, high, low, close, volume`` (aliases
            accepted, see :func:`finpod.data.clean.clean_long`).
        bar: bar size (``None`` infers it).
        device: torch device of the tensors.
        benchmark: optional index close indexed by date/time; aligned causally (a daily
            level from its session's close on, see :mod:`finpod.data.benchmark`).
        feature_columns: user feature columns (:mod:`finpod.data.user_features`), each
            placed at its own bar and checked like every user feature; read from ``df``,
            or from ``feature_file`` when given (:mod:`finpod.data.feature_table`).
        feature_file: a CSV/Parquet table of ``timestamp|date, tic`` and those columns.
        clean_opts: passed to :func:`finpod.data.clean.clean_long` (``timezone``,
            ``min_coverage``, ``columns``, ``bar_label``, ``start``, ``end``…).
    """
    if feature_file is not None:
        check_feature_request(feature_file, feature_columns, "frame")
    bars, report = clean_long(df, bar, **clean_opts)
    if feature_columns:
        stamps = {
            "report": report,
            "timezone": clean_opts.get("timezone", TZ),
            "bar_label": clean_opts.get("bar_label", "auto"),
            "date_format": clean_opts.get("date_format"),
        }
        if feature_file is not None:
            bars.extra.update(read_feature_file(feature_file, feature_columns, bars, **stamps))
        else:
            cols = clean_opts.get("columns")
            placed = table_features(
                df, feature_columns, bars, where="frame", columns=cols, **stamps
            )
            bars.extra.update(placed)
    bench = (
        None
        if benchmark is None
        else align_benchmark(
            benchmark,
            bars.timestamps,
            bars.bar,
            calendar=clean_opts.get("calendar", "XNYS"),
            timezone=clean_opts.get("timezone", TZ),
        )
    )
    return bars_to_market(bars, device=device, benchmark=bench)


__all__ = ["bars_to_market", "from_frame", "market_features"]
