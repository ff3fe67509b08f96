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

import errno
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from finpod.agents import ALGORITHMS, load_checkpoint, make_agent
from finpod.agents.cross_section import hparams_for_env
from finpod.agents.memory import check_memory
from finpod.agents.train import make_trading_eval, train
from finpod.backtest.split_hashes import split_hashes
from finpod.data import Manifest, load_split
from finpod.device import pick_device
from finpod.env import VecTradingEnv
from finpod.env.config import EQUAL_WEIGHT
from finpod.errors import FinpodError
from finpod.runs import (
    CANDIDATES_FILE,
    CHECKPOINT_DIR,
    LEADERBOARD_FILE,
    STRATEGY_FILE,
    TENSORBOARD_DIR,
    Entry,
    Leaderboard,
    RunDir,
    checkpoint_name,
    find_run,
    read_run_info,
    run_folder,
)
from finpod.runs.inputs import file_sha256, recorded
from finpod.runs.lock import LOCK_FILE, FolderLock
from finpod.runs.stopped import resume_checkpoint, write_stopped_board
from finpod.strategy import Strategy, as_strategy, load_strategy

#: Idle CPUs per torch thread of one agent: a thread is added for every two idle CPUs, so
#: a neighbour that gets busy later leaves no thread waiting for a core. Measured on 2
#: CPUs (strategies/ppo.toml, 40,000 env steps): 2 threads took 14 s against 1 thread's
#: 19 s with the machine nearly idle, but 70 s against 29–31 s beside two busy processes,
#: and up to 14× longer at a load of 1 to 10 (bench/threads.py).
CPUS_PER_THREAD = 2
#: The most threads :func:`train_threads` chooses: one agent's networks are small, and
#: more threads than this add only contention.
MAX_THREADS = 4


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (``os.sched_getaffinity``), capped
    by a cgroup v2 CPU quota (``/sys/fs/cgroup/cpu.max``) where one is set."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota readable: the affinity mask is the limit
    return max(1, cpus)


def train_threads(cpus: int | None = None, load: float | None = None) -> int:
    """Torch intra-op threads for one agent's training: one per :data:`CPUS_PER_THREAD`
    idle usable CPUs, at least 1 and at most :data:`MAX_THREADS`.

    ``cpus``: :func:`usable_cpus` by default; ``load``: the 1-minute load average
    (``os.getloadavg``) by default, the work other processes keep on the machine. An
    agent on a shared machine trains with a thread a core can always be found for (torch's
    default, one thread per CPU, waits at every parallel step for a thread whose core is
    taken)."""
    cpus = usable_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    idle = max(0.0, cpus - load)
    return max(1, min(MAX_THREADS, int(idle // CPUS_PER_THREAD)))


def train_single_agent(
    strategy_path: Strategy | str | Path | None,
    data: str | Path | None,
    runs: str | Path = "runs",
    *,
    device: str | None = None,
    seed: int | None = None,
    total_steps: int | None = None,
    threads: int | None = None,
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
    checkpoint, T: the steps it trains to), a finished one's with ``finished=True`` and
    ``seed=`` (and nothing is written).

    Torch trains with ``threads`` intra-op threads (default: :func:`train_threads`'s
    choice, or a resumed run's recorded count), set when training starts and put back
    when it ends; ``run.json`` records the count beside the seed. A resume cannot change
    the run's seed (refused).

    The run directory is locked while written (:class:`~finpod.runs.lock.FolderLock`): a
    second writer is refused. A finished run (its leaderboard written) is left as it is,
    unless ``total_steps`` asks for more steps than it trained; a run stopped before its
    first checkpoint starts again from the beginning.
    """
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise FinpodError(
            f"--threads must be a whole number ≥ 1, got {threads}", "e.g. --threads 1"
        )
    if resume is not None:
        run_dir = find_run(resume, runs)
        with FolderLock(run_dir, "run", say=log), _first_writes(run_dir, made=False):
            return _continue(
                run_dir,
                strategy_path,
                data,
                device,
                seed,
                total_steps,
                threads,
                progress,
                log,
                on_run,
            )
    if strategy_path is None or data is None:
        raise FinpodError("training needs --strategy and --data", "or --resume RUN")
    strategy = _strategy(strategy_path, seed, device, total_steps)
    chosen = threads if threads is not None else train_threads()
    with _torch_threads(chosen):
        return _train_new(
            strategy, data, runs, chosen, threads is not None, run_id, progress, log, on_run
        )


def _train_new(
    strategy: Strategy,
    data: str | Path,
    runs: str | Path,
    threads: int,
    asked: bool,
    run_id: str | None,
    progress: bool,
    log: Callable[[str], None] | None,
    on_run: Callable[..., None] | None,
) -> Path:
    """A new run's work, torch's threads set (``asked``: by ``--threads``)."""
    spec = strategy.train
    dev = pick_device(spec.device)
    manifest = Manifest.load(data)
    train_market = load_split(data, "train", device=dev)
    valid_market = load_split(data, "validation", device=dev)
    env_config = strategy.config
    check_memory(strategy, train_market, env_config, dev)
    torch.manual_seed(spec.seed)
    env = VecTradingEnv(
        train_market, env_config, num_envs=spec.num_envs, seed=spec.seed, device=dev
    )
    strategy = replace(
        strategy,
        hparams=hparams_for_env(ALGORITHMS[strategy.algorithm][0], strategy.hparams, env),
    )
    agent = make_agent(
        strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, spec.seed
    )
    splits = split_hashes(data, manifest)

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_id = run_id or f"{strategy.algorithm}-{stamp}-s{spec.seed}"
    run_dir = run_folder(runs, run_id)  # one folder under --runs, never a path out of it
    existed = run_dir.exists()
    made = not existed or not any(run_dir.iterdir())
    with _first_writes(run_dir, made, keep_folder=existed):
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = FolderLock(run_dir, "run", say=log).acquire()
    try:
        with _first_writes(run_dir, made, keep_folder=existed):
            if any(p.name != LOCK_FILE for p in run_dir.iterdir()):
                raise FinpodError(
                    f"run directory {run_dir} already exists", "choose another --run-id or --runs"
                )
            run = RunDir.create(
                run_dir,
                kind="agent",
                strategy=strategy.to_dict(),
                dataset_path=Path(data),
                dataset_hash=manifest.hash,
                dataset_splits=splits,
                seed=spec.seed,
                threads=threads,
                extra={"device": str(dev)},
                inputs={  # files read outside the run directory: the run keeps a copy and a hash
                    "strategy": strategy.path,
                    "reference": None
                    if env_config.reference == EQUAL_WEIGHT
                    else env_config.reference,
                    "benchmark": Path(data) / bench
                    if (bench := manifest.file("benchmark"))
                    else None,
                },
            )
            run.log(_threads_line(threads, asked))
            if on_run is not None:
                on_run(run_dir, total_steps=spec.total_steps)
            return _train_and_record(
                agent, env, strategy, valid_market, env_config, run_dir, progress, log
            )
    finally:
        lock.release()


def _threads_line(threads: int, asked: bool) -> str:
    """The ``train.log`` line that says how many torch threads train and why."""
    if asked:
        return f"torch threads: {threads} (--threads)"
    try:
        load = f"{os.getloadavg()[0]:.1f}"
    except (AttributeError, OSError):
        load = "unknown"
    return f"torch threads: {threads} (chosen for {usable_cpus()} usable CPUs at load {load})"


@contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """Torch's intra-op threads set to ``threads`` in this process (the one that trains)
    for the block, and put back after it (a notebook's later work keeps its own)."""
    before = torch.get_num_threads()
    # Inter-op threads are left alone: training runs no inter-op work, and torch allows
    # setting them only once per process (a second training in a notebook would fail).
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _strategy(
    path: Strategy | str | Path, seed: int | None, device: str | None, total_steps: int | None
) -> Strategy:
    """The strategy at ``path`` (read once) with the command's ``[train]`` overrides."""
    strategy = as_strategy(path)
    if seed is not None:
        strategy = strategy.with_train(seed=int(seed))
    if device is not None:
        strategy = strategy.with_train(device=device)
    if total_steps is not None:
        if total_steps <= 0:
            raise FinpodError(f"--steps must be positive, got {total_steps}", "e.g. --steps 100000")
        strategy = strategy.with_train(total_steps=int(total_steps))
    return strategy


def _continue(
    run_dir: Path,
    strategy_path: str | Path | None,
    data: str | Path | None,
    device: str | None,
    seed: int | None,
    total_steps: int | None,
    threads: int | None,
    progress: bool,
    log: Callable[[str], None] | None,
    on_run: Callable[..., None] | None,
) -> Path:
    """Continue run ``run_dir`` (its lock held): from its last checkpoint, from the
    beginning when it has none yet, or not at all when it is finished."""
    previous = read_run_info(run_dir)
    check_same_strategy(run_dir, previous, strategy_path)
    data = Path(data) if data is not None else Path(previous["dataset"]["path"])
    if seed is not None and int(seed) != int(previous["seed"]):
        raise FinpodError(
            f"run {run_dir.name} has seed {previous['seed']}, not {seed}: a run's seed "
            "cannot change when it is continued",
            f"leave out --seed to continue it, or start a new run with --seed {seed}",
        )
    strategy = _strategy(run_dir / STRATEGY_FILE, previous["seed"], device, total_steps)
    run = RunDir(run_dir)
    last = resume_checkpoint(run_dir)  # last.safetensors, else the board's checkpoint
    # A board written when the run was stopped (run.json's "stopped") is not a finished run.
    if (run_dir / LEADERBOARD_FILE).is_file() and "stopped" not in previous:
        reached = _finished_steps(run_dir)
        if total_steps is None or total_steps <= reached:
            # Finished, and nothing more asked: said once, and nothing is written.
            if on_run is not None:
                on_run(
                    run_dir,
                    resumed_from=reached,
                    total_steps=reached,
                    finished=True,
                    seed=previous["seed"],
                )
            return run_dir
    recorded = previous.get("threads")
    chosen = threads if threads is not None else recorded or train_threads()
    with _torch_threads(chosen):
        return _continue_training(
            run_dir, run, strategy, data, previous, last, (chosen, threads), progress, log, on_run
        )


def _continue_training(
    run_dir: Path,
    run: RunDir,
    strategy: Strategy,
    data: Path,
    previous: dict[str, Any],
    last: Path | None,
    threads: tuple[int, int | None],
    progress: bool,
    log: Callable[[str], None] | None,
    on_run: Callable[..., None] | None,
) -> Path:
    """:func:`_continue`'s training, torch's threads set (``threads``: the count set, and
    the one ``--threads`` asked for)."""
    spec = strategy.train
    dev = pick_device(spec.device)
    manifest = Manifest.load(data)
    if manifest.hash != previous["dataset"]["hash"]:
        raise FinpodError(
            f"the dataset at {data} is not the one run {run_dir.name} was trained on",
            "pass --data with the run's dataset",
        )
    train_market = load_split(data, "train", device=dev)
    valid_market = load_split(data, "validation", device=dev)
    env_config = strategy.config
    check_memory(strategy, train_market, env_config, dev)
    torch.manual_seed(spec.seed)
    env = VecTradingEnv(
        train_market, env_config, num_envs=spec.num_envs, seed=spec.seed, device=dev
    )
    if last is None:
        # Stopped before its first checkpoint: nothing was learned, so the run starts
        # again from the beginning (what it wrote before the stop is cleared).
        for partial in (CANDIDATES_FILE, TENSORBOARD_DIR, CHECKPOINT_DIR):
            target = run_dir / partial
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        (run_dir / CHECKPOINT_DIR).mkdir()
        run.log("no checkpoint yet: starting the run again from the beginning")
        if log is not None:
            log(f"run {run_dir.name} has no checkpoint yet: starting it again from the beginning")
        strategy = replace(
            strategy,
            hparams=hparams_for_env(ALGORITHMS[strategy.algorithm][0], strategy.hparams, env),
        )
        agent = make_agent(
            strategy.algorithm, strategy.hparams, env.obs_dim, env.action_dim, dev, spec.seed
        )
        if on_run is not None:
            on_run(run_dir, total_steps=spec.total_steps)
    else:
        agent = load_checkpoint(last, dev)
        if agent.algorithm != strategy.algorithm:
            raise FinpodError(
                f"{last} holds a {agent.algorithm} agent but the run's strategy is "
                f"{strategy.algorithm}",
                "the run directory was modified; start a new run",
            )
        if on_run is not None:
            on_run(run_dir, resumed_from=int(agent.env_steps), total_steps=spec.total_steps)
    _record_threads(run, previous.get("threads"), *threads, log)
    return _train_and_record(agent, env, strategy, valid_market, env_config, run_dir, progress, log)


def _record_threads(
    run: RunDir,
    recorded: int | None,
    chosen: int,
    asked: int | None,
    log: Callable[[str], None] | None,
) -> None:
    """A resumed run trains with its recorded thread count unless ``--threads`` asked for
    another: said (the numbers from here may differ from an uninterrupted run's) and
    recorded in ``run.json``."""
    if asked is not None and recorded is not None and asked != recorded:
        note = (
            f"training with {asked} torch threads (--threads), not the run's {recorded}: "
            "its numbers from here may differ from those of a run never stopped"
        )
        run.log(note)
        if log is not None:
            log(note)
    elif recorded is None:
        run.log(_threads_line(chosen, asked is not None))
    if chosen != recorded:
        run.record_threads(chosen)


def stop_lines(
    run_dir: Path, env_steps: int, total_steps: int, best: Entry, score: str
) -> list[str]:
    """What a run stopped at ``env_steps`` of ``total_steps`` says: where it stopped, the
    checkpoint ``finpod train --resume`` continues from (the steps after it are trained
    again), and the best checkpoint so far, which the board holds for a backtest."""
    last = resume_checkpoint(run_dir)
    at = None if last is None else int(load_checkpoint(last, torch.device("cpu")).env_steps)
    if at is None:
        resume = f"`finpod train --resume {run_dir}` starts it again from the beginning"
    else:
        lost = f" (its {env_steps - at:,} env steps after it are trained again)"
        resume = (
            f"the last checkpoint is at {at:,}: `finpod train --resume {run_dir}` continues "
            f"from there{lost if env_steps > at else ''}"
        )
    return [
        f"stopped at {env_steps:,} env steps of {total_steps:,}; {resume}",
        f"the board holds the best checkpoint so far ({best.env_steps:,} env steps, "
        f"validation {score} {best.score:.3f}): `finpod backtest {run_dir}` tests it",
    ]


def _finished_steps(run_dir: Path) -> int:
    """Env steps a finished run trained: its last checkpoint's (else its best entry's)."""
    last = RunDir(run_dir).checkpoint("last")
    if last.is_file():
        return int(load_checkpoint(last, torch.device("cpu")).env_steps)
    entries = Leaderboard.load(run_dir).entries
    return max((int(e.env_steps) for e in entries), default=0)


def check_same_strategy(
    run_dir: Path, run_meta: dict[str, Any], strategy_path: str | Path | None
) -> None:
    """Refuse ``--strategy`` naming another strategy than run ``run_dir``'s own.

    The run recorded the SHA-256 of the strategy file it was started from
    (:mod:`finpod.runs.inputs`); the same file, or one with the same bytes, continues the
    run. A run without that record compares the strategies' settings."""
    if strategy_path is None:
        return
    given = Path(strategy_path)
    if not given.is_file():
        raise FinpodError(f"strategy file {given} not found", "check the path")
    entry = (recorded(run_meta) or {}).get("strategy")
    if entry is not None:
        if file_sha256(given) == entry.get("sha256"):
            return
    elif load_strategy(given).to_dict() == load_strategy(run_dir / STRATEGY_FILE).to_dict():
        return
    raise FinpodError(
        f"run {run_dir.name} was trained with another strategy than {given}",
        f"leave out --strategy to continue it with its own ({run_dir / STRATEGY_FILE}), "
        "or give the new strategy another --run-id",
    )


#: ``errno`` of an ``OSError`` that says the disk cannot take the run's files.
_DISK_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM}
)


def _resource_problem(err: BaseException) -> tuple[str, str] | None:
    """(what failed, what to free) when ``err`` is a full or failing disk or memory running
    out, else None (any other error is not a resource's)."""
    first = (str(err).splitlines() or [""])[0] or type(err).__name__
    if isinstance(err, MemoryError | torch.OutOfMemoryError):
        return f"ran out of memory ({first})", "lower train.num_envs or free memory"
    if isinstance(err, SafetensorError) or (isinstance(err, OSError) and err.errno in _DISK_ERRNOS):
        reason = getattr(err, "strerror", None) or first
        return f"cannot be written ({reason})", "free disk space"
    return None


@contextmanager
def _first_writes(run_dir: Path, made: bool, keep_folder: bool = False) -> Iterator[None]:
    """A full disk (or memory running out) while a run writes is one line. A new run
    (``made``: its folder did not exist or was empty) with no checkpoint yet is removed:
    there is nothing to continue from (``keep_folder``: an empty folder that was there
    before stays, empty)."""
    try:
        yield
    except (OSError, SafetensorError, MemoryError, torch.OutOfMemoryError) as err:
        problem = _resource_problem(err)
        if problem is None:
            raise
        what, free = problem
        if made and not RunDir(run_dir).checkpoint("last").is_file():
            shutil.rmtree(run_dir, ignore_errors=True)
            if keep_folder:
                run_dir.mkdir(exist_ok=True)
            raise FinpodError(
                f"the run directory {run_dir} {what}",
                f"{free} and start the run again; nothing of it was kept",
            ) from err
        raise FinpodError(
            f"the run directory {run_dir} {what}",
            f"{free}, then continue with: finpod train --resume {run_dir}",
        ) from err


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
    hparams = strategy.to_dict()["agent"]["hparams"]
    try:
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
        # Ctrl-C or SIGTERM: a stopped run is a usable run, its board names the best
        # checkpoint so far (finpod.runs.stopped).
        entry = write_stopped_board(
            run_dir,
            pod_id,
            strategy.algorithm,
            hparams,
            spec.score,
            agent.env_steps,
            spec.total_steps,
        )
        if entry is not None and log is not None:
            for line in stop_lines(
                run_dir, int(agent.env_steps), spec.total_steps, entry, spec.score
            ):
                log(line)
        raise
    RunDir(run_dir).record_stopped(None)
    entry = Entry(
        pod_id=pod_id,
        algorithm=strategy.algorithm,
        hparams=hparams,
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
