#!/usr/bin/env python3
"""Batched populations against K separate agents, at the same per-member settings.

For each K, ways to train K members of ``--algo`` (ppo, a2c, sac, td3), each with
``--envs-per-member`` envs, the horizon, epochs, minibatch (PPO/A2C) or batch size and
gradient steps (SAC/TD3) and widths given, for ``--steps-per-member`` env steps:

- ``population``: one :func:`finpod.agents.population.make_population` of K members on one
  ``VecTradingEnv`` of K × W envs (one batched model);
- ``sequential``: K single PPO agents trained one after another, each on a W-env env
  (today's path: one pod at a time per CPU);
- ``single``: one single PPO agent on W envs (the per-member work alone);
- ``single_wide``: one single PPO agent on K × W envs (what one learner does with the
  population's envs; the same updates per env step, each on one network).

Systems alternate within each repetition (population, sequential, single, single_wide);
one JSON line per (K, system) reports the median env steps/s over ``--reps`` and every
repetition, gradient updates per env step of one member, and ``os.getloadavg()`` before
and after (the machine may be shared). Agents and envs are built before the clock starts;
only ``learn`` is timed.

    python bench/population.py --ks 1 4 16 64 --reps 3
    python bench/population.py --algo sac --ks 1 4 16 --minibatch 256 --widths 256 256

Off-policy members learn from the first step (``learning_starts = 0``, no random warm-up)
with ``--gradient-steps`` updates of ``--minibatch`` samples per vector step, so the
update-to-data ratio is the same in every system; it is printed as
``grad_updates_per_env_step``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from finpod.agents import make_agent  # noqa: E402
from finpod.agents.ppo import PPOParams  # noqa: E402
from finpod.agents.registry import make_population  # noqa: E402
from finpod.agents.sac import SACParams  # noqa: E402
from finpod.agents.td3 import TD3Params  # noqa: E402
from finpod.data import make_synthetic  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--algo", default="ppo", choices=["ppo", "a2c", "sac", "td3"])
    p.add_argument("--ks", type=int, nargs="+", default=[1, 4, 16, 64], help="population sizes")
    p.add_argument("--gradient-steps", type=int, default=1, help="SAC/TD3: per vector step")
    p.add_argument("--envs-per-member", type=int, default=8, help="W, envs of each member")
    p.add_argument("--steps-per-member", type=int, default=1024, help="env steps per member")
    p.add_argument("--horizon", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--minibatch", type=int, default=64)
    p.add_argument("--widths", type=int, nargs="+", default=[64, 64])
    p.add_argument("--tickers", type=int, default=10)
    p.add_argument("--bars", type=int, default=500)
    p.add_argument("--episode-length", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--rng",
        choices=["member", "shared"],
        default="member",
        help="population random numbers: per-member generators or one shared generator",
    )
    p.add_argument(
        "--systems",
        nargs="+",
        default=["population", "sequential", "single", "single_wide"],
        choices=["population", "sequential", "single", "single_wide"],
    )
    return p.parse_args(argv)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def params(a):
    """The per-member hyperparameters of ``--algo``."""
    widths = tuple(a.widths)
    if a.algo in ("sac", "td3"):
        cls = SACParams if a.algo == "sac" else TD3Params
        return cls(
            batch_size=a.minibatch,
            gradient_steps=a.gradient_steps,
            learning_starts=0,
            buffer_size=max(a.steps_per_member, 1024),
            actor_hidden=widths,
            critic_hidden=widths,
        )
    hp = PPOParams(
        horizon=a.horizon,
        update_epochs=a.epochs,
        minibatch_size=a.minibatch,
        actor_hidden=widths,
        critic_hidden=widths,
    )
    if a.algo == "a2c":
        from finpod.agents.a2c import A2CParams

        return A2CParams(horizon=a.horizon, actor_hidden=widths, critic_hidden=widths)
    return hp


def run_population(a, market, config, hp, k: int) -> tuple[float, int, float]:
    """Seconds, env steps trained (all members), gradient updates per env step per member."""
    w = a.envs_per_member
    env = VecTradingEnv(market, config, num_envs=k * w, seed=0, device=a.device)
    pop = make_population(
        a.algo, [hp] * k, env.obs_dim, env.action_dim, a.device, range(k), rng=a.rng
    )
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else lambda: None
    wall = _timed(lambda: (pop.learn(env, a.steps_per_member), sync()))
    steps = int(pop.env_steps().sum())
    return wall, steps, float(pop.updates()[0]) / float(pop.env_steps()[0])


def run_singles(a, market, config, hp, k: int, w: int) -> tuple[float, int, float]:
    """k single agents on w-env envs, one after another."""
    env = VecTradingEnv(market, config, num_envs=w, seed=0, device=a.device)
    agents = [
        make_agent(a.algo, dataclasses.asdict(hp), env.obs_dim, env.action_dim, a.device, seed)
        for seed in range(k)
    ]
    steps = a.steps_per_member * w // a.envs_per_member  # single_wide: same iterations

    def train() -> None:
        for agent in agents:
            agent.learn(env, steps)

    wall = _timed(train)
    return wall, sum(x.env_steps for x in agents), agents[0].updates / agents[0].env_steps


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    market = make_synthetic(a.tickers, a.bars, regime="alpha", seed=0, device=a.device)
    config = EnvConfig(action_mode="weights", episode_length=a.episode_length)
    hp = params(a)
    run_singles(a, market, config, hp, 1, a.envs_per_member)  # warm-up (allocator, kernels)
    for k in a.ks:
        load_before = os.getloadavg()
        runs: dict[str, list[tuple[float, int, float]]] = {s: [] for s in a.systems}
        for _ in range(a.reps):
            for system in a.systems:
                if system == "population":
                    r = run_population(a, market, config, hp, k)
                elif system == "sequential":
                    r = run_singles(a, market, config, hp, k, a.envs_per_member)
                elif system == "single":
                    r = run_singles(a, market, config, hp, 1, a.envs_per_member)
                else:
                    r = run_singles(a, market, config, hp, 1, k * a.envs_per_member)
                runs[system].append(r)
        load_after = os.getloadavg()
        for system, reps in runs.items():
            rates = [steps / wall for wall, steps, _ in reps]
            row: dict[str, Any] = {
                "bench": "population",
                "algo": a.algo,
                "system": system,
                "K": k,
                "members_trained": {"population": k, "sequential": k}.get(system, 1),
                "envs_per_member": a.envs_per_member,
                "num_envs": {"population": k, "single_wide": k}.get(system, 1) * a.envs_per_member,
                "env_steps_per_s": statistics.median(rates),
                "env_steps_per_s_reps": [round(x) for x in rates],
                "wall_s_reps": [round(wall, 3) for wall, _, _ in reps],
                "env_steps": reps[0][1],
                "grad_updates_per_env_step": reps[0][2],
                "horizon": a.horizon,
                "epochs": a.epochs,
                "minibatch_size": a.minibatch,
                "widths": a.widths,
                "tickers": a.tickers,
                "device": a.device,
                "rng": a.rng,
                "torch_threads": a.threads,
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in load_after],
                "cpu_count": os.cpu_count(),
                "machine": platform.machine(),
                "torch": torch.__version__,
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
