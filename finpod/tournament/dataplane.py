"""The data plane: the driver ships the train and validation splits through Ray's object store.

The driver loads the dataset once, checks its content hash against the manifest, and puts
each split's arrays in the object store (``ray.put`` of plain numpy arrays, which Ray
stores out of band). A pod actor receives the two ``ObjectRef``\\ s — never a path — and
:func:`market_from_payload` builds :class:`~finpod.data.market.MarketData` over them:

- CPU pods: ``torch.from_numpy`` over the object store's shared memory, so every pod on a
  node reads the same single copy (Ray pulls an object once per node). The arrays are
  read-only; the env builds its own lookup tables from them and never writes into them.
- GPU pods: one copy to the device, after which the shared pages are released.

The backtest split is never shipped: pods only train and score on validation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.data.market import MarketData

#: Splits a pod may receive. The backtest split is touched only by ``finpod backtest``.
POD_SPLITS = ("train", "validation")
#: Array fields of a payload: the tensors of :class:`MarketData`.
ARRAYS = ("open", "close", "features", "tradable", "buyable", "delisted")


def market_to_payload(market: MarketData) -> dict[str, Any]:
    """A split as a dict of numpy arrays and plain values, ready for ``ray.put``.

    Arrays: ``open``/``close`` (T, N) float32, ``features`` (T, N, F) float32,
    ``tradable``/``buyable``/``delisted`` (T, N) bool (the last two may be ``None``),
    ``timestamps`` (T,) int64 UTC nanoseconds, ``benchmark`` (T,) float64 or ``None``.
    """
    if market.split not in POD_SPLITS:
        raise ValueError(f"the {market.split!r} split is never shipped to pods")

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

    On CPU the tensors share memory with the (read-only) numpy arrays: nothing may write
    into them. ``torch.from_numpy`` warns about non-writable arrays; the warning is
    silenced here because read-only is the contract.
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
    )


def payload_nbytes(payload: dict[str, Any]) -> int:
    """Bytes of a payload's arrays (what one node holds of it in its object store)."""
    return int(sum(v.nbytes for v in payload.values() if isinstance(v, np.ndarray)))


@dataclass
class DataPlane:
    """The run's dataset in the object store: one ``ObjectRef`` per split pods may read."""

    dataset_hash: str
    """Content hash of the dataset, checked against the files when loaded."""
    refs: dict[str, Any]
    """Split name → ``ObjectRef`` of its payload (``train`` and ``validation`` only)."""
    nbytes: dict[str, int]
    """Split name → bytes of its arrays."""
    shapes: dict[str, tuple[int, int, int]]
    """Split name → (bars T, tickers N, features F)."""

    @classmethod
    def publish(cls, dataset_dir: str | Path, expected_hash: str | None = None) -> DataPlane:
        """Verify ``dataset_dir``'s hash, load train and validation, ``ray.put`` them.

        Raises :class:`~finpod.errors.FinpodError` when the files do not match their
        manifest, or the manifest's hash differs from ``expected_hash`` (a resumed run).
        Needs a connected Ray (``ray.init`` done).
        """
        import ray

        from finpod.data import load_split, verify_dataset
        from finpod.errors import FinpodError

        digest = verify_dataset(dataset_dir)
        _release_arrow_memory()
        if expected_hash is not None and digest != expected_hash:
            raise FinpodError(
                f"dataset {dataset_dir} has hash {digest[:12]}, the run expects {expected_hash[:12]}",
                "pass the run's original dataset with --data",
            )
        refs: dict[str, Any] = {}
        nbytes: dict[str, int] = {}
        shapes: dict[str, tuple[int, int, int]] = {}
        for split in POD_SPLITS:
            market = load_split(dataset_dir, split, device="cpu")
            payload = market_to_payload(market)
            del market
            refs[split] = ray.put(payload)
            nbytes[split] = payload_nbytes(payload)
            t, n, f = payload["features"].shape
            shapes[split] = (int(t), int(n), int(f))
            del payload
        _release_arrow_memory()
        return cls(digest, refs, nbytes, shapes)

    def ref_list(self) -> list[Any]:
        """``[train_ref, validation_ref]``, nested in a list so Ray hands the pod refs, not
        values (the pod fetches them itself, inside its start-up)."""
        return [self.refs[s] for s in POD_SPLITS]


def _release_arrow_memory() -> None:
    """Hand the memory Arrow cached while reading the dataset back to the system: after
    the splits are in the object store the driver needs none of it."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - only a memory hint
        pass


def fetch_splits(refs: list[Any], device: torch.device | str) -> tuple[MarketData, MarketData]:
    """Inside a pod: (train, validation) :class:`MarketData` from :meth:`DataPlane.ref_list`."""
    import ray

    train, validation = ray.get(list(refs))
    return market_from_payload(train, device), market_from_payload(validation, device)
