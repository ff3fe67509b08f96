#!/usr/bin/env python3
"""Off-policy learner throughput at a tournament pod's settings (SAC, TD3).

A pod of ``strategies/quickstart.toml`` trains one learner on ``train.num_envs`` envs of
the daily NASDAQ-100 sample with one torch thread per CPU of the pod (``cpus_per_pod``),
``gradient_steps`` updates per vector step on minibatches of ``batch_size`` (SAC draws
256 or 512; the default here is the larger), the strategy's ``buffer_size`` and the
algorithm's default widths. This script measures that learner after its random-action
warm-up: env steps collected **and trained on** per second, with the amount of learning
stated beside it:

- ``updates_per_env_step``: gradient steps per env step collected;
- ``samples_per_env_step``: ``updates_per_env_step × batch_size`` (the replay ratio;
  the update-to-data ratio that a faster configuration must keep to be comparable);
- ``ms_per_update`` and ``foreign_cpu_frac`` (share of the machine other processes used
  while timing: 0.5 = one of two cores busy elsewhere).

Each measurement runs in a fresh process. ``--tree LABEL=DIR`` (repeatable) measures the
``finpod`` package found in ``DIR`` (e.g. an exported older commit) beside this checkout,
alternating trees within each repetition; ``--bf16`` adds this checkout with its
updates' matrix products in bfloat16 (``OffPolicyAgent.update_autocast``). The summary
reports medians over ``--reps``.

    python bench/offpolicy.py --algos sac,td3 --reps 3 \\
        [--tree before=/path/to/old/tree] [--bf16] [--batch-size 512] [--hidden 128,64] \\
        [--steps 1920] [--profile]

Prints one JSON line: ``{"bench": "offpolicy", "rows": [...], "load_avg": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BATCH = {"sac": 512, "td3": 256, "ddpg": 256}


def pod_hparams(strategy: Any, algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """The strategy's fixed (non-searched) settings of ``algo`` plus this run's choices."""
    fixed = {
        k: v for k, v in (strategy.search.get(algo) or {}).items() if not isinstance(v, dict | list)
    }
    hp = {**fixed, "batch_size": args.batch_size or DEFAULT_BATCH[algo]}
    hp["gradient_steps"] = args.gradient_steps
    # Learning starts right after the untimed warm-up (one batch, and one vector step).
    hp["learning_starts"] = 0
    if args.hidden:
        widths = [int(w) for w in args.hidden.split(",")]
        hp["actor_hidden"] = widths
        hp["critic_hidden"] = widths
    return hp


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process (``finpod`` imported from ``args.tree_dir``)."""
    sys.path.insert(0, str(Path(args.tree_dir).resolve()))
    sys.path.insert(1, str(REPO / "bench"))
    import torch
    from meter import Meter

    import finpod
    from finpod.agents import make_agent
    from finpod.data.dataset import load_split
    from finpod.env import VecTradingEnv
    from finpod.strategy import load_strategy

    torch.set_num_threads(args.threads)
    strategy = load_strategy(REPO / args.strategy)
    market = load_split(args.data, "train")
    num_envs = args.num_envs or strategy.train.num_envs
    env = VecTradingEnv(market, strategy.config, num_envs=num_envs, seed=1, random_start=True)
    hp = pod_hparams(strategy, args.algo, args)
    agent = make_agent(args.algo, hp, env.obs_dim, env.action_dim, "cpu", seed=0)
    if args.update_bf16:
        agent.update_autocast = torch.bfloat16
    # Warm-up, untimed: fill one minibatch's worth of random transitions (the pod's
    # learning_starts phase runs at env speed) and take a few updates.
    agent.hparams.learning_starts = hp["batch_size"]
    agent.learn(env, hp["batch_size"] + 4 * num_envs)
    updates0, steps0 = agent.updates, agent.env_steps
    with Meter() as m:
        agent.learn(env, args.steps)
    updates = agent.updates - updates0
    steps = agent.env_steps - steps0
    row: dict[str, Any] = {
        "tree": args.tree_label,
        "finpod": str(Path(finpod.__file__).resolve().parent.parent),
        "algo": args.algo,
        "num_envs": num_envs,
        "batch_size": hp["batch_size"],
        "gradient_steps": hp["gradient_steps"],
        "widths": list(agent.hparams.critic_hidden),
        "obs_dim": env.obs_dim,
        "action_dim": env.action_dim,
        "threads": args.threads,
        "update_precision": "bfloat16" if args.update_bf16 else "float32",
        "env_steps": steps,
        "updates": updates,
        "updates_per_env_step": updates / steps,
        "samples_per_env_step": updates * hp["batch_size"] / steps,
        "wall_s": m.wall,
        "env_steps_per_s": steps / m.wall,
        "ms_per_update": 1e3 * m.wall / max(1, updates),
        "foreign_cpu_frac": m.foreign_frac,
    }
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            agent.learn(env, 10 * num_envs)
        print(
            prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25),
            file=sys.stderr,
        )
    return row


def run_one(
    algo: str, label: str, tree: str, bf16: bool, args: argparse.Namespace
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--algos",
        algo,
        "--tree-label",
        label,
        "--tree-dir",
        tree,
        "--data",
        str(args.data),
        "--strategy",
        args.strategy,
        "--steps",
        str(args.steps),
        "--threads",
        str(args.threads),
        "--gradient-steps",
        str(args.gradient_steps),
    ]
    for flag, value in (
        ("--batch-size", args.batch_size),
        ("--num-envs", args.num_envs),
        ("--hidden", args.hidden),
    ):
        if value:
            cmd += [flag, str(value)]
    if args.profile:
        cmd.append("--profile")
    if bf16:
        cmd.append("--update-bf16")
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if args.profile:
        print(f"--- {label} {algo}\n{out.stderr}", file=sys.stderr)
    if out.returncode != 0:
        raise SystemExit(f"{label} {algo} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algos", default="sac,td3")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1920, help="timed env steps per measurement")
    ap.add_argument("--tree", action="append", default=[], help="LABEL=DIR of another finpod")
    ap.add_argument("--strategy", default="strategies/quickstart.toml")
    ap.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "finpod-sample",
        help="dataset directory (the shipped sample is built there if missing)",
    )
    ap.add_argument("--batch-size", type=int, default=0, help="0: SAC 512, TD3 256")
    ap.add_argument("--gradient-steps", type=int, default=1)
    ap.add_argument("--num-envs", type=int, default=0, help="0: the strategy's train.num_envs")
    ap.add_argument("--hidden", default="", help="e.g. 128,64 (default: the algorithm's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a pod: its CPUs)")
    ap.add_argument("--profile", action="store_true", help="torch.profiler table to stderr")
    ap.add_argument(
        "--bf16", action="store_true", help="also measure this checkout with bfloat16 updates"
    )
    ap.add_argument("--update-bf16", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tree-label", default="this", help=argparse.SUPPRESS)
    ap.add_argument("--tree-dir", default=str(REPO), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        args.algo = args.algos
        print(json.dumps(worker(args)))
        return 0

    sys.path.insert(0, str(REPO))
    from finpod.pipeline import ensure_dataset

    args.data = ensure_dataset(args.data)
    trees = [("this", str(REPO), False)]
    if args.bf16:
        trees.append(("this_bf16", str(REPO), True))
    for spec in args.tree:
        label, _, path = spec.partition("=")
        trees.append((label, str(Path(path).resolve()), False))
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.reps):
        for algo in args.algos.split(","):
            for label, tree, bf16 in trees:
                runs.setdefault((algo, label), []).append(run_one(algo, label, tree, bf16, args))
    rows = []
    for reps in runs.values():
        first = reps[0]
        row = {k: first[k] for k in first if k not in ("wall_s", "foreign_cpu_frac")}
        for key in ("env_steps_per_s", "ms_per_update", "foreign_cpu_frac"):
            row[key] = statistics.median(r[key] for r in reps)
            row[f"{key}_reps"] = [round(r[key], 3) for r in reps]
        rows.append(row)
    for algo in args.algos.split(","):
        mine = [r for r in rows if r["algo"] == algo and r["tree"].startswith("this")]
        others = [r for r in rows if r["algo"] == algo and not r["tree"].startswith("this")]
        for r in mine:
            for o in others:
                r[f"speedup_vs_{o['tree']}"] = r["env_steps_per_s"] / o["env_steps_per_s"]
    print(
        json.dumps(
            {
                "bench": "offpolicy",
                "reps": args.reps,
                "wall_s": time.perf_counter() - t0,
                "load_avg_start": load0,
                "load_avg_end": os.getloadavg(),
                "cpu_count": os.cpu_count(),
                "rows": rows,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
