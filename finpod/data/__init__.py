"""Data layer: sources, calendar cleaning, causal features, splits, dataset on disk.

The layer reads sources (:mod:`~finpod.data.sources`, one module each) → cleaning
(:mod:`~finpod.data.clean`, with :mod:`~finpod.data.bars`,
:mod:`~finpod.data.timestamps` and :mod:`~finpod.data.stages`) → features (:mod:`~finpod.data.features`) → dataset
(:mod:`~finpod.data.dataset`: :mod:`~finpod.data.splits`, :mod:`~finpod.data.manifest`,
:mod:`~finpod.data.store`), with :mod:`~finpod.data.benchmark` (causal index alignment),
:mod:`~finpod.data.universe` (membership, survivorship) and :mod:`~finpod.data.vendor` (file
formats) beside them.

Entry points: :func:`build_dataset` (source → dataset directory), :func:`load_split`
(dataset directory → :class:`MarketData` on a device), :func:`load_manifest` (or the typed :class:`Manifest`),
:func:`from_frame` (a long table of bars → :class:`MarketData`) and
:mod:`finpod.data.synthetic_market` (markets with a known answer).
"""

from finpod.data import synthetic_market
from finpod.data.benchmark import align_benchmark
from finpod.data.calendar import bars_per_year
from finpod.data.clean import Bars, clean_long
from finpod.data.dataset import (
    SPLITS,
    build_dataset,
    load_manifest,
    load_split,
    plan_splits,
    verify_dataset,
)
from finpod.data.features import FEATURES
from finpod.data.inmemory import bars_to_market, from_frame
from finpod.data.manifest import Manifest
from finpod.data.market import MarketData, periods_per_year
from finpod.data.synthetic_market import make_synthetic, oracle_weights

__all__ = [
    "FEATURES",
    "SPLITS",
    "Bars",
    "Manifest",
    "MarketData",
    "align_benchmark",
    "bars_per_year",
    "bars_to_market",
    "build_dataset",
    "clean_long",
    "from_frame",
    "load_manifest",
    "load_split",
    "make_synthetic",
    "oracle_weights",
    "periods_per_year",
    "plan_splits",
    "synthetic_market",
    "verify_dataset",
]
