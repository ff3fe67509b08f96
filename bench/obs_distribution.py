#!/usr/bin/env python3
"""Observation slices per split: mean, std and quantiles of every bar-only slice.

Builds (or reuses) a dataset and prints one JSON line per (split, slice) with the
statistics of :func:`finpod.env.diagnostics.observation_stats`, plus the old split-anchored
``log(close / first close of the split)`` as ``prices_anchored`` for comparison.

    python bench/obs_distribution.py [--data-dir DIR] [--source sample]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from finpod.data import load_manifest, load_split  # noqa: E402
from finpod.env.diagnostics import observation_stats  # noqa: E402
from finpod.pipeline import ensure_dataset  # noqa: E402


def anchored(market) -> dict:
    close = market.close.double()
    listed = close > 0
    first = torch.where(listed.any(0), listed.to(torch.int8).argmax(0), 0)
    ref = close.gather(0, first.unsqueeze(0))
    v = torch.log(torch.where(listed, close, ref) / ref)[listed]
    q = torch.quantile(v, torch.tensor([0.05, 0.5, 0.95], dtype=v.dtype)).tolist()
    return {"mean": float(v.mean()), "std": float(v.std()), "p5": q[0], "p50": q[1], "p95": q[2]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data-dir", default=str(Path(tempfile.gettempdir()) / "finpod-sample"))
    ap.add_argument("--source", default="sample")
    args = ap.parse_args(argv)
    path = ensure_dataset(args.data_dir, source=args.source)
    splits = [s for s in ("train", "validation", "backtest") if s in load_manifest(path)["splits"]]
    for split in splits:
        market = load_split(path, split)
        stats = observation_stats(market)
        for name, row in stats.iterrows():
            line = {
                "split": split,
                "slice": name,
                **{k: round(float(v), 4) for k, v in row.items()},
            }
            print(json.dumps(line), flush=True)
        row = {k: round(v, 4) for k, v in anchored(market).items()}
        print(json.dumps({"split": split, "slice": "prices_anchored", **row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
