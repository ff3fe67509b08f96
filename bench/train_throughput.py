#!/usr/bin/env python3
"""Training throughput: finpod PPO/SAC on finpod's env vs SB3 and ElegantRL, same data.

Measurements (one JSON line each on stdout, keys ``system``, ``algo``, ``device``,
``num_envs``, ``num_stocks``, ``train_steps_per_s`` = env steps collected and trained on
per wall-clock second, plus ``train_steps_per_cpu_s`` and ``foreign_cpu_frac``, the share
of the machine other processes used meanwhile):

- ``finpod`` PPO at each ``--ppo-envs`` with ElegantRL's PPO settings (its ``Config``
  defaults: horizon 256 steps per env, widths (64, 32), minibatch 128, ``repeat_times`` 8
  → 8 epochs × 2 random minibatches = 16 gradient steps per rollout, lr 6e-5), 2 rollouts;
- ``finpod`` SAC at ``--sac-envs`` with SB3's SAC defaults (widths 256×256, batch 256,
  one gradient step per vector step), timed after the replay buffer holds one batch;
- ``elegantrl`` PPO on its ``StockTradingVecEnv`` (and ``--elegantrl-vmap``: the
  ``StockTradingVmapEnv`` that acts on its actions) at the same envs, horizon and settings,
  through the peers' ``bench_train_elegantrl.py``;
- ``sb3-finrl`` PPO (SB3 defaults, 1 env) on FinRL's ``StockTradingEnv`` through the peers'
  ``bench_train_sb3.py``;
- ``sb3-finpod`` PPO (SB3 defaults, 1 env) on finpod's gymnasium wrapper, in this process.

Everything runs with ``--threads`` torch threads (1 by default, as the peers' runs).

    python bench/train_throughput.py --peers-python "$FINPOD_PEERS_PYTHON" \\
        [--data ../.peers/data/gbm_n30_t2500_s0.csv] [--peers-dir ../shared/peers] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from meter import Meter  # noqa: E402  (bench/meter.py, next to this script)

from finpod.agents import make_agent  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv  # noqa: E402

#: ElegantRL 0.3.6 ``Config`` defaults for on-policy agents (elegantrl/train/config.py).
ELEGANTRL_PPO = {
    "learning_rate": 6e-5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "update_epochs": 8,
    "minibatch_size": 128,
    "actor_hidden": [64, 32],
    "critic_hidden": [64, 32],
    "clip_coef": 0.25,
    "ent_coef": 0.01,
}
#: Stable-Baselines3 SAC defaults.
SB3_SAC = {
    "actor_lr": 3e-4,
    "critic_lr": 3e-4,
    "alpha_lr": 3e-4,
    "batch_size": 256,
    "gradient_steps": 1,
    "actor_hidden": [256, 256],
    "critic_hidden": [256, 256],
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _result(system, algo, device, num_envs, num_stocks, steps, meter, **extra) -> dict:
    return {
        "system": system,
        "algo": algo,
        "device": str(device),
        "num_envs": num_envs,
        "num_stocks": num_stocks,
        "train_steps_per_s": round(steps / meter.wall, 1),
        "train_steps_per_cpu_s": round(steps / max(meter.cpu, 1e-9), 1),
        "env_steps": steps,
        "wall_s": round(meter.wall, 3),
        "foreign_cpu_frac": round(meter.foreign_frac, 3),
        **extra,
    }


def bench_ppo(market, num_envs: int, args, device: torch.device) -> dict:
    env = VecTradingEnv(market, EnvConfig(), num_envs=num_envs, seed=0, device=device)
    horizon = args.horizon
    hp = {**ELEGANTRL_PPO, "horizon": horizon, "minibatches_per_epoch": max(1, horizon // 128)}
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, device, 0)
    agent.learn(env, horizon * num_envs)  # warm-up rollout (allocations, first-call costs)
    _sync(device)
    steps = args.rollouts * horizon * num_envs
    with Meter() as m:
        agent.learn(env, steps)
        _sync(device)
    return _result(
        "finpod",
        "ppo",
        device,
        num_envs,
        market.num_stocks,
        steps,
        m,
        hp=hp,
        grad_steps_per_rollout=hp["update_epochs"] * hp["minibatches_per_epoch"],
    )


def bench_sac(market, num_envs: int, args, device: torch.device) -> dict:
    env = VecTradingEnv(market, EnvConfig(), num_envs=num_envs, seed=0, device=device)
    hp = {**SB3_SAC, "learning_starts": 256, "buffer_size": 1_000_000}
    agent = make_agent("sac", hp, env.obs_dim, env.action_dim, device, 0)
    agent.learn(env, max(512, 4 * num_envs))  # fill past learning_starts, first updates
    _sync(device)
    steps = args.sac_vector_steps * num_envs
    with Meter() as m:
        agent.learn(env, steps)
        _sync(device)
    return _result(
        "finpod",
        "sac",
        device,
        num_envs,
        market.num_stocks,
        steps,
        m,
        hp=hp,
        grad_steps=args.sac_vector_steps,
    )


def bench_sb3_finpod(market, args) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from finpod.env.gymnasium_env import TradingGymEnv

    venv = DummyVecEnv([lambda: TradingGymEnv(market, EnvConfig(), seed=0)])
    model = PPO("MlpPolicy", venv, seed=0, device="cpu", verbose=0)
    with Meter() as m:
        model.learn(args.sb3_steps)
    return _result(
        "sb3-finpod", "ppo", "cpu", 1, market.num_stocks, args.sb3_steps, m, hp="sb3 defaults"
    )


def run_peer(python: str, system: str, algo: str, argv: list[str], num_stocks: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run(
        [python, *argv], capture_output=True, text=True, env=env, timeout=3600, check=False
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {
            "system": system,
            "algo": algo,
            "num_stocks": num_stocks,
            "error": f"exit {proc.returncode}: {tail[0][:300]}",
        }
    res = json.loads(lines[-1])
    steps_per_s = res.get("env_steps_per_s", res.get("train_steps_per_s"))
    out = {
        "system": system,
        "algo": algo,
        "device": "cpu",
        "num_envs": res.get("num_envs", res.get("n_envs", 1)),
        "num_stocks": res.get("n_stocks", num_stocks),
        "train_steps_per_s": steps_per_s,
        "train_steps_per_cpu_s": res.get("env_steps_per_cpu_s"),
        "env_steps": res.get("num_timesteps"),
        "wall_s": res.get("wall_s", res.get("wall")),
        "foreign_cpu_frac": res.get("foreign_cpu_frac"),
    }
    out["peer"] = {
        k: v for k, v in res.items() if k in ("env", "hp", "horizon_len", "rollouts", "bench")
    }
    return out


def load_market(path: Path, device: torch.device):
    from finpod.data import from_frame

    return from_frame(pd.read_csv(path), "1d", device=device)


def emit(result: dict) -> None:
    print(json.dumps(result, default=str), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default=str(REPO.parent / ".peers" / "data" / "gbm_n30_t2500_s0.csv"))
    ap.add_argument("--peers-dir", default=str(REPO.parent / "shared" / "peers"))
    ap.add_argument(
        "--peers-python",
        default=os.environ.get("FINPOD_PEERS_PYTHON", ""),
        help="python of the peers' venv (or $FINPOD_PEERS_PYTHON); empty = skip peers",
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--ppo-envs", type=int, nargs="+", default=[1024])
    ap.add_argument("--sac-envs", type=int, nargs="+", default=[64])
    ap.add_argument("--horizon", type=int, default=256, help="PPO steps per env per rollout")
    ap.add_argument("--rollouts", type=int, default=2)
    ap.add_argument("--sac-vector-steps", type=int, default=200)
    ap.add_argument("--sb3-steps", type=int, default=4096)
    ap.add_argument("--finrl-steps", type=int, default=20480)
    ap.add_argument("--elegantrl-vmap", action="store_true", help="also ElegantRL's vmap env")
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["finpod-ppo", "finpod-sac", "sb3-finpod", "sb3-finrl", "elegantrl"],
    )
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    csv = Path(args.data)
    market = load_market(csv, device)
    n = market.num_stocks
    meta = {
        "data": csv.name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if "finpod-ppo" not in args.skip:
        for e in args.ppo_envs:
            emit({**bench_ppo(market, e, args, device), **meta})
    if "finpod-sac" not in args.skip:
        for e in args.sac_envs:
            emit({**bench_sac(market, e, args, device), **meta})
    if "sb3-finpod" not in args.skip:
        emit({**bench_sb3_finpod(market.to("cpu"), args), **meta})
    if not args.peers_python:
        return 0
    peers = Path(args.peers_dir)
    threads = str(args.threads)
    if "sb3-finrl" not in args.skip:
        argv_ = [
            str(peers / "bench_train_sb3.py"),
            "--data",
            str(csv),
            "--algo",
            "ppo",
            "--n-envs",
            "1",
            "--timesteps",
            str(args.finrl_steps),
            "--threads",
            threads,
        ]
        emit({**run_peer(args.peers_python, "sb3-finrl", "ppo", argv_, n), **meta})
    if "elegantrl" not in args.skip:
        for env_kind in ("vec", "vmap") if args.elegantrl_vmap else ("vec",):
            for e in args.ppo_envs:
                argv_ = [
                    str(peers / "bench_train_elegantrl.py"),
                    "--data",
                    str(csv),
                    "--env",
                    env_kind,
                    "--num-envs",
                    str(e),
                    "--horizon-len",
                    str(args.horizon),
                    "--rollouts",
                    str(args.rollouts),
                    "--threads",
                    threads,
                ]
                res = run_peer(args.peers_python, "elegantrl", "ppo", argv_, n)
                res["peer_env"] = env_kind
                emit({**res, **meta})
    return 0


if __name__ == "__main__":
    sys.exit(main())
