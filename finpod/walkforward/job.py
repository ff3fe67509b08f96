"""One fold × seed: train on the fold's train window, select on its validation window,
backtest on its backtest window. Runs in a Ray task or in the driver's process.

The job reads the whole dataset from a payload of numpy arrays (shared once through Ray's
object store) and slices the fold's three windows from it. The agent only trades the train
window while learning; its checkpoints are scored on the validation window (the candidates
of the checkpoint selection); the selected checkpoint alone is rolled over the backtest
window, with the benchmarks beside it. Nothing is written to disk: the job trains in
memory (:func:`finpod.agents.train.train` without a run directory keeps the best weights
and the candidates) and returns everything the driver persists (checkpoint bytes, the
training log, candidates, per-bar returns, metrics) as plain values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.agents import checkpoint_to_bytes, make_agent, read_checkpoint_bytes
from finpod.agents.train import checkpoint_id, make_trading_eval, train
from finpod.backtest.runner import backtest_market
from finpod.data.calendar import session_of
from finpod.data.payload import market_from_payload
from finpod.data.payload import market_to_payload as market_payload
from finpod.env import VecTradingEnv
from finpod.errors import FinpodError
from finpod.runs.candidates import candidate_set
from finpod.strategy import strategy_from_dict
from finpod.walkforward.folds import check_out_of_sample


@dataclass
class SeedJob:
    """What one fold × seed job needs besides the data."""

    fold: int
    """Fold index (0 = earliest)."""
    seed: int
    """Seed of the agent's networks, exploration and env resets."""
    rows: dict[str, tuple[int, int]]
    """Split → (start, stop) rows of the whole dataset."""
    strategy: dict[str, Any]
    """The resolved strategy (``Strategy.to_dict()``)."""
    total_steps: int
    """Env steps to train (on top of a warm start's)."""
    warm_start: bytes | None = None
    """Safetensors bytes of the previous fold's winner: start from its weights and
    optimizer state (the seed still draws its own exploration and resets)."""
    warm_start_from: str | None = None
    """Which fold and seed ``warm_start`` came from (recorded)."""
    threads: int = 1
    """torch threads of the job (its Ray CPUs)."""
    device: str = "cpu"
    """Device of the agent and rollouts."""


@dataclass
class SeedResult:
    """Everything one job produced, as plain values (what the driver persists)."""

    fold: int
    seed: int
    pod_id: str
    """Name of the agent in metrics and candidate ids (``s<seed>``)."""
    best_score: float
    """Best validation score of the run (its score name)."""
    best_env_steps: int
    """Env steps (of this job) at the selected checkpoint."""
    selected_id: str
    """Candidate id of the selected checkpoint (``s<seed>@<env_steps>``)."""
    score_name: str
    candidates: dict[str, Any]
    """``{"ids", "scores", "kinds", "returns": (T_val, n) float64}`` of every checkpoint
    scored on validation (the candidates of this job's selection)."""
    returns: pd.DataFrame
    """(T_bt − 1, 1 + B) per-bar backtest returns: ``agent``, then each benchmark."""
    metrics: dict[str, dict[str, float]]
    """Backtest metrics per strategy (``BacktestResult.metrics``)."""
    statistics: dict[str, Any]
    """PSR of the backtest, DSR and PBO of this job's checkpoint selection."""
    checkpoint: bytes
    """Safetensors bytes of the selected checkpoint."""
    metrics_csv: str
    """The training log as CSV text (the run's metric rows: pod_id, env_steps, wall_s,
    split, metric, value)."""
    train_seconds: float
    backtest_seconds: float
    env_steps: int
    """Env steps trained by this job."""
    warm_start_from: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def run_seed_job(payload: dict[str, Any], job: SeedJob) -> SeedResult:
    """Train, select on validation and backtest one fold × seed (see the module doc)."""

    torch.set_num_threads(max(1, int(job.threads)))
    market = market_from_payload(payload)
    # Before any training: a backtest window inside the train or validation window is
    # not out of sample.
    check_out_of_sample(job.fold, job.rows, session_of(market.timestamps))
    dev = torch.device(job.device)
    # Each window on the job's device (a no-op on CPU), so the env, the validation scoring
    # and the backtest rollout all run where the agent is.
    split = {
        name: replace(market.slice(*job.rows[name]), split=name).to(dev)
        for name in ("train", "validation", "backtest")
    }
    strategy = strategy_from_dict(job.strategy)
    spec = strategy.train
    config = strategy.config
    torch.manual_seed(job.seed)
    env = VecTradingEnv(split["train"], config, num_envs=spec.num_envs, seed=job.seed, device=dev)
    agent = make_agent(
        strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, job.seed
    )
    if job.warm_start is not None:
        meta, sd = read_checkpoint_bytes(job.warm_start, where=str(job.warm_start_from))
        if meta.get("algorithm") != strategy.algorithm:
            raise FinpodError(
                f"the warm start is a {meta.get('algorithm')} agent, the strategy trains "
                f"{strategy.algorithm}",
                "use one strategy for the whole walk-forward",
            )
        # Weights and optimizer moments of the winner; this seed's own counters and RNG.
        own = agent.state_dict()
        for key in ("counter.env_steps", "counter.updates", "rng.state"):
            sd[key] = own[key]
        agent.load_state_dict(sd)
    pod_id = f"s{job.seed}"
    t0 = time.perf_counter()
    # Trained in memory: the best weights, the candidates and the metric rows come back
    # in the result (the walk-forward directory persists what the job returns).
    result = train(
        agent,
        env,
        total_steps=int(job.total_steps),
        eval_fn=make_trading_eval(split["validation"], config, spec.score),
        eval_every=min(spec.eval_every, int(job.total_steps)),
        run_dir=None,
        progress=False,
        pod_id=pod_id,
        score_name=spec.score,
    )
    t1 = time.perf_counter()
    if result.best_state is None:
        raise FinpodError(
            f"fold {job.fold} seed {job.seed}: no checkpoint scored a finite validation "
            f"{spec.score}",
            "check the strategy's hyperparameters (the agent's numbers went non-finite)",
        )
    best = make_agent(
        strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, job.seed
    )
    best.load_state_dict(result.best_state)
    candidates = candidate_set((cid, score, "checkpoint", r) for cid, score, r in result.candidates)
    selected = checkpoint_id(pod_id, result.best_env_steps)
    annualization = float(market.annualization)
    bt = backtest_market(
        split["backtest"],
        lambda obs: best.act(obs, deterministic=True),
        config,
        run_id=f"fold-{job.fold:02d}-{pod_id}",
        num_trials=max(len(candidates), result.candidates_evaluated),
        selection={
            "candidates": candidates,
            "num_trials": result.candidates_evaluated,
            "selected_id": selected,
            "annualization": annualization,
        },
    )
    t2 = time.perf_counter()
    returns = bt.all_returns
    if not np.isfinite(returns["agent"].to_numpy(dtype=float)).all():
        raise FinpodError(
            f"fold {job.fold} seed {job.seed}: the backtest returns are not finite",
            "the selected agent's actions went non-finite",
        )
    return SeedResult(
        fold=job.fold,
        seed=job.seed,
        pod_id=pod_id,
        best_score=float(result.best_score),
        best_env_steps=int(result.best_env_steps),
        selected_id=selected,
        score_name=spec.score,
        candidates={
            "ids": list(candidates.ids),
            "scores": [float(s) for s in candidates.scores],
            "kinds": list(candidates.kinds),
            "returns": np.asarray(candidates.returns, dtype=np.float64),
        },
        returns=returns,
        metrics={str(c): {str(k): float(v) for k, v in bt.metrics[c].items()} for c in bt.metrics},
        statistics=dict(bt.statistics),
        checkpoint=checkpoint_to_bytes(best, env=env.config),
        metrics_csv=pd.DataFrame(result.metrics).to_csv(index=False),
        train_seconds=t1 - t0,
        backtest_seconds=t2 - t1,
        env_steps=int(agent.env_steps),
        warm_start_from=job.warm_start_from,
        info={"algorithm": strategy.algorithm, "device": str(dev)},
    )


__all__ = ["SeedJob", "SeedResult", "market_from_payload", "market_payload", "run_seed_job"]
