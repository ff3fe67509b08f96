#!/usr/bin/env python3
"""Tournament benchmark: time to a target validation Sharpe, P pods vs one agent; Ray overhead.

On a synthetic ``alpha`` market (a planted signal whose optimal policy is known), it
measures how long it takes until an agent with validation Sharpe ≥ target exists:

- ``single``: one PPO agent with the strategy's base hyperparameters, given the resources
  the tournament gets (``P`` torch threads, ``P × W`` envs), scored on the validation
  split after every epoch (the moment a usable checkpoint exists); measured again with 1
  torch thread (``threads`` key), since intra-op threads of small networks on a busy
  machine can be far slower than one;
- ``tournament``: ``P`` pods on a private local Ray (1 CPU each, ``W`` envs each), async
  mode, fresh pods drawing learning rate / γ / clip / entropy from ranges, later pods
  perturbed copies of the leaderboard's best; the clock stops when a pod *finishes* with
  a validation score ≥ target (its checkpoint is then on the leaderboard).

Both clocks start before any work (the tournament's includes Ray start-up and pod actor
start-up, reported separately). Each system stops at the target or at ``--minutes``.

One JSON line per measurement on stdout. Keys:

- common: ``bench`` ("tournament"), ``system`` ("single" | "tournament" |
  "tournament_scaling"), ``device``, ``pods`` (P), ``num_envs`` (W per pod / learner),
  ``target_sharpe``, ``oracle_sharpe`` (validation Sharpe of the known optimal long-only
  policy with the same costs), ``reached`` (bool), ``seconds_to_target`` (null if not
  reached), ``best_sharpe``, ``env_steps`` (total), ``env_steps_per_s``, ``wall_s``,
  ``cpus`` (os.cpu_count), ``host``.
- tournament only: ``pods_trained``, ``pods_failed``, ``ray_start_s`` (``ray.init``),
  ``actor_startup_s`` (Σ pod actor start-up incl. dataset load), ``pod_s`` (Σ dispatch →
  result seconds), ``inside_pod_s`` (Σ seconds inside ``train``), ``orchestration_s``
  ((pod_s − inside_pod_s) + idle seconds between a result and the slot's next pod),
  ``orchestration_share`` (orchestration_s / total pod time; goal ≤ 0.05),
  ``orchestration_share_with_startup`` (same with actor start-up counted as overhead).
- ``tournament_scaling`` (``--scaling 1,2,4,8``): for each pool size n, a tournament of n
  pods for ``--scaling-seconds``; on CUDA the n pods share one GPU (``gpus_per_pod =
  1/n``), on CPU each has one core. ``pods``, ``env_steps_per_s`` (all pods together,
  whole wall time), ``training_env_steps_per_s`` (from the first pod's start to the last
  pod's end: start-up excluded), ``orchestration_share``.

Usage::

    python bench/tournament.py                          # P = all CPUs, 10 min cap each
    python bench/tournament.py --pods 2 --minutes 5 --target 1.0
    python bench/tournament.py --device cuda --scaling 1,2,4,8 --skip-single --skip-tournament
    python bench/tournament.py --scaling 1,2 --loopback --skip-single --skip-tournament
    python bench/tournament.py --short-pods 200 --pods 2 --skip-single --skip-tournament
    python bench/tournament.py --memory 1,2,4 --data DATASET --skip-single --skip-tournament
    python bench/tournament.py --population 1,4,16,64 --skip-single --skip-tournament

``--population K1,K2,…`` (the population table): for each K, in one run, alternating,
``--repeat`` times (medians reported, each repetition listed): ``population`` — one pod
actor trains K pods as one batched population (``tournament.population = K``, one round,
``--pod-steps`` env steps per member); ``separate_pods`` — the same K pods, same
per-member settings, trained one after another by one pod actor (``population = 1``);
``single`` — one PPO learner with the same per-member settings (W envs), no scoring.
Keys: ``members`` (K), ``env_steps``, ``env_steps_per_s`` (whole wall time, Ray and actor
start-up included), ``training_env_steps_per_s`` (first pod start to last pod end),
``updates_per_env_step`` (gradient steps per env step per member) and
``samples_per_env_step`` (transitions trained on per env step), ``load_avg``.

The dataset is built into a temporary directory (``--data`` reuses one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STRATEGY = """
[agent]
algorithm = "ppo"
[agent.hparams]
learning_rate = 3e-4
horizon = 32
update_epochs = 4
minibatch_size = 256
log_std_init = -0.5
actor_hidden = [64, 64]
critic_hidden = [64, 64]
[env]
action_mode = "weights"
fill_price = "open"
cost_rate = 0.0005
reward = "log_return"
reward_scale = 100.0
episode_length = 128
[train]
num_envs = {num_envs}
seed = {seed}
device = "{device}"
[tournament]
pod_steps = {pod_steps}
epochs = {epochs}
top_k = 8
fresh_pods = {pods}
epsilon = 0.2
perturb = 0.3
cpus_per_pod = 1.0
[search]
algorithms = ["ppo"]
[search.ppo]
learning_rate = {{ low = 1e-4, high = 3e-3, log = true }}
gamma = {{ low = 0.9, high = 0.99 }}
clip_coef = {{ low = 0.1, high = 0.3 }}
ent_coef = {{ low = 0.0, high = 0.01 }}
"""


def emit(rec: dict) -> None:
    rec = {"bench": "tournament", **rec, "cpus": os.cpu_count(), "host": platform.node()}
    print(json.dumps(rec), flush=True)


def build_data(path: Path, n_tickers: int, n_bars: int, seed: int) -> Path:
    from finpod.data import build_dataset

    return build_dataset(
        "synthetic",
        path,
        n_tickers=n_tickers,
        n_bars=n_bars,
        regime="alpha",
        alpha_strength=0.2,
        seed=seed,
    )


def oracle_sharpe(data: Path, env: dict) -> float:
    """Validation Sharpe of the known optimal long-only weights, same env and costs."""
    import torch

    from finpod.data import load_split, oracle_weights
    from finpod.env import EnvConfig, rollout, score

    market = load_split(data, "validation")
    weights = oracle_weights(market)
    step = {"t": 0}

    def policy(obs: torch.Tensor) -> torch.Tensor:
        w = weights[step["t"]].reshape(1, -1)
        step["t"] += 1
        return w

    return score(rollout(policy, market, EnvConfig.from_dict(env)), "sharpe")


def run_single(
    strategy,
    data: Path,
    pods: int,
    target: float,
    minutes: float,
    device: str,
    epoch_steps: int,
    threads: int,
) -> dict:
    """One agent with ``threads`` torch threads and P × W envs, scored after every epoch."""
    import torch

    from finpod.data import load_split
    from finpod.tournament.generator import PodSpec
    from finpod.tournament.pod import Pod

    t0 = time.perf_counter()
    torch.set_num_threads(threads)
    pod = Pod(load_split(data, "train"), load_split(data, "validation"), strategy.config, device)
    spec = PodSpec(
        pod_id="single",
        algorithm=strategy.algorithm,
        hparams=dict(strategy.hparams),
        seed=strategy.train.seed,
        steps=epoch_steps * pods,
        epochs=1,
        num_envs=strategy.train.num_envs * pods,
        num_learners=1,
    )
    envs = pod.make_envs(spec)
    (agent,) = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, None)
    best, reached_at, epoch = float("-inf"), None, 0
    while time.perf_counter() - t0 < minutes * 60:
        pod.run_epoch([agent], envs, spec.steps, epoch)
        value = float(pod.evaluate(agent, "sharpe").scores[0])
        best = max(best, value)
        epoch += 1
        if value >= target:
            reached_at = time.perf_counter() - t0
            break
    wall = time.perf_counter() - t0
    return {
        "system": "single",
        "device": device,
        "pods": 1,
        "threads": threads,
        "num_envs": spec.num_envs,
        "reached": reached_at is not None,
        "seconds_to_target": reached_at,
        "best_sharpe": best,
        "env_steps": agent.env_steps,
        "env_steps_per_s": agent.env_steps / wall,
        "wall_s": wall,
    }


def updates_per_env_step(strategy) -> tuple[float, float]:
    """(gradient steps, transitions trained on) per env step of one PPO learner."""
    hp = strategy.hparams
    rollout = int(hp.get("horizon", 128)) * strategy.train.num_envs
    per_epoch = hp.get("minibatches_per_epoch")
    mb = int(hp.get("minibatch_size", 64))
    steps = int(per_epoch) if per_epoch else max(1, rollout // mb)
    updates = int(hp.get("update_epochs", 10)) * steps
    return updates / rollout, updates * mb / rollout


def run_single_plain(strategy, data: Path, steps: int, device: str) -> dict:
    """One PPO learner with the strategy's settings and W envs, ``steps`` env steps, 1
    torch thread, no scoring: the learner's own rate."""
    import torch

    from finpod.data import load_split
    from finpod.tournament.generator import PodSpec
    from finpod.tournament.pod import Pod

    torch.set_num_threads(1)
    pod = Pod(load_split(data, "train"), load_split(data, "validation"), strategy.config, device)
    spec = PodSpec(
        pod_id="single",
        algorithm="ppo",
        hparams=dict(strategy.hparams),
        seed=strategy.train.seed,
        steps=steps,
        epochs=1,
        num_envs=strategy.train.num_envs,
        num_learners=1,
    )
    envs = pod.make_envs(spec)
    (agent,) = pod.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, None)
    t0 = time.perf_counter()
    pod.run_epoch([agent], envs, steps, 0)
    wall = time.perf_counter() - t0
    return {"env_steps": agent.env_steps, "env_steps_per_s": agent.env_steps / wall, "wall_s": wall}


def run_population_table(args, data: Path, tmp_path: Path) -> None:
    """The population table (see the module docstring)."""
    import statistics

    from finpod.strategy import load_strategy

    sizes = [int(x) for x in args.population.split(",") if x.strip()]
    rows: dict[tuple[int, str], list[dict]] = {}
    for rep in range(args.repeat):
        for k in sizes:
            for system in ("population", "separate_pods", "single"):
                path = tmp_path / f"pop_{k}_{system}_{rep}.toml"
                text = STRATEGY.format(
                    num_envs=args.num_envs,
                    seed=args.seed + rep,
                    device=args.device,
                    pod_steps=args.pod_steps,
                    epochs=args.epochs,
                    pods=k,
                )
                population = k if system == "population" else 1
                path.write_text(
                    text.replace(
                        "cpus_per_pod = 1.0", f"cpus_per_pod = 1.0\npopulation = {population}"
                    )
                )
                strategy = load_strategy(path)
                if system == "single":
                    rec = run_single_plain(strategy, data, args.pod_steps, args.device)
                    rec["training_env_steps_per_s"] = rec["env_steps_per_s"]
                else:
                    rec = run_pool(
                        path,
                        data,
                        1,
                        None,
                        args.minutes,
                        args.device,
                        tmp_path / f"runs_pop_{k}_{system}_{rep}",
                        budget=f"{k} pods",
                    )
                updates, samples = updates_per_env_step(strategy)
                rec = {
                    "system": f"population_table_{system}",
                    "device": args.device,
                    "members": k if system != "single" else 1,
                    "num_envs": args.num_envs,
                    "pod_steps": args.pod_steps,
                    "updates_per_env_step": updates,
                    "samples_per_env_step": samples,
                    "repetition": rep,
                    "load_avg": os.getloadavg()[0],
                    **{
                        key: rec.get(key)
                        for key in (
                            "env_steps",
                            "env_steps_per_s",
                            "training_env_steps_per_s",
                            "wall_s",
                        )
                    },
                }
                emit(rec)
                rows.setdefault((k, system), []).append(rec)
    for (k, system), recs in rows.items():
        rates = [r["training_env_steps_per_s"] or 0.0 for r in recs]
        emit(
            {
                "system": f"population_table_{system}_median",
                "device": args.device,
                "members": recs[0]["members"],
                "num_envs": args.num_envs,
                "updates_per_env_step": recs[0]["updates_per_env_step"],
                "samples_per_env_step": recs[0]["samples_per_env_step"],
                "training_env_steps_per_s": statistics.median(rates),
                "each": rates,
                "for_k": k,
            }
        )


def run_pool(
    strategy_path: Path,
    data: Path,
    pods: int,
    target: float | None,
    minutes: float,
    device: str,
    out: Path,
    gpus_per_pod: float | None = None,
    loopback: bool = False,
    budget: str | None = None,
) -> dict:
    """A tournament of ``pods`` pods until a pod finishes with score ≥ target (or time).

    ``loopback``: on a loopback cluster of ``pods`` one-CPU nodes instead of one local Ray.
    ``budget``: the tournament budget (default: ``minutes``).
    """
    import ray

    from finpod.tournament import run_tournament

    t0 = time.perf_counter()
    cluster = None
    address = None
    if loopback:
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
        for _ in range(pods - 1):
            cluster.add_node(num_cpus=1)
        address = cluster.address
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray_kwargs = {
            "address": "local",
            "num_cpus": pods,
            "include_dashboard": False,
            "log_to_driver": False,
        }
        if gpus_per_pod:
            ray_kwargs["num_gpus"] = 1
        ray.init(**ray_kwargs)
    ray_start = time.perf_counter() - t0
    state = {"reached_at": None, "best": float("-inf"), "first_start": None, "last_finish": None}

    def on_event(kind: str, payload: dict) -> None:
        if kind == "start" and state["first_start"] is None:
            state["first_start"] = time.perf_counter()
        if kind == "finish":
            state["last_finish"] = time.perf_counter()
            score = payload["result"].score
            state["best"] = max(state["best"], score)
            if target is not None and score >= target and state["reached_at"] is None:
                state["reached_at"] = time.perf_counter() - t0

    if gpus_per_pod:
        # gpus_per_pod lives in the strategy's [tournament] table.
        text = strategy_path.read_text().replace(
            "cpus_per_pod = 1.0", f"cpus_per_pod = 1.0\ngpus_per_pod = {gpus_per_pod}"
        )
        strategy_path = strategy_path.with_name(f"gpu_{pods}.toml")
        strategy_path.write_text(text)
    try:
        result = run_tournament(
            strategy_path,
            data,
            pods=pods,
            budget=budget or f"{minutes * 60:.0f}s",
            runs=out,
            device=device,
            on_event=on_event,
            stop=lambda: state["reached_at"] is not None,
        )
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    wall = time.perf_counter() - t0
    s = result.summary
    total = s.pod_s + s.dispatch_gap_s
    steps = result.leaderboard.progress.env_steps
    return {
        "system": "tournament",
        "device": device,
        "pods": pods,
        "reached": state["reached_at"] is not None,
        "seconds_to_target": state["reached_at"],
        "best_sharpe": state["best"],
        "env_steps": steps,
        "env_steps_per_s": steps / wall,
        "training_env_steps_per_s": steps / (state["last_finish"] - state["first_start"])
        if state["last_finish"] and state["first_start"]
        else None,
        "wall_s": wall,
        "pods_trained": s.pods_trained,
        "pods_failed": s.pods_failed,
        "ray_start_s": ray_start,
        "actor_startup_s": s.startup_s,
        "pod_s": s.pod_s,
        "inside_pod_s": s.inside_s,
        "orchestration_s": s.orchestration_s,
        "dispatch_gap_s": s.dispatch_gap_s,
        "orchestration_share": s.orchestration_share,
        "orchestration_share_with_startup": (s.orchestration_s + s.startup_s)
        / (total + s.startup_s)
        if total
        else 0.0,
    }


class NodeMemory:
    """Samples Σ PSS and Σ RSS of this process and every process it started (Ray included)."""

    def __init__(self, every_s: float = 0.25) -> None:
        import threading

        self.every_s = every_s
        self.peak_pss = 0
        self.peak_rss = 0
        #: Peak Σ PSS since the first pod started (the driver's own loading excluded).
        self.training_pss = 0
        self.training = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> tuple[int, int]:
        import psutil

        me = psutil.Process()
        pss = rss = 0
        for proc in [me, *me.children(recursive=True)]:
            try:
                info = proc.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            pss += info.pss
            rss += info.rss
        return pss, rss

    def _run(self) -> None:
        while not self._stop.is_set():
            pss, rss = self.sample()
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
            if self.training:
                self.training_pss = max(self.training_pss, pss)
            self._stop.wait(self.every_s)

    def __enter__(self) -> NodeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_memory(strategy_path: Path, data: Path, pods: int, out: Path) -> dict:
    """Peak memory of the node while P pods train at once on ``data`` (one pod each)."""
    import ray

    from finpod.data import load_manifest
    from finpod.tournament import run_tournament

    ray.init(address="local", num_cpus=pods, include_dashboard=False, log_to_driver=False)
    try:
        time.sleep(2.0)
        baseline, _ = NodeMemory().sample()
        t0 = time.perf_counter()
        with NodeMemory() as mem:

            def on_event(kind: str, payload: dict) -> None:
                if kind == "start":
                    mem.training = True

            result = run_tournament(
                strategy_path, data, pods=pods, budget=f"{pods} pods", runs=out, on_event=on_event
            )
    finally:
        ray.shutdown()
    man = load_manifest(data)
    n, f = len(man["tickers"]), len(man["features"])
    bars = sum(man["splits"][s]["bars"] for s in ("train", "validation"))
    return {
        "system": "tournament_memory",
        "pods": pods,
        "pods_trained": result.summary.pods_trained,
        "pods_failed": result.summary.pods_failed,
        "tickers": n,
        "train_validation_bars": bars,
        "dataset_mib": bars * n * (2 * 4 + 1 + 4 * f) / 2**20,
        "baseline_pss_mib": baseline / 2**20,
        "peak_node_pss_mib": mem.peak_pss / 2**20,
        "peak_node_rss_mib": mem.peak_rss / 2**20,
        "peak_training_pss_mib": mem.training_pss / 2**20,
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=os.cpu_count() or 1, help="P (default: all CPUs)")
    ap.add_argument(
        "--num-envs", type=int, default=32, help="W: envs per pod (the single agent gets P × W)"
    )
    ap.add_argument("--pod-steps", type=int, default=40_000, help="env steps per pod")
    ap.add_argument("--epochs", type=int, default=2, help="validation points per pod")
    ap.add_argument("--minutes", type=float, default=10.0, help="time cap of each system")
    ap.add_argument(
        "--target", type=float, default=None, help="target validation Sharpe (absolute)"
    )
    ap.add_argument(
        "--target-frac", type=float, default=0.5, help="target = this × oracle Sharpe (default)"
    )
    ap.add_argument("--n-tickers", type=int, default=8)
    ap.add_argument("--n-bars", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--data", type=Path, default=None, help="reuse this dataset directory")
    ap.add_argument(
        "--single-threads",
        default="",
        help="torch threads of the single agent, e.g. 1 (default: P,1)",
    )
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-tournament", action="store_true")
    ap.add_argument(
        "--scaling", default="", help="e.g. 1,2,4,8: pool sizes (sharing one GPU on cuda)"
    )
    ap.add_argument("--scaling-seconds", type=float, default=60.0, help="time per scaling point")
    ap.add_argument(
        "--loopback", action="store_true", help="--scaling on n one-CPU loopback cluster nodes"
    )
    ap.add_argument("--short-pods", type=int, default=0, help="N short pods (overhead)")
    ap.add_argument("--short-pod-steps", type=int, default=512, help="env steps per short pod")
    ap.add_argument("--memory", default="", help="e.g. 1,2,4: node memory with P pods (--data)")
    ap.add_argument("--memory-pod-steps", type=int, default=2048, help="env steps per pod")
    ap.add_argument("--population", default="", help="e.g. 1,4,16,64: the population table")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of the population table")
    args = ap.parse_args()

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from finpod.strategy import load_strategy

    with tempfile.TemporaryDirectory(prefix="fpbench") as tmp:
        tmp_path = Path(tmp)
        data = args.data or build_data(tmp_path / "data", args.n_tickers, args.n_bars, args.seed)
        strategy_path = tmp_path / "strategy.toml"
        strategy_path.write_text(
            STRATEGY.format(
                num_envs=args.num_envs,
                seed=args.seed,
                device=args.device,
                pod_steps=args.pod_steps,
                epochs=args.epochs,
                pods=args.pods,
            )
        )
        strategy = load_strategy(strategy_path)
        common: dict = {}
        target = args.target
        if not (args.skip_single and args.skip_tournament):
            oracle = oracle_sharpe(data, strategy.config.to_dict())
            target = args.target if args.target is not None else args.target_frac * oracle
            common = {"target_sharpe": target, "oracle_sharpe": oracle}
        if not args.skip_single:
            epoch_steps = args.pod_steps // args.epochs
            threads_list = (
                [int(x) for x in args.single_threads.split(",")]
                if args.single_threads
                else [args.pods, 1]
            )
            for threads in dict.fromkeys(threads_list):
                rec = run_single(
                    strategy,
                    data,
                    args.pods,
                    target,
                    args.minutes,
                    args.device,
                    epoch_steps,
                    threads,
                )
                emit({**rec, **common})
        if not args.skip_tournament:
            rec = run_pool(
                strategy_path, data, args.pods, target, args.minutes, args.device, tmp_path / "runs"
            )
            emit({**rec, "num_envs": args.num_envs, **common})
        for n in [int(x) for x in args.scaling.split(",") if x.strip()]:
            rec = run_pool(
                strategy_path,
                data,
                n,
                None,
                args.scaling_seconds / 60,
                args.device,
                tmp_path / f"runs_scaling{n}",
                gpus_per_pod=1.0 / n if args.device.startswith("cuda") else None,
                loopback=args.loopback,
            )
            keep = (
                "pods",
                "env_steps",
                "env_steps_per_s",
                "training_env_steps_per_s",
                "wall_s",
                "pods_trained",
                "orchestration_share",
            )
            emit(
                {
                    "system": "tournament_scaling",
                    "device": args.device,
                    "num_envs": args.num_envs,
                    "loopback_nodes": n if args.loopback else 0,
                    **{k: rec[k] for k in keep},
                }
            )
        if args.short_pods:
            short_path = tmp_path / "short.toml"
            short_path.write_text(
                STRATEGY.format(
                    num_envs=args.num_envs,
                    seed=args.seed,
                    device=args.device,
                    pod_steps=args.short_pod_steps,
                    epochs=1,
                    pods=args.pods,
                )
            )
            rec = run_pool(
                short_path,
                data,
                args.pods,
                None,
                args.minutes,
                args.device,
                tmp_path / "runs_short",
                budget=f"{args.short_pods} pods",
            )
            n_pods = max(1, rec["pods_trained"])
            emit(
                {
                    "system": "tournament_short_pods",
                    "device": args.device,
                    "pods": args.pods,
                    "num_envs": args.num_envs,
                    "pod_steps": args.short_pod_steps,
                    "pods_trained": rec["pods_trained"],
                    "pods_failed": rec["pods_failed"],
                    "wall_s": rec["wall_s"],
                    "pods_per_s": rec["pods_trained"] / rec["wall_s"],
                    "inside_pod_s_per_pod": rec["inside_pod_s"] / n_pods,
                    "roundtrip_overhead_ms_per_pod": 1000
                    * (rec["pod_s"] - rec["inside_pod_s"])
                    / n_pods,
                    "dispatch_gap_ms_per_pod": 1000 * rec["dispatch_gap_s"] / n_pods,
                    "orchestration_s": rec["orchestration_s"],
                    "orchestration_share": rec["orchestration_share"],
                    "actor_startup_s": rec["actor_startup_s"],
                }
            )
        if args.population:
            run_population_table(args, data, tmp_path)
        for n in [int(x) for x in args.memory.split(",") if x.strip()]:
            mem_path = tmp_path / f"memory{n}.toml"
            mem_path.write_text(
                STRATEGY.format(
                    num_envs=args.num_envs,
                    seed=args.seed,
                    device=args.device,
                    pod_steps=args.memory_pod_steps,
                    epochs=1,
                    pods=n,
                )
            )
            emit(run_memory(mem_path, data, n, tmp_path / f"runs_memory{n}"))


if __name__ == "__main__":
    main()
