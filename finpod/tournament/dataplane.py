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

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import torch

from finpod.data import load_split, verify_dataset
from finpod.data.market import MarketData
from finpod.data.payload import market_from_payload
from finpod.data.payload import market_to_payload as to_payload
from finpod.errors import FinpodError

#: Splits a pod may receive. The backtest split is touched only by ``finpod backtest``.
POD_SPLITS = ("train", "validation")


def market_to_payload(market: MarketData) -> dict[str, Any]:
    """A train or validation split as numpy arrays for ``ray.put``
    (:func:`finpod.data.payload.market_to_payload`); the backtest split is refused."""
    if market.split not in POD_SPLITS:
        raise ValueError(f"the {market.split!r} split is never shipped to pods")
    return to_payload(market)


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
    feature_names: tuple[str, ...] = ()
    """Names of the F features of every split (the env's observation layout reads them)."""
    bar: str = "1d"
    """Bar length of the splits (``"1d"``, ``"5min"``)."""

    @classmethod
    def publish(cls, dataset_dir: str | Path, expected_hash: str | None = None) -> DataPlane:
        """Verify ``dataset_dir``'s hash, load train and validation, ``ray.put`` them.

        Raises :class:`~finpod.errors.FinpodError` when the files do not match their
        manifest, or the manifest's hash differs from ``expected_hash`` (a resumed run).
        Needs a connected Ray (``ray.init`` done).
        """
        digest = verified_hash(dataset_dir, expected_hash)
        refs: dict[str, Any] = {}
        nbytes: dict[str, int] = {}
        shapes: dict[str, tuple[int, int, int]] = {}
        names: tuple[str, ...] = ()
        bar = "1d"
        for split in POD_SPLITS:
            market = load_split(dataset_dir, split, device="cpu")
            names, bar = tuple(market.feature_names), market.bar
            payload = market_to_payload(market)
            del market
            refs[split] = ray.put(payload)
            nbytes[split] = payload_nbytes(payload)
            t, n, f = payload["features"].shape
            shapes[split] = (int(t), int(n), int(f))
            del payload
        _release_arrow_memory()
        return cls(digest, refs, nbytes, shapes, names, bar)

    def ref_list(self) -> list[Any]:
        """``[train_ref, validation_ref]``, nested in a list so Ray hands the pod refs, not
        values (the pod fetches them itself, inside its start-up)."""
        return [self.refs[s] for s in POD_SPLITS]


def verified_hash(dataset_dir: str | Path, expected_hash: str | None = None) -> str:
    """The content hash of ``dataset_dir`` recomputed from its files, never read from its
    manifest: a ``bars.parquet`` edited after the build fails here even though the
    manifest still carries the old hash. Raises :class:`~finpod.errors.FinpodError` when
    the files do not match the manifest, or the hash differs from ``expected_hash``."""
    digest = verify_dataset(dataset_dir)
    _release_arrow_memory()
    if expected_hash is not None and digest != expected_hash:
        raise FinpodError(
            f"dataset {dataset_dir} has hash {digest[:12]}, the run expects {expected_hash[:12]}",
            "pass the run's original dataset with --data",
        )
    return digest


def _release_arrow_memory() -> None:
    """Hand the memory Arrow cached while reading the dataset back to the system: after
    the splits are in the object store the driver needs none of it."""
    with contextlib.suppress(Exception):  # only a memory hint: it must never fail
        pa.default_memory_pool().release_unused()


def fetch_splits(refs: list[Any], device: torch.device | str) -> tuple[MarketData, MarketData]:
    """Inside a pod: (train, validation) :class:`MarketData` from :meth:`DataPlane.ref_list`."""
    train, validation = ray.get(list(refs))
    return market_from_payload(train, device), market_from_payload(validation, device)
