"""Data-layer benchmarks: dataset build time and peak memory, feature speed vs FinRL.

Prints one JSON line per measurement with at least ``system``, ``bars``, ``seconds`` and
``peak_rss_mb``. Every measurement runs in its own subprocess, so ``peak_rss_mb`` is the
peak resident memory of that build alone (ru_maxrss of the child).

Measurements:

- ``build_sample``: the shipped NASDAQ-100 daily sample (offline).
- ``build_synthetic_1min_100x1y`` / ``…x5y``: a synthetic 100-ticker 1-minute market
  (1 year ≈ 9.8 M bars, 5 years ≈ 49 M bars) → cleaned grid, features, Parquet, manifest.
- ``features`` (system ``finpod`` and ``finrl``): technical indicators on the same daily
  long CSV (default the peers' ``gbm_n100_t2500_s0.csv``). FinRL's own
  ``FeatureEngineer`` runs in the peers' virtualenv through the peers' ``peer_common``;
  finpod is timed twice: the features alone (``features``) and cleaning + features from
  the same CSV (``clean_features``). ``speedup_per_bar`` compares seconds per bar.

Usage::

    python bench/data_build.py                      # everything (the 5-year build is heavy)
    python bench/data_build.py --skip-5y
    python bench/data_build.py --only features --peers-python /path/to/peers/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PEERS = REPO.parent / "shared" / "peers"


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _emit(rec: dict) -> None:
    rec.setdefault("host", platform.node())
    rec.setdefault("cpus", os.cpu_count())
    print(json.dumps(rec), flush=True)


# ----------------------------------------------------------------------------- children
def child_build(kind: str, out_root: str) -> None:
    sys.path.insert(0, str(REPO))
    from finpod.data import build_dataset, load_manifest

    out = Path(out_root) / kind
    if kind == "build_sample":
        args = {"source": "sample"}
    elif kind.startswith("build_synthetic_1min_100x"):
        years = float(kind.rsplit("x", 1)[1].rstrip("y"))
        args = {
            "source": "synthetic",
            "bar": "1min",
            "n_tickers": 100,
            "years": years,
            "regime": "alpha",
        }
    else:
        raise SystemExit(f"unknown build {kind}")
    source = args.pop("source")
    t0 = time.perf_counter()
    build_dataset(source, out, **args)
    secs = time.perf_counter() - t0
    man = load_manifest(out)
    bars = man["bars"] * len(man["tickers"])
    size = sum(p.stat().st_size for p in out.iterdir())
    _emit(
        {
            "system": "finpod",
            "measurement": kind,
            "bars": bars,
            "timestamps": man["bars"],
            "tickers": len(man["tickers"]),
            "seconds": round(secs, 3),
            "peak_rss_mb": round(_peak_rss_mb(), 1),
            "bars_per_s": round(bars / secs),
            "disk_mb": round(size / 2**20, 1),
        }
    )


def child_features(data: str, repeat: int) -> None:
    sys.path.insert(0, str(REPO))
    import pandas as pd

    from finpod.data.clean import clean_long
    from finpod.data.features import compute_features, ticker_features

    df = pd.read_csv(data, dtype={"date": str, "tic": str})
    bars, _ = clean_long(df, "1d", min_coverage=0.0)
    best_f = best_c = best_t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        ticker_features(bars.close, bars.high, bars.low, bars.bar)
        best_t = min(best_t, time.perf_counter() - t0)
        t0 = time.perf_counter()
        compute_features(bars.close, bars.high, bars.low, bars.timestamps, bars.bar)
        best_f = min(best_f, time.perf_counter() - t0)
        t0 = time.perf_counter()
        b2, _ = clean_long(df, "1d", min_coverage=0.0)
        compute_features(b2.close, b2.high, b2.low, b2.timestamps, b2.bar)
        best_c = min(best_c, time.perf_counter() - t0)
    n = len(df)
    common = {
        "system": "finpod",
        "bars": n,
        "data": Path(data).name,
        "repeat": repeat,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }
    _emit(
        {
            **common,
            "measurement": "features_same_set",
            "seconds": round(best_t, 4),
            "note": "FinRL's 8 indicators + log_return, no turbulence",
        }
    )
    _emit(
        {
            **common,
            "measurement": "features",
            "seconds": round(best_f, 4),
            "note": "10 features incl. log_return and turbulence, on the cleaned grid",
        }
    )
    _emit(
        {
            **common,
            "measurement": "clean_features",
            "seconds": round(best_c, 4),
            "note": "calendar cleaning + the same features from the long CSV",
        }
    )


FINRL_SNIPPET = r"""
import json, resource, sys, time
sys.path.insert(0, {peers!r})
import peer_common as pc
FeatureEngineer, _ = pc._import_finrl_preprocessors()
raw = pc.load_long({data!r})
best = float("inf")
for _ in range({repeat}):
    t0 = time.perf_counter()
    fe = FeatureEngineer(use_technical_indicator=True, tech_indicator_list=pc.INDICATORS,
                         use_vix=False, use_turbulence=False, user_defined_feature=False)
    fe.preprocess_data(raw.copy())
    best = min(best, time.perf_counter() - t0)
print(json.dumps({{"system": "finrl", "measurement": "features", "bars": len(raw), "seconds": round(best, 4),
  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "repeat": {repeat},
  "note": "FeatureEngineer(use_turbulence=False): 8 stockstats indicators"}}))
"""


# ----------------------------------------------------------------------------- parent
def _run_child(args: list[str], env_python: str = sys.executable) -> list[dict]:
    res = subprocess.run([env_python, *args], capture_output=True, text=True)
    if res.returncode != 0:
        print(
            json.dumps({"error": " ".join(args[:3]), "stderr": res.stderr[-2000:]}), file=sys.stderr
        )
        return []
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["builds", "features"], help="run one group only")
    ap.add_argument("--skip-5y", action="store_true", help="skip the 49 M-bar 5-year minute build")
    ap.add_argument(
        "--peers-dir",
        default=str(DEFAULT_PEERS),
        help="the peers benchmark harness (peer_common.py)",
    )
    ap.add_argument(
        "--peers-python", default=None, help="python of the peers' virtualenv (FinRL installed)"
    )
    ap.add_argument("--data", default=None, help="daily long CSV for the feature comparison")
    ap.add_argument("--repeat", type=int, default=3, help="feature timings: best of this many")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        kind = args.child[0]
        if kind == "features":
            child_features(args.child[1], int(args.child[2]))
        else:
            child_build(kind, args.child[1])
        return

    me = str(Path(__file__).resolve())
    if args.only in (None, "builds"):
        with tempfile.TemporaryDirectory(prefix="fpbench_") as tmp:
            kinds = ["build_sample", "build_synthetic_1min_100x1y"] + (
                [] if args.skip_5y else ["build_synthetic_1min_100x5y"]
            )
            for kind in kinds:
                for rec in _run_child([me, "--child", kind, tmp]):
                    _emit(rec)
    if args.only in (None, "features"):
        data = args.data or str(
            Path(args.peers_dir).parent.parent / ".peers" / "data" / "gbm_n100_t2500_s0.csv"
        )
        if not Path(data).exists():
            print(
                json.dumps({"error": f"feature data {data} not found; pass --data"}),
                file=sys.stderr,
            )
            return
        fin = _run_child([me, "--child", "features", data, str(args.repeat)])
        for rec in fin:
            _emit(rec)
        peers_python = args.peers_python or str(
            Path(args.peers_dir).parent.parent / ".peers" / "venv" / "bin" / "python"
        )
        if not Path(peers_python).exists():
            print(
                json.dumps(
                    {"error": f"peers python {peers_python} not found; pass --peers-python"}
                ),
                file=sys.stderr,
            )
            return
        code = FINRL_SNIPPET.format(
            peers=str(Path(args.peers_dir).resolve()),
            data=str(Path(data).resolve()),
            repeat=args.repeat,
        )
        finrl = _run_child(["-c", code], env_python=peers_python)
        for rec in finrl:
            _emit(rec)
        if fin and finrl:
            f_sec = finrl[0]["seconds"] / finrl[0]["bars"]
            for rec in fin:
                speed = f_sec / (rec["seconds"] / rec["bars"])
                _emit(
                    {
                        "system": "finpod_vs_finrl",
                        "measurement": f"speedup_per_bar_{rec['measurement']}",
                        "bars": rec["bars"],
                        "seconds": rec["seconds"],
                        "peak_rss_mb": rec["peak_rss_mb"],
                        "speedup_per_bar": round(speed, 1),
                    }
                )


if __name__ == "__main__":
    main()
