"""Training throughput of finpod's own agents on one device (e.g. a GPU), no peers.

For each algorithm and ``--num-envs`` it trains on a synthetic market of ``--num-stocks``
tickers (``finpod.data.synthetic_market``, ``null`` regime) and prints one JSON line:
``train_steps_per_s`` (env steps collected and trained on per wall second, after one
untimed warm-up call), ``grad_updates_per_env_step`` (how much learning each env step
buys, so rows with different settings can be compared honestly), widths and settings.

    python bench/train_gpu.py --device cuda --num-envs 1024 4096 --algos ppo sac
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finpod.agents import make_agent  # noqa: E402
from finpod.data.synthetic_market import make_synthetic  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv  # noqa: E402

#: PPO settings: a rollout of ``horizon`` steps per env, ``update_epochs`` epochs of
#: minibatches of ``minibatch_size``.
PPO_HP = {
    "horizon": 64,
    "update_epochs": 4,
    "minibatch_size": 4096,
    "actor_hidden": [256, 256],
    "critic_hidden": [256, 256],
}
#: SAC settings: one gradient step of ``batch_size`` per vector step.
SAC_HP = {
    "batch_size": 1024,
    "actor_hidden": [256, 256],
    "critic_hidden": [256, 256],
    "buffer_size": 200_000,
    "learning_starts": 1024,
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(algo: str, num_envs: int, num_stocks: int, device: torch.device, seconds: float):
    market = make_synthetic(num_stocks, 2500, bar="1d", regime="null", seed=0, device=device)
    config = EnvConfig(action_mode="weights", episode_length=256)
    env = VecTradingEnv(market, config, num_envs=num_envs, seed=0, device=device)
    hp = PPO_HP if algo == "ppo" else SAC_HP
    agent = make_agent(algo, hp, env.obs_dim, env.action_dim, device, seed=0)
    chunk = num_envs * (hp.get("horizon", 64))
    agent.learn(env, chunk)  # warm-up: allocations, cuBLAS handles, buffer fill
    _sync(device)
    steps0, updates0 = agent.env_steps, agent.updates
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        agent.learn(env, chunk)
    _sync(device)
    wall = time.perf_counter() - t0
    steps, updates = agent.env_steps - steps0, agent.updates - updates0
    return {
        "system": "finpod",
        "algo": algo,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
        "num_envs": num_envs,
        "num_stocks": num_stocks,
        "obs_dim": env.obs_dim,
        "train_steps_per_s": round(steps / wall, 1),
        "grad_updates_per_env_step": updates / max(steps, 1),
        "env_steps": int(steps),
        "grad_updates": int(updates),
        "wall_s": round(wall, 3),
        "hp": hp,
        "torch": torch.__version__,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--num-envs", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--num-stocks", type=int, default=100)
    ap.add_argument("--algos", nargs="+", default=["ppo", "sac"])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    device = torch.device(args.device)
    for algo in args.algos:
        for n in args.num_envs:
            for rep in range(args.repeat):
                row = measure(algo, n, args.num_stocks, device, args.seconds)
                print(json.dumps({**row, "rep": rep}), flush=True)


if __name__ == "__main__":
    main()
