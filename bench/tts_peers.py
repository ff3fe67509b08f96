"""The systems a user would pick instead of a finpod tournament, at its wall time and CPUs.

Each trains finpod's own learner (:class:`finpod.tournament.pod.Pod`: one agent, W
vectorized envs, segments of ``pod_steps`` env steps each ending with a validation score,
a segment continued from the previous one's checkpoint bytes: weights, optimizer state and
counters) and backtests its best checkpoint on validation with finpod's backtest
(:func:`finpod.backtest.runner.backtest_market`, the agent's column of its metrics):

- :func:`random_search`: fresh pods drawn from the strategy's ``[search]`` space (algorithm,
  hyperparameters, ``[search.env]`` execution controls: the tournament's own draw,
  :meth:`finpod.tournament.generator.Generator.fresh`), each trained to the end of its
  share of the budget; the best segment on validation is backtested.
- :func:`selection_only`: the strategy's base ``[agent]`` and ``[env]`` settings
  (:meth:`~finpod.tournament.generator.Generator.base`) with as many seeds as there are
  slots (or ``seeds``), best on validation: the variance-exploitation control of MF-PBT.
- :func:`tune_search`: Ray Tune's ``PopulationBasedTraining`` or ``ASHAScheduler`` driving
  the same learner as a function trainable over the same ``[search]`` space; one
  ``training_iteration`` is one segment and its validation score (``val_ir``).

Every system runs ``cpus`` slots of one CPU (one torch thread) side by side for ``wall_s``
seconds: a line's last segment gets the time left as its cap (finpod's learners stop
between their own steps and the cut segment is still scored), so a system ends on time.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: A segment is not started with less time than this left (seconds): it could not
#: finish a rollout and its validation.
MIN_SEGMENT_S = 3.0
#: The metrics of a backtest line (rows of :data:`finpod.backtest.metrics.METRIC_NAMES`).
BACKTEST_KEYS = ("information_ratio", "ir_t_stat", "active_return", "tracking_error")


@dataclass(frozen=True)
class Budget:
    """What every system is given: wall seconds and slots of one CPU each."""

    wall_s: float
    """Seconds from the first segment's start until every line stops."""
    cpus: int
    """Slots side by side, one CPU and one torch thread each."""


# ----------------------------------------------------------------------------- setup
def search_setup(strategy_path: Path, seed: int) -> tuple[Any, Any, Any]:
    """(strategy, tournament config, generator) of a strategy file: the tournament's own
    search space and draws (seeded by ``seed``)."""
    from finpod.strategy import load_strategy
    from finpod.tournament.generator import Generator
    from finpod.tournament.launch import resolve

    strategy = load_strategy(strategy_path)
    config, space, _ = resolve(strategy, seed=seed)
    return strategy, config, Generator(space, config, seed, strategy.train.num_envs)


def val_t(score: float, returns: Any, annualization: float) -> float | None:
    """t-statistic of an annualized validation IR over ``len(returns)`` bars."""
    if returns is None or not math.isfinite(score) or annualization <= 0:
        return None
    return round(score * math.sqrt(len(returns) / annualization), 4)


# ----------------------------------------------------------------------------- one line
_POD: dict[str, Any] = {}


def _pod(data: str, strategy_path: str) -> Any:
    """This process's :class:`~finpod.tournament.pod.Pod` on the train and validation
    splits of ``data`` (built once per process, with one torch thread)."""
    key = f"{data}|{strategy_path}"
    if key not in _POD:
        import torch

        from finpod.data import load_split
        from finpod.strategy import load_strategy
        from finpod.tournament.pod import Pod

        torch.set_num_threads(1)
        strategy = load_strategy(strategy_path)
        train, valid = load_split(data, "train"), load_split(data, "validation")
        _POD.clear()
        _POD[key] = Pod(train, valid, strategy.config, "cpu")
    return _POD[key]


def train_line(data: str, strategy_path: str, spec: Any, seconds: float, deadline: float) -> dict:
    """Train ``spec`` segment after segment (each ``spec.steps`` env steps, continued from
    the previous segment's checkpoint) for ``seconds``, never past ``deadline`` (Unix time);
    keep the best segment on validation. Runs in a worker process."""
    import dataclasses

    t0 = time.time()
    pod = _pod(data, strategy_path)
    ann = float(pod.valid_market.annualization)
    end = min(deadline, t0 + seconds)
    parent, history, best = None, [], None
    own, segments, env_steps, updates, failure = 0.0, 0, 0, 0, ""
    curve = []
    while end - time.time() >= MIN_SEGMENT_S:
        seg = dataclasses.replace(
            spec,
            pod_id=f"{spec.pod_id}-{segments}",
            seed=spec.seed + 7 * segments,
            max_seconds=end - time.time(),
            base_history=history,
        )
        t = time.perf_counter()
        res = pod.train(seg, parent)
        own += time.perf_counter() - t
        segments += 1
        if res.failure:
            failure = res.failure
            break
        parent, history = res.checkpoint, res.history
        env_steps, updates = int(res.env_steps), int(res.updates)
        curve.append((round(time.time() - t0, 1), env_steps, round(res.score, 4)))
        if best is None or res.score > best["score"]:
            best = {
                "score": float(res.score),
                "val_t": val_t(res.score, res.returns, ann),
                "checkpoint": res.checkpoint,
                "env_steps": env_steps,
                "updates": updates,
                "segment": segments,
            }
    return {
        "pod_id": spec.pod_id,
        "algorithm": spec.algorithm,
        "hparams": {k: v for k, v in spec.hparams.items() if not isinstance(v, (list, dict))},
        "env": dict(spec.env),
        "seconds": round(time.time() - t0, 1),
        "own_s": round(own, 1),
        "segments": segments,
        "env_steps": env_steps,
        "updates": updates,
        "failure": failure,
        "best": best,
        "curve": curve,
    }


def run_lines(data: Path, strategy_path: Path, specs: list[Any], budget: Budget) -> tuple:
    """Train ``specs`` on ``budget.cpus`` worker processes: spec i in slot i mod cpus, each
    slot's lines one after another, each line an equal share of the slot's wall time.
    Returns (lines, wall seconds)."""
    per_slot = [0] * budget.cpus
    for i in range(len(specs)):
        per_slot[i % budget.cpus] += 1
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    os.environ.update(env)
    # The clock starts before the workers do, as the tournament's wall time includes
    # starting its actors and loading the splits into them.
    t0 = time.time()
    deadline = t0 + budget.wall_s
    with ProcessPoolExecutor(budget.cpus, mp_context=get_context("spawn")) as pool:
        list(pool.map(_warm, [(str(data), str(strategy_path))] * budget.cpus))
        left = deadline - time.time()
        futures = [
            pool.submit(
                train_line,
                str(data),
                str(strategy_path),
                spec,
                left / per_slot[i % budget.cpus],
                deadline,
            )
            for i, spec in enumerate(specs)
        ]
        lines = [f.result() for f in futures]
    return lines, time.time() - t0


def _warm(args: tuple[str, str]) -> None:
    _pod(*args)
    time.sleep(0.5)  # let the other workers take their share of the warm-up calls


# ----------------------------------------------------------------------------- backtest
def backtest_checkpoint(data: Path, strategy_path: Path, checkpoint: bytes, controls: dict) -> dict:
    """finpod's backtest of one checkpoint (bytes of its safetensors file) with the
    strategy's ``[env]`` and the line's execution controls: the agent's and, on a
    planted market, the scripted rule's line."""
    from finpod.agents.checkpoint import load_checkpoint_bytes
    from finpod.backtest.agents import ensemble_policy
    from finpod.backtest.runner import backtest_market
    from finpod.data import load_split
    from finpod.strategy import load_strategy
    from finpod.tournament.search import pod_env_config

    agent = load_checkpoint_bytes(checkpoint, "cpu")
    config = pod_env_config(load_strategy(strategy_path).config, controls)
    result = backtest_market(load_split(data, "backtest"), ensemble_policy([agent]), config)
    out: dict[str, Any] = {}
    for name in ("agent", "signal_rule"):
        if name in result.metrics.columns:
            col = result.metrics[name]
            out[name] = {
                k: round(float(col[k]), 4) for k in BACKTEST_KEYS if k in col and col[k] == col[k]
            }
    return out


def lines_row(lines: list[dict], wall: float, data: Path, strategy_path: Path) -> dict:
    """A system's row from its lines: the best segment on validation, backtested."""
    scored = [ln for ln in lines if ln["best"] is not None]
    if not scored:
        return {"wall_s": round(wall, 1), "error": "no line scored", "lines": _brief(lines)}
    win = max(scored, key=lambda ln: ln["best"]["score"])
    best = win["best"]
    env_steps = sum(ln["env_steps"] for ln in lines)
    return {
        "validation_ir": round(best["score"], 4),
        "validation_ir_t": best["val_t"],
        "backtest": backtest_checkpoint(data, strategy_path, best["checkpoint"], win["env"]),
        "env_steps": env_steps,
        "selected_env_steps": best["env_steps"],
        "grad_updates_per_env_step": round(best["updates"] / max(1, best["env_steps"]), 6),
        "wall_s": round(wall, 1),
        "candidates": sum(ln["segments"] for ln in lines),
        "selected": {k: win[k] for k in ("pod_id", "algorithm", "hparams", "env")},
        "lines": _brief(lines),
    }


def _brief(lines: list[dict]) -> list[dict]:
    return [
        {
            "pod_id": ln["pod_id"],
            "algorithm": ln["algorithm"],
            "segments": ln["segments"],
            "env_steps": ln["env_steps"],
            "best_validation_ir": None if ln["best"] is None else round(ln["best"]["score"], 4),
            "own_s": ln["own_s"],
            **({"failure": ln["failure"]} if ln["failure"] else {}),
        }
        for ln in lines
    ]


# ----------------------------------------------------------------------------- systems
def random_search(
    data: Path, strategy_path: Path, seed: int, budget: Budget, pods: int | None = None
) -> dict:
    """``pods`` fresh pods (default two per slot) drawn from ``[search]``, each trained for
    its share of the budget; the best segment on validation, backtested."""
    _, _, gen = search_setup(strategy_path, seed)
    n = pods or 2 * budget.cpus
    specs = [gen.fresh(i) for i in range(n)]
    lines, wall = run_lines(data, strategy_path, specs, budget)
    row = lines_row(lines, wall, data, strategy_path)
    row["pods"] = n
    row["pod_seconds"] = round(budget.wall_s * budget.cpus / n, 1)
    row["slot_utilisation"] = _utilisation(lines, wall, budget.cpus)
    return row


def selection_only(
    data: Path, strategy_path: Path, seed: int, budget: Budget, seeds: int | None = None
) -> dict:
    """The base ``[agent]`` and ``[env]`` settings with ``seeds`` seeds (default one per
    slot, each for the whole wall time), best on validation, backtested."""
    _, _, gen = search_setup(strategy_path, seed)
    n = seeds or budget.cpus
    specs = [gen.base(i) for i in range(n)]
    lines, wall = run_lines(data, strategy_path, specs, budget)
    row = lines_row(lines, wall, data, strategy_path)
    row["seeds_trained"] = n
    row["slot_utilisation"] = _utilisation(lines, wall, budget.cpus)
    return row


def _utilisation(lines: list[dict], wall: float, cpus: int) -> float:
    """Share of the slots' wall time spent inside the learner (training and validation)."""
    return round(sum(ln["own_s"] for ln in lines) / max(1e-9, wall * cpus), 3)


# ----------------------------------------------------------------------------- Ray Tune
SEP = "__"  # config keys: "<algorithm>__<field>", "env__<field>" (Tune reads "/" as a path)


def tune_space(space: Any) -> tuple[dict, dict, dict]:
    """(param_space, PBT hyperparam_mutations, bounds) of a finpod search space.

    ``{low, high, log}`` → ``tune.loguniform`` / ``tune.uniform`` (``tune.lograndint`` /
    ``tune.randint`` for integer fields); a list → ``tune.choice``; fixed values stay in
    finpod's space. PBT mutates what a tournament's child perturbs: numeric ranges of the
    hyperparameters that do not fix network shapes, and every ``[search.env]`` range and
    numeric choice. ``bounds`` (key → (low, high, int)) clips PBT's multiplied values back
    into their declared range, as finpod's perturbation does."""
    from ray import tune

    def domain(spec: Any) -> Any:
        if spec.kind == "choice":
            return tune.choice(list(spec.choices))
        lo, hi = spec.low, spec.high
        if spec.kind == "int":
            return (
                tune.lograndint(int(lo), int(hi) + 1)
                if spec.log
                else tune.randint(int(lo), int(hi) + 1)
            )
        return tune.loguniform(lo, hi) if spec.log else tune.uniform(lo, hi)

    params: dict[str, Any] = {"algorithm": tune.choice(list(space.algorithms))}
    mutations: dict[str, Any] = {}
    bounds: dict[str, tuple[float, float, bool]] = {}
    for algo, aspace in space.algorithms.items():
        for spec in aspace.params:
            if spec.kind == "fixed":
                continue
            key = f"{algo}{SEP}{spec.name}"
            params[key] = domain(spec)
            if spec.kind in ("float", "int") and spec.name not in aspace.frozen:
                mutations[key] = params[key]
                bounds[key] = (spec.low, spec.high, spec.kind == "int")
    for spec in space.env:
        if spec.kind == "fixed":
            continue
        key = f"env{SEP}{spec.name}"
        params[key] = domain(spec)
        numeric = spec.kind in ("float", "int") or all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in spec.choices
        )
        if numeric:
            mutations[key] = params[key]
        if spec.kind in ("float", "int"):
            bounds[key] = (spec.low, spec.high, spec.kind == "int")
    return params, mutations, bounds


def pod_settings(config: dict, space: Any) -> tuple[str, dict, dict]:
    """(algorithm, hyperparameters, execution controls) of a Tune config: the algorithm's
    base and fixed values from finpod's space, its searched values from ``config``."""
    algo = config["algorithm"]
    aspace = space.algorithms[algo]
    hp = dict(aspace.base)
    for spec in aspace.params:
        hp[spec.name] = spec.value if spec.kind == "fixed" else config[f"{algo}{SEP}{spec.name}"]
    env = {
        spec.name: spec.value if spec.kind == "fixed" else config[f"env{SEP}{spec.name}"]
        for spec in space.env
    }
    return algo, hp, env


def clip_config(bounds: dict) -> Any:
    """PBT's ``custom_explore_fn``: mutated values clipped into their declared ranges."""

    def explore(config: dict) -> dict:
        for key, (lo, hi, is_int) in bounds.items():
            if key in config:
                x = min(max(float(config[key]), lo), hi)
                config[key] = int(round(x)) if is_int else x
        return config

    return explore


def tune_trainable(
    config: dict,
    *,
    data: str,
    strategy_path: str,
    seed: int,
    deadline: float,
    hold_until: float | None = None,
) -> None:
    """One Tune trial: finpod's learner, one segment and its validation score per
    ``training_iteration``; its checkpoint (a finpod safetensors file, and the lineage's
    validation history as JSON) is reported every iteration and restored by
    ``tune.get_checkpoint()`` (PBT's exploit, a paused trial's resume)."""
    from ray import tune

    from finpod.tournament.generator import PodSpec

    t_entry = time.time()
    pod = _pod(data, strategy_path)
    strategy, tconfig, gen = search_setup(Path(strategy_path), seed)
    algo, hp, env = pod_settings(config, gen.space)
    ann = float(pod.valid_market.annualization)
    parent, history, iteration = None, [], 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as folder:
            parent = (Path(folder) / "agent.safetensors").read_bytes()
            state = json.loads((Path(folder) / "lineage.json").read_text())
        history, iteration = state["history"], int(state["iteration"])
    trial = tune.get_context().get_trial_id()
    setup_s = time.time() - t_entry
    if parent is None and hold_until is not None and deadline - time.time() < MIN_SEGMENT_S:
        # Too late for a fresh trial: hold the slot until Tune's time budget ends, so
        # that ASHA does not start and end empty trials in a loop until then.
        time.sleep(max(0.0, hold_until - time.time()))
        return
    while deadline - time.time() >= MIN_SEGMENT_S:
        spec = PodSpec(
            pod_id=f"{trial}-{iteration}",
            algorithm=algo,
            hparams=hp,
            seed=(zlib.crc32(trial.encode()) + 7 * iteration + seed) % (2**31 - 1),
            steps=tconfig.pod_steps,
            epochs=1,
            num_envs=strategy.train.num_envs,
            num_learners=1,
            score_name=tconfig.score,
            max_seconds=deadline - time.time(),
            env=env,
            base_history=history,
        )
        t = time.perf_counter()
        res = pod.train(spec, parent)
        own = time.perf_counter() - t
        iteration += 1
        if res.failure:
            tune.report({"val_ir": -1e9, "failure": res.failure, "own_s": own})
            return
        parent, history = res.checkpoint, res.history
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "agent.safetensors").write_bytes(res.checkpoint)
            (Path(folder) / "lineage.json").write_text(
                json.dumps(
                    {
                        "history": history,
                        "iteration": iteration,
                        "algorithm": algo,
                        "hparams": {k: v for k, v in hp.items() if isinstance(v, (int, float))},
                        "env": env,
                    }
                )
            )
            tune.report(
                {
                    "val_ir": float(res.score),
                    "val_ir_t": val_t(res.score, res.returns, ann),
                    "env_steps": int(res.env_steps),
                    "steps_done": int(res.steps_done),
                    "updates": int(res.updates),
                    "own_s": own,
                    "setup_s": setup_s,
                },
                checkpoint=tune.Checkpoint.from_directory(folder),
            )
        setup_s = 0.0


def tune_search(
    data: Path,
    strategy_path: Path,
    seed: int,
    budget: Budget,
    scheduler: str,
    work: Path,
    samples: int | None = None,
) -> dict:
    """Ray Tune (``scheduler``: ``"pbt"`` or ``"asha"``) over the strategy's ``[search]``
    space with finpod's learner as a function trainable, ``budget.cpus`` trials of one CPU
    at once for ``budget.wall_s``; the best reported checkpoint on validation, backtested.

    PBT: a population of ``samples`` (default two per slot, time-multiplexed by Tune),
    exploit and explore every ``grace`` segments, factors 1 + ``perturb`` of the
    ``[tournament]`` table. ASHA: ``grace`` segments, reduction factor ``eta``, new trials
    sampled until the time is up. With ``base_pod = true`` the first trial is the
    strategy's own settings, as the tournament's first pod is. Each trial's last segment
    is capped by the time left; Tune's ``time_budget_s`` (8 % more, at least 5 s, the
    tournament's give-up margin) ends what is still running.
    """
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining
    from ray.tune.search.basic_variant import BasicVariantGenerator

    strategy, tconfig, gen = search_setup(strategy_path, seed)
    params, mutations, bounds = tune_space(gen.space)
    points = []
    if tconfig.base_pod and (base := gen.space.base_pod()) is not None:
        algo, hp, env = base
        point = {"algorithm": algo}
        aspace = gen.space.algorithms[algo]
        for spec in aspace.params:
            if spec.kind != "fixed" and spec.name in hp:
                point[f"{algo}{SEP}{spec.name}"] = hp[spec.name]
        for name, value in env.items():
            point[f"env{SEP}{name}"] = value
        points.append(point)
    if scheduler == "pbt":
        n = samples or 2 * budget.cpus
        sched = PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=max(1, int(tconfig.grace)),
            hyperparam_mutations=mutations,
            custom_explore_fn=clip_config(bounds),
            perturbation_factors=(1.0 + tconfig.perturb, 1.0 / (1.0 + tconfig.perturb)),
        )
    elif scheduler == "asha":
        n = samples or 10_000  # sampled lazily until the time budget ends
        sched = ASHAScheduler(
            time_attr="training_iteration",
            max_t=10_000,
            grace_period=max(1, int(tconfig.grace)),
            reduction_factor=max(2, int(tconfig.eta)),
        )
    else:
        raise ValueError(f"unknown Tune scheduler {scheduler!r}: pbt or asha")

    # Ray's workers import this module and finpod from the driver's paths.
    paths = [str(REPO), str(Path(__file__).resolve().parent)]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    # A trial that starts after the deadline ends without a score (no segment fits).
    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    # The clock starts before Ray does, as the tournament's wall time includes its start.
    t0 = time.time()
    ray.init(num_cpus=budget.cpus, include_dashboard=False, log_to_driver=False)
    init_s = time.time() - t0
    try:
        time_budget = max(budget.wall_s * 1.08, budget.wall_s + 5.0) - init_s
        trainable = tune.with_resources(
            tune.with_parameters(
                tune_trainable,
                data=str(data),
                strategy_path=str(strategy_path),
                seed=seed,
                deadline=t0 + budget.wall_s,
                hold_until=t0 + init_s + time_budget + 1.0 if scheduler == "asha" else None,
            ),
            {"cpu": 1},
        )
        tuner = tune.Tuner(
            trainable,
            param_space=params,
            tune_config=tune.TuneConfig(
                metric="val_ir",
                mode="max",
                scheduler=sched,
                search_alg=BasicVariantGenerator(points_to_evaluate=points or None),
                num_samples=n,
                max_concurrent_trials=budget.cpus,
                time_budget_s=time_budget,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name=f"{scheduler}-{int(t0)}",
                storage_path=str((work / "tune").resolve()),
                verbose=0,
                checkpoint_config=tune.CheckpointConfig(
                    # Each trial keeps its best checkpoints on validation and its latest;
                    # PBT needs a few more, for the trials that exploit them.
                    num_to_keep=4 if scheduler == "pbt" else 2,
                    checkpoint_score_attribute="val_ir",
                    checkpoint_score_order="max",
                ),
            ),
        )
        results = tuner.fit()
        wall = time.time() - t0
    finally:
        ray.shutdown()
    return tune_row(results, wall, init_s, budget, data, strategy_path, scheduler, n, points, t0)


def tune_row(results, wall, init_s, budget, data, strategy_path, scheduler, n, points, t0) -> dict:
    """A Tune system's row: its best reported checkpoint on validation, backtested, and
    what Tune cost (wall seconds outside finpod's learner, per trial start and iteration)."""
    import ray

    best, best_metrics, frames = None, None, []
    for r in results:
        if r.metrics_dataframe is not None and len(r.metrics_dataframe):
            frames.append(r.metrics_dataframe)
        for ckpt, metrics in r.best_checkpoints or []:
            if best_metrics is None or metrics.get("val_ir", -math.inf) > best_metrics["val_ir"]:
                best, best_metrics = ckpt, metrics
    rows = [rec for f in frames for rec in f.to_dict("records") if "own_s" in rec]
    errored = sum(1 for r in results if r.error is not None)
    own = sum(float(rec["own_s"]) for rec in rows)

    def outside(first: bool, total: bool = False) -> float | None:
        """Median (or ``total``) seconds of an iteration outside finpod's learner (Tune's
        ``time_this_iter_s`` minus the segment's own time): the first iteration after a
        trial (re)starts (actor, imports, restore) or the others (report, checkpoint)."""
        xs = [
            float(rec["time_this_iter_s"]) - float(rec["own_s"])
            for rec in rows
            if (float(rec.get("setup_s") or 0) > 0) == first
        ]
        if not xs:
            return None
        return round(sum(xs) if total else statistics.median(xs), 3)

    cost = {
        "ray_version": ray.__version__,
        "trials_created": len(results),
        "trials_run": len(frames),
        "errored_trials": errored,
        "trial_starts": sum(1 for rec in rows if float(rec.get("setup_s") or 0) > 0),
        "iterations": len(rows),
        "ray_init_s": round(init_s, 1),  # inside wall_s
        "slot_s": round(wall * budget.cpus, 1),
        "learner_s": round(own, 1),
        "slot_utilisation": round(own / max(1e-9, wall * budget.cpus), 3),
        "trial_start_s_median": outside(first=True),
        "trial_start_s_total": outside(first=True, total=True),
        "iteration_s_median": outside(first=False),
        "reuse_actors": True,
    }
    row: dict[str, Any] = {"wall_s": round(wall, 1), "tune": cost, "samples": n}
    row["starts_from_base"] = bool(points)
    # Every reported validation score, in seconds since the clock started (before Ray):
    # Tune stamps its results in whole seconds.
    curve = sorted(
        (round(float(rec["timestamp"]) - t0, 1), float(rec["val_ir"]))
        for rec in rows
        if rec.get("val_ir") is not None and rec.get("timestamp") is not None
    )
    from time_to_signal import time_to_fraction

    row["curve"] = curve
    row["time_to_90pct_validation_s"] = time_to_fraction(curve)
    if best is None:
        return {**row, "error": "no trial reported a checkpoint"}
    with best.as_directory() as folder:
        checkpoint = (Path(folder) / "agent.safetensors").read_bytes()
        lineage = json.loads((Path(folder) / "lineage.json").read_text())
    env = lineage["env"]
    steps = int(best_metrics["env_steps"])
    row.update(
        {
            "validation_ir": round(float(best_metrics["val_ir"]), 4),
            "validation_ir_t": best_metrics.get("val_ir_t"),
            "backtest": backtest_checkpoint(data, strategy_path, checkpoint, env),
            "env_steps": int(sum(float(rec.get("steps_done") or 0) for rec in rows)),
            "selected_env_steps": steps,
            "grad_updates_per_env_step": round(int(best_metrics["updates"]) / max(1, steps), 6),
            "candidates": len(rows),
            "selected": {
                "trial": best_metrics.get("trial_id"),
                "iteration": best_metrics.get("training_iteration"),
                "algorithm": lineage.get("algorithm"),
                "hparams": lineage.get("hparams"),
                "env": env,
            },
        }
    )
    return row
