"""A split as plain numpy arrays and values: the form :class:`MarketData` takes in Ray's
object store (``ray.put`` stores numpy arrays out of band, and every reader on a node maps
the same single copy).

:func:`market_to_payload` writes it; :func:`market_from_payload` builds a
:class:`MarketData` over it: zero-copy on CPU (``torch.from_numpy`` over read-only shared
memory, so nothing may write into the tensors), one copy on a GPU.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.data.market import MarketData

#: Array fields of a payload: the tensors of :class:`MarketData`.
#: ``volume`` stays out: pods read the liquidity the env prices impact with, not volume.
ARRAYS = ("open", "close", "features", "tradable", "buyable", "delisted", "liquidity")


def market_to_payload(market: MarketData) -> dict[str, Any]:
    """``market`` as a dict of numpy arrays and plain values, ready for ``ray.put``.

    Arrays: ``open``/``close`` (T, N) float32, ``features`` (T, N, F) float32,
    ``tradable``/``buyable``/``delisted`` (T, N) bool (the last two may be ``None``),
    ``liquidity`` (T, N, 2) float32 (or ``None``),
    ``timestamps`` (T,) int64 UTC nanoseconds, ``benchmark`` (T,) float64 or ``None``.
    """

    def arr(t: torch.Tensor | None) -> np.ndarray | None:
        return None if t is None else np.ascontiguousarray(t.detach().cpu().numpy())

    payload: dict[str, Any] = {name: arr(getattr(market, name)) for name in ARRAYS}
    ts = market.timestamps
    payload["timestamps"] = np.asarray(ts.tz_convert("UTC").asi8 if ts.tz else ts.asi8)
    payload["tz"] = str(ts.tz) if ts.tz is not None else None
    bench = market.benchmark
    payload["benchmark"] = None if bench is None else bench.to_numpy(np.float64)
    payload["benchmark_name"] = None if bench is None else bench.name
    payload.update(
        tickers=list(market.tickers),
        feature_names=list(market.feature_names),
        bar=market.bar,
        split=market.split,
        bars_per_year=market.bars_per_year,
    )
    return payload


def market_from_payload(payload: dict[str, Any], device: torch.device | str = "cpu") -> MarketData:
    """:class:`MarketData` over a payload's arrays (zero-copy on CPU, one copy on a GPU).

    ``torch.from_numpy`` warns about non-writable arrays; the warning is silenced here
    because read-only is the contract: the env and the rollout never write into them.
    """
    device = torch.device(device)

    def tens(name: str) -> torch.Tensor | None:
        a = payload.get(name)
        if a is None:
            return None
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            t = torch.from_numpy(a)
        return t if device.type == "cpu" else t.to(device)

    ts = pd.DatetimeIndex(payload["timestamps"].astype("datetime64[ns]"))
    if payload.get("tz"):
        ts = ts.tz_localize("UTC").tz_convert(payload["tz"])
    bench = None
    if payload.get("benchmark") is not None:
        bench = pd.Series(payload["benchmark"], index=ts, name=payload.get("benchmark_name"))
    return MarketData(
        timestamps=ts,
        tickers=list(payload["tickers"]),
        open=tens("open"),
        close=tens("close"),
        features=tens("features"),
        feature_names=list(payload["feature_names"]),
        tradable=tens("tradable"),
        bar=payload["bar"],
        split=payload["split"],
        benchmark=bench,
        buyable=tens("buyable"),
        delisted=tens("delisted"),
        bars_per_year=payload.get("bars_per_year"),
        liquidity=tens("liquidity"),
    )
