#!/usr/bin/env python3
"""Env throughput: finpod's ``VecTradingEnv`` vs the FinRL and ElegantRL envs, same data.

For every num_envs × num_stocks it times ``env.step`` with uniform random actions in
[-1, 1]^N (a pre-drawn ring of 16 batches, as the peers' scripts do), after 5 untimed
warm-up steps; episodes are the whole series and envs auto-reset inside the timed loop.
In the same run it launches the peer scripts of ``--peers-dir`` (``bench_env_finrl.py``,
``bench_env_elegantrl.py --env vec`` and ``--env vmap``; ``vmap`` is the ElegantRL env that
acts on its actions, ``vec`` ignores them) with the peers' Python on the same CSV files,
and re-emits their results. One JSON line per measurement on stdout, with ``system``
(finpod | elegantrl | finrl), ``device``, ``num_envs``, ``num_stocks``,
``env_steps_per_s`` (wall clock), ``env_steps_per_cpu_s`` (per CPU-second of the
process: less sensitive to other processes on a shared machine) and
``foreign_cpu_frac`` (CPU used by other processes / (wall × cores)).

    python bench/env_throughput.py --data-dir ../.peers/data \\
        --peers-python "$FINPOD_PEERS_PYTHON" [--device cpu|cuda] [--threads 1] [--compile]

Data files: ``<data-dir>/gbm_n{N}_t2500_s0.csv`` (long table date, tic, open, high, low,
close, volume; made by the peers' ``gen_data.py``), or ``--synthetic BAR``: finpod's own
synthetic market of 2500 bars of that size (no peers then).

Execution controls (same meaning as the ``EnvConfig`` fields): ``--decision-interval``,
``--no-trade-band``, ``--band-target``, ``--partial-adjustment``, ``--turnover-penalty``,
``--flat-at-close`` (intraday ``--synthetic`` bars), ``--action-mode``; ``--controls`` turns
on a typical set at once (interval 5, band 0.02, partial 0.5, penalty 0.002; plus
flat-at-close on intraday bars). Each result line carries the ``env_config`` it ran with.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from meter import Meter  # noqa: E402  (bench/meter.py, next to this script)

from finpod.data.market import MarketData  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv  # noqa: E402

RING = 16
WARMUP = 5


def load_market(path: Path, device: torch.device) -> tuple[MarketData, float, str]:
    """The CSV as MarketData with finpod's features (or a minimal causal set)."""
    t0 = time.perf_counter()
    df = pd.read_csv(path)
    try:
        from finpod.data import from_frame

        market = from_frame(df, bar="1d", device=device)
        source = "finpod.data.from_frame"
    except ImportError:
        market = _minimal_market(df, device)
        source = "bench minimal features"
    return market, time.perf_counter() - t0, source


def _minimal_market(df: pd.DataFrame, device: torch.device) -> MarketData:
    wide = {c: df.pivot(index="date", columns="tic", values=c) for c in ("open", "close")}
    close = wide["close"].to_numpy(np.float64)
    logc = np.log(close)
    feats = []
    for lag in (1, 5, 20):
        r = np.zeros_like(logc)
        r[lag:] = logc[lag:] - logc[:-lag]
        feats.append(r * 10.0)
    f = np.stack(feats, axis=2).astype(np.float32)
    ts = pd.DatetimeIndex(pd.to_datetime(wide["close"].index)).tz_localize("America/New_York")
    return MarketData(
        timestamps=ts,
        tickers=list(wide["close"].columns),
        open=torch.tensor(wide["open"].to_numpy(np.float32), device=device),
        close=torch.tensor(close.astype(np.float32), device=device),
        features=torch.tensor(f, device=device),
        feature_names=["ret_1", "ret_5", "ret_20"],
        tradable=torch.ones(close.shape, dtype=torch.bool, device=device),
    )


def steps_for(num_envs: int, num_stocks: int, target: float) -> int:
    """Vector steps so one measurement takes roughly ``target`` seconds at ~1M steps/s."""
    return int(min(5000, max(20, target * 1e6 / max(1, num_envs))))


def env_config(args: argparse.Namespace, market: MarketData) -> EnvConfig:
    """The EnvConfig of the command line's execution-control flags."""
    from finpod.data.calendar import bar_minutes

    intraday = bar_minutes(market.bar) is not None
    values = {"action_mode": args.action_mode}
    if args.controls:
        values.update(
            decision_interval=5, no_trade_band=0.02, partial_adjustment=0.5, turnover_penalty=0.002
        )
        values["flat_at_close"] = intraday
    for key in ("decision_interval", "no_trade_band", "partial_adjustment", "turnover_penalty"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    if args.band_target is not None:
        values["band_target"] = args.band_target
    if args.flat_at_close:
        values["flat_at_close"] = True
    return EnvConfig(**values)


def synthetic_market(num_stocks: int, bar: str, device: torch.device) -> MarketData:
    from finpod.data.synthetic_market import make_synthetic

    return make_synthetic(num_stocks, 2500, bar=bar, regime="null", seed=0, device=device)


def bench_finpod(
    market: MarketData, num_envs: int, args: argparse.Namespace, device: torch.device
) -> dict:
    t0 = time.perf_counter()
    config = env_config(args, market)
    env = VecTradingEnv(
        market, config, num_envs=num_envs, seed=0, device=device, compile=args.compile
    )
    obs = env.reset()
    gen = torch.Generator().manual_seed(0)
    acts = [
        (torch.rand((num_envs, env.action_dim), generator=gen) * 2 - 1).to(device)
        for _ in range(RING)
    ]
    t1 = time.perf_counter()
    for i in range(WARMUP):  # with --compile the first step compiles
        env.step(acts[i % RING])
    env.reset()
    t2 = time.perf_counter()
    steps = args.steps or steps_for(num_envs, market.num_stocks, args.target_s)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    with Meter() as m:
        for i in range(steps):
            obs, reward, terminated, truncated, info = env.step(acts[i % RING])
        sync()
    total = steps * num_envs
    return {
        "system": "finpod",
        "env": "finpod.env.VecTradingEnv" + (" (torch.compile)" if args.compile else ""),
        "device": str(device),
        "num_envs": num_envs,
        "num_stocks": market.num_stocks,
        "n_days": market.num_bars,
        "obs_dim": env.obs_dim,
        "vector_steps": steps,
        "env_steps_per_s": round(total / m.wall, 2),
        "env_steps_per_cpu_s": round(total / max(m.cpu, 1e-9), 2),
        "us_per_vector_step": round(1e6 * m.wall / steps, 2),
        "seconds": round(m.wall, 4),
        "cpu_seconds": round(m.cpu, 4),
        "foreign_cpu_frac": round(m.foreign_frac, 4),
        "construct_s": round(t1 - t0, 3),
        "warmup_s": round(t2 - t1, 3),
        "torch_threads": torch.get_num_threads(),
        "compiled": bool(args.compile),
        "self_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "env_config": {k: v for k, v in config.to_dict().items() if v != EnvConfig().to_dict()[k]},
    }


def bench_interleaved(
    market: MarketData, num_envs: int, args: argparse.Namespace, device: torch.device
) -> dict:
    """Controls off vs on in one process, timed in alternating blocks (``--repeat`` each):
    both see the same machine load, so their ratio is steadier than two separate runs."""
    on_cfg = env_config(args, market)
    off_cfg = EnvConfig(action_mode=args.action_mode)
    envs = {
        name: VecTradingEnv(
            market, cfg, num_envs=num_envs, seed=0, device=device, compile=args.compile
        )
        for name, cfg in (("off", off_cfg), ("on", on_cfg))
    }
    gen = torch.Generator().manual_seed(0)
    acts = [
        (torch.rand((num_envs, market.num_stocks), generator=gen) * 2 - 1).to(device)
        for _ in range(RING)
    ]
    for env in envs.values():
        env.reset()
        for i in range(WARMUP):
            env.step(acts[i % RING])
    steps = args.steps or steps_for(num_envs, market.num_stocks, args.target_s)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rates: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for _ in range(max(1, args.repeat)):
        for name, env in envs.items():
            sync()
            with Meter() as m:
                for i in range(steps):
                    env.step(acts[i % RING])
                sync()
            rates[name].append((steps * num_envs / m.wall, steps * num_envs / max(m.cpu, 1e-9)))
    out = {
        "system": "finpod",
        "measurement": "controls_interleaved",
        "device": str(device),
        "num_envs": num_envs,
        "num_stocks": market.num_stocks,
        "bar": market.bar,
        "compiled": bool(args.compile),
        "env_config_on": {k: v for k, v in on_cfg.to_dict().items() if v != off_cfg.to_dict()[k]},
    }
    for name, values in rates.items():
        out[f"{name}_env_steps_per_s"] = round(statistics.median(v[0] for v in values), 1)
        out[f"{name}_env_steps_per_cpu_s"] = round(statistics.median(v[1] for v in values), 1)
    out["on_over_off_wall"] = round(out["on_env_steps_per_s"] / out["off_env_steps_per_s"], 3)
    out["on_over_off_cpu"] = round(
        out["on_env_steps_per_cpu_s"] / out["off_env_steps_per_cpu_s"], 3
    )
    return out


def peer_runs(csv: Path, num_stocks: int, args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(system, argv) of the peer measurements for one data file."""
    peers = Path(args.peers_dir)
    runs: list[tuple[str, list[str]]] = []
    for num_envs in args.num_envs:
        for kind in ("vec", "vmap"):
            # Per-step cost fitted to the peers' RESULTS.md (ms): vec ≈ 0.1·N·(1 + 1.2·E/1024),
            # vmap ≈ 0.13·N·(1 + 6·E/1024); aim at ~2 s (vec) / ~1 s (vmap) per run.
            if kind == "vec":
                budget, per_step_ms = 2.0, 0.1 * num_stocks * (1 + 1.2 * num_envs / 1024)
            else:
                budget, per_step_ms = 1.0, 0.13 * num_stocks * (1 + 6.0 * num_envs / 1024)
            steps = int(min(500, max(5, budget * 1000 / per_step_ms)))
            runs.append(
                (
                    "elegantrl",
                    [
                        str(peers / "bench_env_elegantrl.py"),
                        "--data",
                        str(csv),
                        "--env",
                        kind,
                        "--num-envs",
                        str(num_envs),
                        "--steps",
                        str(steps),
                        "--threads",
                        str(args.threads),
                        "--device",
                        args.device,
                    ],
                )
            )
    if 1 in args.num_envs:
        runs.append(
            (
                "finrl",
                [
                    str(peers / "bench_env_finrl.py"),
                    "--data",
                    str(csv),
                    "--steps",
                    str(args.finrl_steps),
                ],
            )
        )
    return runs


def run_peer(python: str, system: str, argv: list[str], num_stocks: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run(
        [python, *argv], capture_output=True, text=True, env=env, timeout=1800, check=False
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {
            "system": system,
            "num_stocks": num_stocks,
            "error": f"exit {proc.returncode}: {tail[0][:300]}",
            "argv": argv,
        }
    res = json.loads(lines[-1])
    head = {
        "system": system,
        "env": res.get("env", ""),
        "device": res.get("device", "cpu"),
        "num_envs": res.get("num_envs", res.get("n_envs", 1)),
        "num_stocks": res.get("n_stocks", num_stocks),
        "env_steps_per_s": res.get("env_steps_per_s"),
    }
    return {**head, **{k: v for k, v in res.items() if k not in head}}


def emit(result: dict) -> None:
    print(json.dumps(result, default=float), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data-dir", default=str(REPO.parent / ".peers" / "data"))
    ap.add_argument("--peers-dir", default=str(REPO.parent / "shared" / "peers"))
    ap.add_argument(
        "--peers-python",
        default=os.environ.get("FINPOD_PEERS_PYTHON", ""),
        help="python of the peers' venv (or $FINPOD_PEERS_PYTHON); empty = skip the peers",
    )
    ap.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    ap.add_argument("--num-stocks", type=int, nargs="+", default=[30, 100])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=0, help="vector steps (0 = by size)")
    ap.add_argument("--target-s", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--finrl-steps", type=int, default=300)
    ap.add_argument("--compile", action="store_true", help="torch.compile the finpod step")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="finpod measurements per config")
    ap.add_argument("--synthetic", default="", help="bar size: use finpod's synthetic market")
    ap.add_argument("--controls", action="store_true", help="typical execution controls on")
    ap.add_argument("--action-mode", default="shares", choices=["shares", "weights", "active"])
    ap.add_argument("--decision-interval", type=int, default=None)
    ap.add_argument("--no-trade-band", type=float, default=None)
    ap.add_argument("--band-target", default=None, choices=["edge", "target"])
    ap.add_argument("--partial-adjustment", type=float, default=None)
    ap.add_argument("--turnover-penalty", type=float, default=None)
    ap.add_argument("--flat-at-close", action="store_true")
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="time controls off and on (the flags above) alternately in one process",
    )
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    for num_stocks in args.num_stocks:
        csv = Path(args.data_dir) / f"gbm_n{num_stocks}_t2500_s0.csv"
        if args.synthetic:
            t0 = time.perf_counter()
            market = synthetic_market(num_stocks, args.synthetic, device)
            load_s, source = (
                time.perf_counter() - t0,
                f"finpod.data.synthetic_market {args.synthetic}",
            )
            csv = Path(f"synthetic_{args.synthetic}_n{num_stocks}")
        elif not csv.exists():
            emit({"system": "finpod", "num_stocks": num_stocks, "error": f"no data file {csv}"})
            continue
        else:
            market, load_s, source = load_market(csv, device)
        if args.interleave:
            for num_envs in args.num_envs:
                emit({**bench_interleaved(market, num_envs, args, device), "versions": versions})
            continue
        for num_envs in args.num_envs:
            for rep in range(args.repeat):
                res = bench_finpod(market, num_envs, args, device)
                res.update(load_features_s=round(load_s, 3), features=source, data=csv.name)
                res.update(rep=rep, versions=versions)
                emit(res)
        if args.skip_peers or not args.peers_python or args.synthetic:
            continue
        for system, peer_argv in peer_runs(csv, num_stocks, args):
            emit(run_peer(args.peers_python, system, peer_argv, num_stocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
