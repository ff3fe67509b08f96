#!/usr/bin/env python3
"""One agent's training speed by torch thread count, on an idle machine and beside busy
processes: the measurements behind :func:`finpod.agent_run.train_threads`.

Each measurement is a fresh Python process that builds the strategy's env and agent
(``strategies/ppo.toml`` by default, on the shipped sample dataset, built in a temporary
folder unless ``--data`` names one) and times ``agent.learn`` over ``--steps`` env steps
after one untimed rollout of warm-up. Thread counts: ``1``, ``2`` and ``default`` (what
torch inherits: no ``torch.set_num_threads`` and no ``OMP_NUM_THREADS``); ``--rule``
adds finpod's own choice. Conditions: ``idle`` (nothing started by the bench) and
``busy`` (``--busy`` processes spinning a Python loop each, started before and killed
after). Every count runs ``--repeats`` times, interleaved, and one JSON line per
(condition, threads) gives the median env steps per second with every repetition, the
thread count torch used, and the load average (``os.getloadavg``) before and after.

    python bench/threads.py [--steps 8192] [--repeats 3] [--busy 2] [--rule]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: A CPU-bound process: a Python busy loop (one core each).
SPIN = "while True:\n    pass\n"


def child(strategy: str, data: str, steps: int, threads: str) -> None:
    """Time ``agent.learn`` over ``steps`` env steps with ``threads`` torch threads and
    print ``{"threads": used, "env_steps_per_s": …}`` (the measured process)."""
    import torch

    if threads == "rule":
        from finpod.agent_run import train_threads

        torch.set_num_threads(train_threads(torch.device("cpu")))
    elif threads != "default":
        torch.set_num_threads(int(threads))
    from dataclasses import replace

    from finpod.agents import ALGORITHMS, make_agent
    from finpod.agents.cross_section import hparams_for_env
    from finpod.data import load_split
    from finpod.env import VecTradingEnv
    from finpod.strategy import load_strategy

    dev = torch.device("cpu")
    strategy = load_strategy(strategy)
    spec = strategy.train
    market = load_split(data, "train", device=dev)
    torch.manual_seed(spec.seed)
    env = VecTradingEnv(market, strategy.config, num_envs=spec.num_envs, seed=spec.seed, device=dev)
    strategy = replace(
        strategy, hparams=hparams_for_env(ALGORITHMS[strategy.algorithm][0], strategy.hparams, env)
    )
    agent = make_agent(strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, 0)
    agent.learn(env, spec.num_envs)  # warm-up: one rollout and its update, not timed
    start = time.perf_counter()
    agent.learn(env, steps)
    wall = time.perf_counter() - start
    print(json.dumps({"threads": torch.get_num_threads(), "env_steps_per_s": steps / wall}))


def measure(strategy: str, data: str, steps: int, threads: str) -> dict:
    """One measurement in a fresh process (``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS``
    removed, so ``default`` is torch's own choice)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(REPO)
    args = [sys.executable, __file__, "--child", threads, "--strategy", strategy, "--data", data]
    out = subprocess.run(
        [*args, "--steps", str(steps)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default=str(REPO / "strategies" / "ppo.toml"))
    parser.add_argument("--data", help="dataset directory (default: the sample, built here)")
    parser.add_argument("--steps", type=int, default=8192, help="timed env steps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="busy processes of 'busy'")
    parser.add_argument("--threads", default="1,2,default", help="counts, comma-separated")
    parser.add_argument("--rule", action="store_true", help="also finpod's own choice")
    parser.add_argument("--conditions", default="idle,busy")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.strategy, args.data, args.steps, args.child)
        return
    # SIGTERM unwinds as Ctrl-C does, so the busy processes are killed with the bench.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    counts = args.threads.split(",") + (["rule"] if args.rule else [])
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if data is None:
            sys.path.insert(0, str(REPO))
            from finpod.data import build_dataset

            data = str(build_dataset("sample", Path(tmp) / "sample"))
        for condition in args.conditions.split(","):
            spinners = []
            if condition == "busy":
                spinners = [
                    subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)
                ]
                time.sleep(2.0)  # the spinners are running before the first measurement
            try:
                load0 = os.getloadavg()[0]
                runs: dict[str, list[dict]] = {t: [] for t in counts}
                for _ in range(args.repeats):  # interleaved: drifting load hits every count
                    for t in counts:
                        runs[t].append(measure(args.strategy, data, args.steps, t))
                load1 = os.getloadavg()[0]
            finally:
                for proc in spinners:
                    proc.kill()
                    proc.wait()
            for t in counts:
                rates = [r["env_steps_per_s"] for r in runs[t]]
                row = {
                    "bench": "threads",
                    "condition": condition,
                    "busy_processes": len(spinners),
                    "threads": t,
                    "torch_threads": runs[t][0]["threads"],
                    "env_steps": args.steps,
                    "env_steps_per_s": round(statistics.median(rates), 1),
                    "repeats": [round(r, 1) for r in rates],
                    "load_before": round(load0, 2),
                    "load_after": round(load1, 2),
                    "cpus": os.cpu_count(),
                }
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
