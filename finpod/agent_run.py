"""A single-agent run: strategy → env → agent → run directory (``kind = "agent"``).

:func:`train_single_agent` is :func:`finpod.pipeline.train_agent`'s body. The run
directory is written through :mod:`finpod.runs`, as a tournament's is: ``run.json``,
``strategy.toml``, ``leaderboard.json`` (one entry: the agent's best-on-validation
checkpoint), ``checkpoints/`` (also ``last.safetensors``, to resume), ``candidates.bin``,
``metrics.csv``, ``learning_curves.png`` and ``train.log``. Only the train split is traded
while learning and only the validation split is used to pick the checkpoint; the backtest
split is left for the backtest.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from finpod.agents import ALGORITHMS, load_checkpoint, make_agent
from finpod.agents.cross_section import hparams_for_env
from finpod.agents.train import make_trading_eval, train
from finpod.data import Manifest, load_split
from finpod.device import pick_device
from finpod.env import VecTradingEnv
from finpod.env.config import EQUAL_WEIGHT
from finpod.errors import FinpodError
from finpod.runs import (
    STRATEGY_FILE,
    Entry,
    Leaderboard,
    RunDir,
    checkpoint_name,
    find_run,
    load_candidates,
    read_run_info,
)
from finpod.strategy import Strategy, as_strategy


def train_single_agent(
    strategy_path: Strategy | str | Path | None,
    data: str | Path | None,
    out: str | Path = "runs",
    *,
    device: str | None = None,
    seed: int | None = None,
    total_steps: int | None = None,
    run_id: str | None = None,
    resume: str | Path | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    on_run: Callable[..., None] | None = None,
) -> Path:
    """Train the strategy's agent (or continue run ``resume``); returns the run directory.

    See :func:`finpod.pipeline.train_agent` for the arguments; ``on_run(run_dir)`` is
    called once the run directory is known, before training starts; a resumed run's as
    ``on_run(run_dir, resumed_from=N, total_steps=T)`` (N: the env steps of its last
    checkpoint, T: the steps it trains to).
    """

    previous: dict[str, Any] | None = None
    if resume is not None:
        run_dir = find_run(resume, out)
        previous = read_run_info(run_dir)
        strategy_path = run_dir / STRATEGY_FILE
        data = Path(data) if data is not None else Path(previous["dataset"]["path"])
        seed = previous["seed"] if seed is None else seed
    if strategy_path is None or data is None:
        raise FinpodError("training needs --strategy and --data", "or --resume RUN")
    strategy = as_strategy(strategy_path)
    if seed is not None:
        strategy = strategy.with_train(seed=int(seed))
    if device is not None:
        strategy = strategy.with_train(device=device)
    if total_steps is not None:
        if total_steps <= 0:
            raise FinpodError(f"--steps must be positive, got {total_steps}", "e.g. --steps 100000")
        strategy = strategy.with_train(total_steps=int(total_steps))
    spec = strategy.train
    dev = pick_device(spec.device)
    manifest = Manifest.load(data)
    train_market = load_split(data, "train", device=dev)
    valid_market = load_split(data, "validation", device=dev)
    env_config = strategy.config
    torch.manual_seed(spec.seed)
    env = VecTradingEnv(
        train_market, env_config, num_envs=spec.num_envs, seed=spec.seed, device=dev
    )
    if previous is not None:
        if manifest.hash != previous["dataset"]["hash"]:
            raise FinpodError(
                f"the dataset at {data} is not the one run {run_dir.name} was trained on",
                "pass --data with the run's dataset",
            )
        last = RunDir(run_dir).checkpoint("last")
        if not last.is_file():
            raise FinpodError(
                f"run {run_dir.name} has no checkpoint to resume from yet",
                "start it again without --resume",
            )
        agent = load_checkpoint(last, dev)
        if agent.algorithm != strategy.algorithm:
            raise FinpodError(
                f"{last} holds a {agent.algorithm} agent but the run's strategy is "
                f"{strategy.algorithm}",
                "the run directory was modified; start a new run",
            )
        if on_run is not None:
            on_run(run_dir, resumed_from=int(agent.env_steps), total_steps=spec.total_steps)
        return _train_and_record(
            agent, env, strategy, valid_market, env_config, run_dir, progress, log
        )
    strategy = replace(
        strategy,
        hparams=hparams_for_env(ALGORITHMS[strategy.algorithm][0], strategy.hparams, env),
    )
    agent = make_agent(
        strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, spec.seed
    )

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_id = run_id or f"{strategy.algorithm}-{stamp}-s{spec.seed}"
    run_dir = Path(out) / run_id
    if run_dir.exists() and any(run_dir.iterdir()):
        raise FinpodError(
            f"run directory {run_dir} already exists", "choose another --run-id or --out"
        )
    RunDir.create(
        run_dir,
        kind="agent",
        strategy=strategy.to_dict(),
        dataset_path=Path(data),
        dataset_hash=manifest.hash,
        seed=spec.seed,
        extra={"device": str(dev)},
        inputs={  # files read outside the run directory: the run keeps a copy and a hash
            "strategy": strategy.path,
            "reference": None if env_config.reference == EQUAL_WEIGHT else env_config.reference,
            "benchmark": Path(data) / bench if (bench := manifest.file("benchmark")) else None,
        },
    )
    if on_run is not None:
        on_run(run_dir, total_steps=spec.total_steps)
    return _train_and_record(agent, env, strategy, valid_market, env_config, run_dir, progress, log)


def _train_and_record(
    agent: Any,
    env: Any,
    strategy: Any,
    valid_market: Any,
    env_config: Any,
    run_dir: Path,
    progress: bool,
    log: Callable[[str], None] | None,
) -> Path:
    """Train ``agent`` to the strategy's step budget; write checkpoints and leaderboard."""

    spec = strategy.train
    pod_id = f"{strategy.algorithm}-0"
    started = time.perf_counter()
    try:
        with _sigterm_as_interrupt():
            result = train(
                agent,
                env,
                total_steps=spec.total_steps,
                eval_fn=make_trading_eval(valid_market, env_config, spec.score),
                eval_every=spec.eval_every,
                run_dir=run_dir,
                progress=progress,
                pod_id=pod_id,
                score_name=spec.score,
                log=log,
            )
    except KeyboardInterrupt:
        # A stopped run is a usable run: its board names the best checkpoint so far.
        entry = _board_so_far(run_dir, strategy, pod_id)
        if entry is not None:
            RunDir(run_dir).record_stopped(int(agent.env_steps), spec.total_steps)
            if log is not None:
                log(
                    f"stopped at {int(agent.env_steps)} of {spec.total_steps} env steps: the "
                    f"board holds the best checkpoint so far ({entry.env_steps} env steps, "
                    f"validation {spec.score} {entry.score:.3f}); `finpod backtest "
                    f"{run_dir}` tests it, `finpod train --resume {run_dir}` continues"
                )
        raise
    RunDir(run_dir).record_stopped(None)
    entry = Entry(
        pod_id=pod_id,
        algorithm=strategy.algorithm,
        hparams=strategy.to_dict()["agent"]["hparams"],
        score=result.best_score,
        checkpoint=checkpoint_name(pod_id),
        history=result.history,
        env_steps=result.best_env_steps,
        updates=result.best_updates,
    )
    Leaderboard.single(run_dir, entry, spec.score, result.candidates_evaluated)
    RunDir(run_dir).record_learning(entry)
    if log is not None:
        log(
            f"done in {time.perf_counter() - started:.0f} s: best validation {spec.score} "
            f"{result.best_score:.3f} at {result.best_env_steps} env steps"
        )
    return run_dir


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM (``kill``, a job scheduler, ``timeout``) stops training as
    Ctrl-C does, so the run's board is written before the process ends (main thread only:
    elsewhere the signal keeps its handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _board_so_far(run_dir: Path, strategy: Any, pod_id: str) -> Entry | None:
    """Write the board of a run stopped mid-training: its best-on-validation checkpoint so
    far, with the validation history of ``metrics.csv`` (None, and nothing written, before
    the first validation point)."""
    run = RunDir.open(run_dir)
    best_file = run.checkpoint(pod_id)
    score_name = strategy.train.score
    rows = [r for r in run.metrics if r[0] == pod_id]
    history = [
        {"env_steps": r[1], "score": r[5]}
        for r in rows
        if r[3] == "validation" and r[4] == score_name
    ]
    finite = [h for h in history if math.isfinite(h["score"])]
    if not best_file.is_file() or not finite:
        return None
    best = max(finite, key=lambda h: h["score"])
    ratio = next(
        (
            r[5]
            for r in rows
            if r[3] == "train" and r[4] == "updates_per_env_step" and r[1] == best["env_steps"]
        ),
        math.nan,
    )
    entry = Entry(
        pod_id=pod_id,
        algorithm=strategy.algorithm,
        hparams=strategy.to_dict()["agent"]["hparams"],
        score=float(best["score"]),
        checkpoint=checkpoint_name(pod_id),
        history=history,
        env_steps=int(best["env_steps"]),
        updates=round(ratio * best["env_steps"]) if math.isfinite(ratio) else 0,
    )
    candidates = max(len(load_candidates(run.path)), len(history))
    Leaderboard.single(run.path, entry, score_name, candidates)
    run.record_learning(entry)
    return entry
