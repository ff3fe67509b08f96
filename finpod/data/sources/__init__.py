"""The sources behind one interface: :func:`load_source` → :class:`LoadedSource`.

One module per source, each reading its input and handing cleaned bars (and, where there
is one, an index benchmark) to the dataset builder:

- :mod:`~finpod.data.sources.sample`: NASDAQ-100 daily bars 2010–2019 (95 members of
  2019-12-31) and the ^NDX index, shipped in ``data/sample``; works offline.
- :mod:`~finpod.data.sources.yahoo`: Yahoo Finance through yfinance, chunked within
  Yahoo's per-interval limits, cached per chunk on disk, with ^NDX fetched alongside.
- :mod:`~finpod.data.sources.alpaca`: Alpaca's market data through the ``alpaca-py`` SDK:
  years of 1-minute to daily bars, chunked, rate-paced, cached per chunk (the resume state),
  cleaned like ``files``.
- :mod:`~finpod.data.sources.files`: a directory (or one file) of vendor CSV/Parquet bars,
  with an optional ``--benchmark`` file of index levels.
- :mod:`~finpod.data.sources.synthetic`: the seeded generator of
  :mod:`finpod.data.synthetic_market`.

The data layer reads sources → cleaning (:mod:`finpod.data.clean`) → features
(:mod:`finpod.data.features`) → dataset (:mod:`finpod.data.dataset`); no source imports
the dataset module.
"""

from __future__ import annotations

import inspect
from typing import Any

from finpod.data.sources.alpaca import load_alpaca
from finpod.data.sources.files import load_files
from finpod.data.sources.loaded import LoadedSource
from finpod.data.sources.sample import (
    SAMPLE_DAILY,
    SAMPLE_INDEX,
    SAMPLE_SPLITS,
    SAMPLE_UNIVERSE,
    load_sample,
)
from finpod.data.sources.synthetic import load_synthetic
from finpod.data.sources.yahoo import YF_INTERVALS, YF_LIMITS, load_yfinance, plan_chunks
from finpod.data.universe import (
    MEMBERSHIP,
    SAMPLE_DIR,
    load_membership,
    membership_mask,
    nasdaq100_members,
)
from finpod.data.vendor import read_table
from finpod.errors import FinpodError

#: Source name → loader.
LOADERS = {
    "sample": load_sample,
    "yfinance": load_yfinance,
    "alpaca": load_alpaca,
    "files": load_files,
    "synthetic": load_synthetic,
}


def load_source(source: str, *, progress: Any = None, **opts: Any) -> LoadedSource:
    """Dispatch to the source's loader; options that do not apply to it are an error naming
    them."""
    fn = LOADERS.get(source)
    if fn is None:
        raise FinpodError(
            f"unknown source {source!r}", "use sample, yfinance, alpaca, files or synthetic"
        )
    params = inspect.signature(fn).parameters
    unknown = [k for k, v in opts.items() if k not in params and v is not None]
    if unknown:
        raise FinpodError(
            f"option(s) {', '.join(unknown)} do not apply to the {source} source",
            "see finpod download --help",
        )
    kwargs = {k: v for k, v in opts.items() if k in params}
    if "progress" in params:
        kwargs["progress"] = progress
    return fn(**kwargs)


__all__ = [
    "LOADERS",
    "MEMBERSHIP",
    "SAMPLE_DAILY",
    "SAMPLE_DIR",
    "SAMPLE_INDEX",
    "SAMPLE_SPLITS",
    "SAMPLE_UNIVERSE",
    "YF_INTERVALS",
    "YF_LIMITS",
    "LoadedSource",
    "load_alpaca",
    "load_files",
    "load_membership",
    "load_sample",
    "load_source",
    "load_synthetic",
    "load_yfinance",
    "membership_mask",
    "nasdaq100_members",
    "plan_chunks",
    "read_table",
]
