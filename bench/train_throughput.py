#!/usr/bin/env python3
"""Training benchmarks, like for like: finpod PPO against SB3 and ElegantRL PPO.

Every row says how much learning it does, not only how fast it collects steps:
``num_envs``, ``horizon``, ``epochs``, ``minibatch_size``, ``grad_updates_per_rollout``,
``grad_updates_per_env_step`` (gradient steps per env step collected),
``samples_per_update`` (transitions per gradient step) and the network widths. A row's
``matched`` field names the group whose systems run the same learner settings
(envs, horizon, epochs, minibatch size and count, widths); ``"unmatched"`` rows run each
system's own defaults and are there for reference only.

Throughput groups (``train_steps_per_s`` = env steps collected and trained on per second):

- ``erl``: finpod PPO on finpod's env vs ElegantRL ``AgentPPO`` on its own
  ``StockTradingVecEnv`` (which ignores its actions), ElegantRL's ``Config`` learner
  (widths 64-32, 8 × horizon / 128 random minibatches of 128 per rollout), 1,024 envs,
  horizon 256, the peers' N = 30 GBM data. Same learner, different envs.
- ``sb3``: finpod PPO vs SB3 PPO on **finpod's** gymnasium vector env
  (:class:`finpod.env.gymnasium_env.TradingGymVectorEnv` behind SB3's ``VecEnv`` API), 16
  envs, horizon 256, 4 epochs of full passes in minibatches of 256, widths 64-64. Same
  env, so only the learner differs.
- unmatched: SB3 PPO defaults (1 env, n_steps 2,048, 10 epochs × 32 minibatches of 64) on
  FinRL's env and on finpod's env.

Time to target (``time_to_target_s``: training wall seconds, evaluations excluded, until
the first evaluation at or above the target; ``null`` if the budget ran out), finpod vs
SB3 with the same env, hyperparameters and budget:

- ``alpha``: the synthetic planted-alpha market of ``tests/agents/test_learning.py``
  (3 tickers, κ = 0.3), trained on its train split, evaluated every ``--ttt-eval-every``
  env steps on the validation split; target = 0.7 × the oracle policy's validation Sharpe.
- ``pendulum``: gymnasium's Pendulum-v1 (actions rescaled to [-1, 1] for both, rewards
  × 0.1 for learning), target −200 mean return over 5 evaluation episodes.

Each group's systems alternate within the run (finpod, peer, finpod, peer, …) for
``--reps`` repetitions; the summary line per row reports medians and every repetition.
``foreign_cpu_frac`` is the share of the machine's CPU other processes used during the
timed section (0.5 = one of two cores busy elsewhere).

    python bench/train_throughput.py --peers-python "$FINPOD_PEERS_PYTHON" \\
        [--data PEERS_DATA/gbm_n30_t2500_s0.csv] [--peers-dir PEERS_HARNESS] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from meter import Meter  # noqa: E402  (bench/meter.py, next to this script)

from finpod.agents import make_agent  # noqa: E402
from finpod.env import EnvConfig, VecTradingEnv  # noqa: E402

#: ElegantRL 0.3.6 ``Config`` on-policy defaults (elegantrl/train/config.py L39-55) and
#: what ``AgentPPO.update_net`` does with them: ``horizon · repeat_times / batch_size``
#: random minibatches per rollout, whatever the number of envs.
ERL_LEARNER = {
    "learning_rate": 6e-5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "minibatch_size": 128,
    "repeat_times": 8,
    "widths": [64, 32],
    "clip_coef": 0.25,
    "ent_coef": 0.01,
}
#: The ``sb3`` group's learner (both systems): SB3's PPO defaults except envs, horizon
#: and epochs, so a rollout is a few thousand steps as in finpod's strategies.
SB3_MATCHED = {
    "num_envs": 16,
    "horizon": 256,
    "update_epochs": 4,
    "minibatch_size": 256,
    "learning_rate": 3e-4,
    "gamma": 0.99,
    "widths": [64, 64],
}
#: Strategy group: the learner and the tournament are "matched" when their gradient steps
#: per env step differ by at most this share.
MATCH_TOLERANCE = 0.1
#: SB3 PPO defaults (stable_baselines3/ppo/ppo.py) for the unmatched rows.
SB3_DEFAULTS = {"num_envs": 1, "horizon": 2048, "update_epochs": 10, "minibatch_size": 64}
#: Time-to-target learners (both systems), per task.
TTT = {
    "alpha": {
        "num_envs": 16,
        "horizon": 64,
        "update_epochs": 4,
        "minibatch_size": 256,
        "learning_rate": 1e-3,
        "gamma": 0.9,
        "log_std_init": -0.5,
        "widths": [64, 64],
    },
    "pendulum": {
        "num_envs": 16,
        "horizon": 256,
        "update_epochs": 10,
        "minibatch_size": 256,
        "learning_rate": 1e-3,
        "gamma": 0.95,
        "log_std_init": 0.0,
        "widths": [64, 64],
    },
}
#: Synthetic market of the time-to-target ``alpha`` task (as in tests/agents/test_learning.py).
ALPHA_MARKET = {
    "n_tickers": 3,
    "n_bars": 3000,
    "seed": 0,
    "alpha_strength": 0.3,
    "market_correlation": 0.0,
    "start": "2000-01-03",
}
ALPHA_SPLITS = {"train": (0, 1000), "validation": (1000, 2000)}
ALPHA_TARGET_SHARE = 0.7
PENDULUM_TARGET = -200.0
PENDULUM_REWARD_SCALE = 0.1


# ----------------------------------------------------------------------------- helpers
def learner_fields(
    num_envs: int,
    horizon: int,
    epochs: float,
    minibatch: int,
    updates_per_rollout: int,
    actor: list[int],
    critic: list[int],
) -> dict[str, Any]:
    """The amount of learning a PPO configuration does per env step."""
    rollout = num_envs * horizon
    return {
        "num_envs": num_envs,
        "horizon": horizon,
        "epochs": epochs,
        "minibatch_size": minibatch,
        "grad_updates_per_rollout": updates_per_rollout,
        "grad_updates_per_env_step": updates_per_rollout / rollout,
        "samples_per_update": minibatch,
        "trained_samples_per_env_step": updates_per_rollout * minibatch / rollout,
        "actor_widths": list(actor),
        "critic_widths": list(critic),
    }


def finpod_ppo_hp(c: dict[str, Any], **extra: Any) -> dict[str, Any]:
    hp = {
        "horizon": c["horizon"],
        "update_epochs": c["update_epochs"],
        "minibatch_size": c["minibatch_size"],
        "learning_rate": c["learning_rate"],
        "gamma": c["gamma"],
        "actor_hidden": c["widths"],
        "critic_hidden": c["widths"],
    }
    if "log_std_init" in c:
        hp["log_std_init"] = c["log_std_init"]
    return {**hp, **extra}


def sb3_ppo(venv, c: dict[str, Any], seed: int = 0):
    """SB3 PPO with finpod's PPO defaults where SB3's differ (value clipping ε = 0.2)."""
    from stable_baselines3 import PPO

    return PPO(
        "MlpPolicy",
        venv,
        n_steps=c["horizon"],
        batch_size=c["minibatch_size"],
        n_epochs=c["update_epochs"],
        learning_rate=c["learning_rate"],
        gamma=c["gamma"],
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        policy_kwargs={
            "net_arch": {"pi": list(c["widths"]), "vf": list(c["widths"])},
            "log_std_init": c.get("log_std_init", 0.0),
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )


def sb3_finpod_venv(market, config: EnvConfig, num_envs: int, seed: int = 0):
    """finpod's gymnasium vector env behind SB3's ``VecEnv`` API (arrays pass through)."""
    from stable_baselines3.common.vec_env import VecEnv

    from finpod.env.gymnasium_env import TradingGymVectorEnv

    class FinpodSB3VecEnv(VecEnv):
        def __init__(self) -> None:
            self.env = TradingGymVectorEnv(market, config, num_envs=num_envs, seed=seed)
            super().__init__(
                num_envs, self.env.single_observation_space, self.env.single_action_space
            )
            self._actions = None

        def reset(self):
            obs, _ = self.env.reset(seed=self._seeds[0] if self._seeds[0] is not None else None)
            self._reset_seeds()
            return obs

        def step_async(self, actions):
            self._actions = actions

        def step_wait(self):
            obs, reward, term, trunc, info = self.env.step(self._actions)
            done = term | trunc
            infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = info["final_obs"][i]
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
            return obs, reward.astype(np.float32), done, infos

        def close(self):
            pass

        def get_attr(self, attr_name, indices=None):
            return [getattr(self, attr_name, None)] * num_envs

        def set_attr(self, attr_name, value, indices=None):
            pass

        def env_method(self, method_name, *args, indices=None, **kwargs):
            return [None] * num_envs

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * num_envs

    return FinpodSB3VecEnv()


class SB3Actor:
    """``act(obs, deterministic)`` for an SB3 model, so finpod's evaluators can run it."""

    def __init__(self, model) -> None:
        self.model = model
        self.device = torch.device("cpu")

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        action, _ = self.model.predict(obs.cpu().numpy(), deterministic=deterministic)
        return torch.as_tensor(np.asarray(action, dtype=np.float32))


def _base(system: str, env: str, matched: str, task: str) -> dict[str, Any]:
    return {"system": system, "algo": "ppo", "env": env, "matched": matched, "task": task}


# ----------------------------------------------------------------------------- throughput
def finpod_erl(market, args) -> dict[str, Any]:
    c = ERL_LEARNER
    mb_per_rollout = args.horizon * c["repeat_times"] // c["minibatch_size"]
    hp = {
        "horizon": args.horizon,
        "learning_rate": c["learning_rate"],
        "gamma": c["gamma"],
        "gae_lambda": c["gae_lambda"],
        "minibatch_size": c["minibatch_size"],
        "update_epochs": c["repeat_times"],
        "minibatches_per_epoch": mb_per_rollout // c["repeat_times"],
        "actor_hidden": c["widths"],
        "critic_hidden": c["widths"],
        "clip_coef": c["clip_coef"],
        "ent_coef": c["ent_coef"],
    }
    env = VecTradingEnv(market, EnvConfig(), num_envs=args.erl_envs, seed=0)
    agent = make_agent("ppo", hp, env.obs_dim, env.action_dim, "cpu", 0)
    agent.learn(env, args.horizon * args.erl_envs)  # warm-up rollout (allocations)
    steps = args.rollouts * args.horizon * args.erl_envs
    updates0 = agent.updates
    with Meter() as m:
        agent.learn(env, steps)
    per_rollout = (agent.updates - updates0) // args.rollouts
    return {
        **_base("finpod", "finpod VecTradingEnv", "erl", "throughput"),
        **learner_fields(
            args.erl_envs,
            args.horizon,
            c["repeat_times"],
            c["minibatch_size"],
            per_rollout,
            c["widths"],
            c["widths"],
        ),
        **_speed(steps, m),
    }


def elegantrl_erl(args, n_stocks: int) -> dict[str, Any]:
    c = ERL_LEARNER
    argv = [
        str(Path(args.peers_dir) / "bench_train_elegantrl.py"),
        "--data",
        args.data,
        "--env",
        "vec",
        "--num-envs",
        str(args.erl_envs),
        "--horizon-len",
        str(args.horizon),
        "--rollouts",
        str(args.rollouts),
        "--threads",
        "1",
    ]
    res = run_peer(args.peers_python, argv)
    hp = res.get("hp", {})
    horizon = int(res.get("horizon_len", args.horizon))
    per_rollout = int(horizon * hp.get("repeat_times", c["repeat_times"]) / c["minibatch_size"])
    widths = list(hp.get("net_dims", c["widths"]))
    return {
        **_base("elegantrl", "ElegantRL StockTradingVecEnv (ignores actions)", "erl", "throughput"),
        **learner_fields(
            int(res.get("num_envs", args.erl_envs)),
            horizon,
            hp.get("repeat_times", c["repeat_times"]),
            int(hp.get("batch_size", c["minibatch_size"])),
            per_rollout,
            widths,
            widths,
        ),
        **_peer_speed(res),
    }


def finpod_sb3_matched(market, args) -> dict[str, Any]:
    c = SB3_MATCHED
    env = VecTradingEnv(market, EnvConfig(), num_envs=c["num_envs"], seed=0)
    agent = make_agent("ppo", finpod_ppo_hp(c), env.obs_dim, env.action_dim, "cpu", 0)
    rollout = c["num_envs"] * c["horizon"]
    agent.learn(env, rollout)
    steps = args.sb3_rollouts * rollout
    updates0 = agent.updates
    with Meter() as m:
        agent.learn(env, steps)
    per_rollout = (agent.updates - updates0) // args.sb3_rollouts
    return {
        **_base("finpod", "finpod VecTradingEnv", "sb3", "throughput"),
        **learner_fields(
            c["num_envs"],
            c["horizon"],
            c["update_epochs"],
            c["minibatch_size"],
            per_rollout,
            c["widths"],
            c["widths"],
        ),
        **_speed(steps, m),
    }


def sb3_finpod(market, args, c: dict[str, Any], matched: str) -> dict[str, Any]:
    c = {**SB3_MATCHED, **c}
    venv = sb3_finpod_venv(market, EnvConfig(), c["num_envs"])
    model = sb3_ppo(venv, c)
    rollout = c["num_envs"] * c["horizon"]
    model.learn(rollout)  # warm-up rollout
    n0, u0 = model.num_timesteps, model._n_updates
    rollouts = args.sb3_rollouts if matched == "sb3" else 1
    with Meter() as m:
        model.learn(rollouts * rollout, reset_num_timesteps=False)
    steps = model.num_timesteps - n0
    epochs = model._n_updates - u0  # SB3 counts epochs in _n_updates
    per_rollout = epochs // rollouts * (rollout // c["minibatch_size"])
    return {
        **_base("sb3", "finpod TradingGymVectorEnv (SB3 VecEnv API)", matched, "throughput"),
        **learner_fields(
            c["num_envs"],
            c["horizon"],
            c["update_epochs"],
            c["minibatch_size"],
            per_rollout,
            c["widths"],
            c["widths"],
        ),
        **_speed(steps, m),
    }


def sb3_finrl(args, n_stocks: int) -> dict[str, Any]:
    argv = [
        str(Path(args.peers_dir) / "bench_train_sb3.py"),
        "--data",
        args.data,
        "--algo",
        "ppo",
        "--n-envs",
        "1",
        "--timesteps",
        str(args.finrl_steps),
        "--threads",
        "1",
    ]
    res = run_peer(args.peers_python, argv)
    c = SB3_DEFAULTS
    return {
        **_base("sb3", "FinRL StockTradingEnv (DummyVecEnv)", "unmatched", "throughput"),
        **learner_fields(
            1,
            c["horizon"],
            c["update_epochs"],
            c["minibatch_size"],
            c["update_epochs"] * c["horizon"] // c["minibatch_size"],
            [64, 64],
            [64, 64],
        ),
        **_peer_speed(res),
    }


def _speed(steps: int, m: Meter) -> dict[str, Any]:
    return {
        "env_steps": int(steps),
        "wall_s": round(m.wall, 3),
        "train_steps_per_s": round(steps / m.wall, 1),
        "train_steps_per_cpu_s": round(steps / max(m.cpu, 1e-9), 1),
        "foreign_cpu_frac": round(m.foreign_frac, 3),
    }


def _peer_speed(res: dict[str, Any]) -> dict[str, Any]:
    if "error" in res:
        return {"error": res["error"]}
    return {
        "env_steps": res.get("num_timesteps"),
        "wall_s": res.get("seconds", res.get("wall_s")),
        "train_steps_per_s": res.get("env_steps_per_s"),
        "train_steps_per_cpu_s": res.get("env_steps_per_cpu_s"),
        "foreign_cpu_frac": res.get("foreign_cpu_frac"),
    }


def run_peer(python: str, argv: list[str]) -> dict[str, Any]:
    """Run one peer script in its own process; its JSON line, or ``{"error": ...}``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [python, *argv], capture_output=True, text=True, env=env, timeout=1800, check=False
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:300]}"}
    return json.loads(lines[-1])


# ----------------------------------------------------------------------------- time to target
def alpha_task():
    """(train split, validation split, env config, target Sharpe, oracle Sharpe)."""
    from finpod.data import make_synthetic, oracle_weights
    from finpod.env import rollout, score

    m = make_synthetic(regime="alpha", **ALPHA_MARKET)
    train_m, valid = (m.slice(*ALPHA_SPLITS[k]) for k in ("train", "validation"))
    config = EnvConfig(
        action_mode="weights", cost_rate=0.001, reward="log_return", episode_length=64
    )
    w = oracle_weights(valid)
    step = iter(range(valid.num_bars))
    oracle = score(rollout(lambda obs: w[next(step)].unsqueeze(0), valid, config), "sharpe")
    return train_m, valid, config, ALPHA_TARGET_SHARE * oracle, oracle


def _time_to_target(learn, evaluate, every: int, budget: int, target: float) -> dict[str, Any]:
    """Alternate ``learn(every)`` (timed) and ``evaluate()`` (not timed) until the target."""
    train_s, eval_s, steps, best, hit = 0.0, 0.0, 0, -float("inf"), None
    busy = Meter().__enter__()
    while steps < budget:
        t0 = time.perf_counter()
        steps = learn(every)
        t1 = time.perf_counter()
        score = float(evaluate())
        eval_s += time.perf_counter() - t1
        train_s += t1 - t0
        best = max(best, score)
        if score >= target:
            hit = train_s
            break
    busy.__exit__()
    return {
        "target": round(target, 4),
        "time_to_target_s": None if hit is None else round(hit, 3),
        "steps_to_target": steps if hit is not None else None,
        "budget_steps": budget,
        "best_score": round(best, 4),
        "train_s": round(train_s, 3),
        "eval_s": round(eval_s, 3),
        "foreign_cpu_frac": round(busy.foreign_frac, 3),
    }


def ttt_alpha(system: str, args) -> dict[str, Any]:
    from finpod.env import rollout as run_policy
    from finpod.env import score

    c = TTT["alpha"]
    train_m, valid, config, target, oracle = alpha_task()

    def evaluate_policy(actor) -> float:
        """Validation Sharpe of ``actor``'s deterministic policy (same code for both)."""
        res = run_policy(lambda obs: actor.act(obs, deterministic=True), valid, config)
        return score(res, "sharpe")

    rollout = c["num_envs"] * c["horizon"]
    if system == "finpod":
        env = VecTradingEnv(train_m, config, num_envs=c["num_envs"], seed=0)
        agent = make_agent("ppo", finpod_ppo_hp(c), env.obs_dim, env.action_dim, "cpu", args.seed)

        def learn(n: int) -> int:
            agent.learn(env, n)
            return agent.env_steps

        def evaluate() -> float:
            return evaluate_policy(agent)

        env_name = "finpod VecTradingEnv"
    else:
        model = sb3_ppo(sb3_finpod_venv(train_m, config, c["num_envs"], args.seed), c, args.seed)
        actor = SB3Actor(model)

        def learn(n: int) -> int:
            model.learn(n, reset_num_timesteps=model.num_timesteps == 0)
            return model.num_timesteps

        def evaluate() -> float:
            return evaluate_policy(actor)

        env_name = "finpod TradingGymVectorEnv (SB3 VecEnv API)"
    res = _time_to_target(learn, evaluate, args.ttt_eval_every, args.ttt_alpha_budget, target)
    per_rollout = c["update_epochs"] * (rollout // c["minibatch_size"])
    return {
        **_base(system, env_name, "ttt-alpha", "time_to_target: validation Sharpe ≥ 0.7 × oracle"),
        **learner_fields(
            c["num_envs"],
            c["horizon"],
            c["update_epochs"],
            c["minibatch_size"],
            per_rollout,
            c["widths"],
            c["widths"],
        ),
        "oracle_sharpe": round(oracle, 4),
        **res,
    }


def ttt_pendulum(system: str, args) -> dict[str, Any]:
    import gymnasium as gym

    from finpod.agents.gym_adapter import GymVecEnv, evaluate_gym

    c = TTT["pendulum"]
    rollout = c["num_envs"] * c["horizon"]
    if system == "finpod":
        env = GymVecEnv("Pendulum-v1", c["num_envs"], reward_scale=PENDULUM_REWARD_SCALE)
        agent = make_agent("ppo", finpod_ppo_hp(c), env.obs_dim, env.action_dim, "cpu", args.seed)
        actor = agent

        def learn(n: int) -> int:
            agent.learn(env, n)
            return agent.env_steps

        env_name = "gymnasium Pendulum-v1 (SyncVectorEnv)"
    else:
        from stable_baselines3.common.vec_env import DummyVecEnv

        def make():
            e = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), -1.0, 1.0)
            return gym.wrappers.TransformReward(e, lambda r: PENDULUM_REWARD_SCALE * r)

        model = sb3_ppo(DummyVecEnv([make] * c["num_envs"]), c, args.seed)
        actor = SB3Actor(model)

        def learn(n: int) -> int:
            model.learn(n, reset_num_timesteps=model.num_timesteps == 0)
            return model.num_timesteps

        env_name = "gymnasium Pendulum-v1 (DummyVecEnv)"

    def evaluate() -> float:
        return evaluate_gym(actor, "Pendulum-v1", 5, seed=10_000)

    res = _time_to_target(
        learn, evaluate, args.ttt_pendulum_eval_every, args.ttt_pendulum_budget, PENDULUM_TARGET
    )
    per_rollout = c["update_epochs"] * (rollout // c["minibatch_size"])
    return {
        **_base(system, env_name, "ttt-pendulum", "time_to_target: mean return ≥ −200"),
        **learner_fields(
            c["num_envs"],
            c["horizon"],
            c["update_epochs"],
            c["minibatch_size"],
            per_rollout,
            c["widths"],
            c["widths"],
        ),
        **res,
    }


# ----------------------------------------------------------------------------- main
def load_market(path: Path):
    from finpod.data import from_frame

    return from_frame(pd.read_csv(path), "1d")


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, default=str), flush=True)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over repetitions of one row's numbers; every repetition kept."""
    ok = [r for r in rows if "error" not in r]
    out = {k: v for k, v in rows[0].items() if k not in ("rep",)}
    out["summary"] = True
    out["reps"] = len(rows)
    out["errors"] = [r["error"] for r in rows if "error" in r]
    for key in ("train_steps_per_s", "time_to_target_s", "foreign_cpu_frac", "steps_to_target"):
        vals = [r.get(key) for r in ok]
        if any(v is not None for v in vals) or key in rows[0]:
            nums = [v for v in vals if v is not None]
            out[f"{key}_all"] = vals
            # A repetition that missed the target counts as slower than any that hit it.
            if key in ("time_to_target_s", "steps_to_target") and len(nums) < len(vals):
                ranked = sorted(nums) + [float("inf")] * (len(vals) - len(nums))
                med = ranked[len(ranked) // 2]
                out[key] = None if med == float("inf") else med
            else:
                out[key] = statistics.median(nums) if nums else None
    if "foreign_cpu_frac_all" in out:
        fr = [v for v in out["foreign_cpu_frac_all"] if v is not None]
        out["foreign_cpu_frac_max"] = max(fr) if fr else None
    return out


def strategy_learner(args) -> dict[str, Any]:
    """One learner of the strategy file's base algorithm and update settings (its network
    family fitted to the env as a tournament pod fits it), one torch thread, on the
    dataset's train split: the speed a pod could reach alone."""
    from finpod.agents import ALGORITHMS
    from finpod.agents.cross_section import hparams_for_env
    from finpod.data import load_split
    from finpod.strategy import load_strategy

    s = load_strategy(args.strategy)
    config = s.config
    market = load_split(args.strategy_data, "train")
    env = VecTradingEnv(market, config, num_envs=s.train.num_envs, seed=args.seed)
    hp = hparams_for_env(ALGORITHMS[s.algorithm][0], s.hparams, env)
    agent = make_agent(s.algorithm, hp, env.obs_dim, env.action_dim, "cpu", args.seed)
    agent.learn(env, hp["horizon"] * env.num_envs)  # warm-up: allocation, first rollout
    steps0, updates0 = agent.env_steps, agent.updates
    with Meter() as m:
        agent.learn(env, args.strategy_steps)
    steps = agent.env_steps - steps0
    return {
        **_base("finpod", "finpod", "strategy", Path(args.strategy).name),
        "what": "one learner, 1 thread, the strategy's base settings",
        "algorithm": s.algorithm,
        "net": hp.get("net"),
        "num_envs": env.num_envs,
        "num_stocks": market.num_stocks,
        "grad_updates_per_env_step": round((agent.updates - updates0) / max(steps, 1), 6),
        **_speed(steps, m),
    }


def strategy_tournament(args) -> dict[str, Any]:
    """The strategy's own tournament (its search, population and actors, ``pods =
    "auto"`` on this machine) under a step budget, in a fresh local Ray: env steps of all
    pods per wall second of the tournament (Ray start and the final ensemble excluded)."""
    import tempfile

    from finpod.tournament import Leaderboard, run_tournament

    with tempfile.TemporaryDirectory() as tmp:
        run = run_tournament(
            args.strategy,
            args.strategy_data,
            budget=f"{args.strategy_tournament_steps} steps",
            runs=Path(tmp) / "runs",
        )
        info = json.loads((run.run_dir / "run.json").read_text())
        board = Leaderboard.load(run.run_dir)
    tp = info.get("throughput") or {}
    learning = info.get("learning") or {}
    return {
        **_base("finpod", "finpod", "strategy", Path(args.strategy).name),
        "what": "the strategy's tournament (all pods together)",
        "pods": len(board.entries),
        "env_steps": tp.get("env_steps"),
        "wall_s": tp.get("wall_s"),
        "train_steps_per_s": tp.get("env_steps_per_s"),
        "grad_updates_per_env_step": learning.get("updates_per_env_step"),
        "cpu_count": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default=str(REPO.parent / ".peers" / "data" / "gbm_n30_t2500_s0.csv"))
    ap.add_argument("--peers-dir", default=str(REPO.parent / "shared" / "peers"))
    ap.add_argument(
        "--peers-python",
        default=os.environ.get("FINPOD_PEERS_PYTHON", ""),
        help="python of the peers' venv (or $FINPOD_PEERS_PYTHON); empty = no ElegantRL/FinRL",
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--erl-envs", type=int, default=1024)
    ap.add_argument("--horizon", type=int, default=256, help="erl group: steps per env")
    ap.add_argument("--rollouts", type=int, default=2, help="erl group: timed rollouts")
    ap.add_argument("--sb3-rollouts", type=int, default=4, help="sb3 group: timed rollouts")
    ap.add_argument("--finrl-steps", type=int, default=4096)
    ap.add_argument("--ttt-eval-every", type=int, default=1024)
    ap.add_argument("--ttt-alpha-budget", type=int, default=32_768)
    ap.add_argument("--ttt-pendulum-eval-every", type=int, default=8_192)
    ap.add_argument("--ttt-pendulum-budget", type=int, default=131_072)
    ap.add_argument(
        "--only",
        nargs="*",
        default=["erl", "sb3", "unmatched", "ttt-alpha", "ttt-pendulum"],
        choices=["erl", "sb3", "unmatched", "ttt-alpha", "ttt-pendulum", "strategy"],
    )
    ap.add_argument(
        "--strategy",
        default=None,
        help="strategy group: a strategy file; its tournament's rate beside one learner's at "
        "the same update settings (with --only strategy)",
    )
    ap.add_argument("--strategy-data", default=None, help="strategy group: dataset directory")
    ap.add_argument("--strategy-steps", type=int, default=131_072, help="one learner's timed steps")
    ap.add_argument("--strategy-tournament-steps", type=int, default=800_000)
    ap.add_argument(
        "--busy",
        action="store_true",
        help="run a CPU-bound process (python -c 'while True: pass') beside the timed rows",
    )
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    burner = None
    if args.busy:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        return _run(args)
    finally:
        if burner is not None:
            burner.kill()


def _run(args) -> int:
    if args.only == ["strategy"]:
        if not (args.strategy and args.strategy_data):
            raise SystemExit("--only strategy needs --strategy FILE and --strategy-data DIR")
        meta = {"busy": args.busy, "cpu_count": os.cpu_count(), "torch": torch.__version__}
        results: dict[str, list[dict[str, Any]]] = {"learner": [], "tournament": []}
        for rep in range(args.reps):
            args.seed = rep
            rows = {}
            for name, fn in (("learner", strategy_learner), ("tournament", strategy_tournament)):
                rows[name] = {**fn(args), **meta, "rep": rep, "row": f"finpod strategy {name}"}
            # Like for like only at the same amount of learning: the tournament's pods draw
            # their update settings from [search], the learner trains the base ones.
            ratios = [rows[n].get("grad_updates_per_env_step") for n in ("learner", "tournament")]
            same = all(ratios) and abs(ratios[0] - ratios[1]) <= MATCH_TOLERANCE * ratios[0]
            for name, row in rows.items():
                row["matched"] = bool(same)
                if not same:
                    row["label"] = (
                        "unmatched: gradient steps per env step "
                        f"learner {ratios[0]} vs tournament {ratios[1]}"
                    )
                results[name].append(row)
                emit(row)
        for rows in results.values():
            emit(summarize(rows))
        return 0
    market = load_market(Path(args.data))
    n = market.num_stocks
    meta = {
        "data": Path(args.data).name,
        "num_stocks": n,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    peers = bool(args.peers_python)
    # (row name, callable) per group, run in this order within each repetition so that
    # finpod and its peer alternate.
    groups: list[tuple[str, Any]] = []
    if "erl" in args.only:
        groups.append(("finpod erl", lambda: finpod_erl(market, args)))
        if peers:
            groups.append(("elegantrl erl", lambda: elegantrl_erl(args, n)))
    if "sb3" in args.only:
        groups.append(("finpod sb3", lambda: finpod_sb3_matched(market, args)))
        groups.append(("sb3 sb3", lambda: sb3_finpod(market, args, {}, "sb3")))
    if "unmatched" in args.only:
        groups.append(
            ("sb3 defaults finpod", lambda: sb3_finpod(market, args, SB3_DEFAULTS, "unmatched"))
        )
        if peers:
            groups.append(("sb3 defaults finrl", lambda: sb3_finrl(args, n)))
    if "ttt-alpha" in args.only:
        groups.append(("finpod ttt-alpha", lambda: ttt_alpha("finpod", args)))
        groups.append(("sb3 ttt-alpha", lambda: ttt_alpha("sb3", args)))
    if "ttt-pendulum" in args.only:
        groups.append(("finpod ttt-pendulum", lambda: ttt_pendulum("finpod", args)))
        groups.append(("sb3 ttt-pendulum", lambda: ttt_pendulum("sb3", args)))

    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in groups}
    for rep in range(args.reps):
        for name, fn in groups:
            torch.manual_seed(rep)
            args.seed = rep  # learners of the time-to-target rows: one seed per repetition
            try:
                row = {**fn(), **meta, "rep": rep, "row": name}
            except Exception as exc:  # a peer that breaks must not hide the others' rows
                row = {"row": name, "rep": rep, "error": f"{type(exc).__name__}: {exc}"[:300]}
            results[name].append(row)
            emit(row)
    for rows in results.values():
        emit(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
