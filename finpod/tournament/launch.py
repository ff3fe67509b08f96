"""``run_tournament``: a whole tournament as one library call (new run or ``resume``).

It resolves the strategy's ``[tournament]`` and ``[search]`` tables (with command-line
overrides), connects to Ray (a private local instance when no address is given, or a
cluster), creates or reopens the run directory and hands the loop to the
:class:`~finpod.tournament.orchestrator.Orchestrator`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray

from finpod.agents import read_checkpoint
from finpod.backtest.split_hashes import split_hashes
from finpod.env.config import EQUAL_WEIGHT
from finpod.errors import FinpodError
from finpod.grammar import Budget, Pods, parse_budget, parse_pods
from finpod.runs import (
    STRATEGY_FILE,
    Leaderboard,
    RunDir,
    close_logger,
    find_run,
    new_run_id,
    run_folder,
)
from finpod.runs.lock import FolderLock
from finpod.strategy import Strategy, as_strategy, load_strategy
from finpod.tournament.budget import TIME_SLIVER_S, BudgetClock
from finpod.tournament.orchestrator import Event, Orchestrator, Setup, Summary
from finpod.tournament.search import SearchSpace, parse_search
from finpod.tournament.settings import TournamentConfig, parse_tournament
from finpod.tournament.setup import check_inputs


@dataclass
class TournamentRun:
    """The outcome of :func:`run_tournament`."""

    run_dir: Path
    """The run directory (``runs/<run-id>``)."""
    leaderboard: Leaderboard
    """Final leaderboard (best first)."""
    summary: Summary
    """Pods trained and failed, pool sizes, nodes used, timings of this session."""
    config: TournamentConfig
    """The resolved tournament settings."""
    finished: bool = False
    """A resumed run that had already spent its budget: nothing was trained or written."""


def resolve(
    strategy: Any,
    pods: Pods | str | int | None = None,
    budget: Budget | str | None = None,
    seed: int | None = None,
) -> tuple[TournamentConfig, SearchSpace, int]:
    """Tournament config, search space and seed of a loaded strategy with overrides
    (``pods`` and ``budget`` as :mod:`finpod.grammar` values, or text read here)."""
    raw = dict(strategy.tournament)
    # Without its own score the tournament ranks by the strategy's validation score.
    raw.setdefault("score", strategy.train.score)
    config = parse_tournament(raw)
    if pods is not None:
        config = replace(config, pods=parse_pods(pods).count)
    if budget is not None:
        config = replace(config, budget=parse_budget(budget))
    space = parse_search(
        strategy.search, strategy.algorithm, strategy.hparams, env_base=strategy.config
    )
    config = config.validate()
    check_budget_trains_a_pod(config, strategy)
    return config, space, int(strategy.train.seed if seed is None else seed)


def smallest_rollout(config: TournamentConfig, strategy: Any) -> int:
    """Env steps of one rollout of one pod: every env of every learner stepped for the
    strategy's ``horizon`` (1 for an algorithm without one), the least a pod trains."""
    num_envs = int(config.num_envs or strategy.train.num_envs)
    horizon = int(strategy.hparams.get("horizon") or 1)
    return num_envs * config.num_learners * horizon


def check_budget_trains_a_pod(config: TournamentConfig, strategy: Any) -> None:
    """Refuse a budget too small for one pod to train anything, which would end in a run
    directory with an empty board: a time budget within the clock's
    :data:`~finpod.tournament.budget.TIME_SLIVER_S` (no pod starts) or a step budget below
    one rollout of one pod (:func:`smallest_rollout`)."""
    budget = config.budget
    if budget.kind == "time" and budget.amount <= TIME_SLIVER_S:
        raise FinpodError(
            f"budget {budget} is too short for a pod to start (a pod needs more than "
            f"{TIME_SLIVER_S:g}s)",
            'give minutes, e.g. --budget 5min, or a step budget such as "2e5 steps"',
        )
    rollout = smallest_rollout(config, strategy)
    if budget.kind == "steps" and budget.amount < rollout:
        raise FinpodError(
            f"budget {budget} is less than one rollout of one pod ({rollout:,} env steps: "
            "envs × learners × horizon)",
            f'give at least "{rollout} steps"',
        )


def run_tournament(
    strategy_path: Strategy | str | Path | None,
    data: str | Path | None,
    *,
    pods: Pods | str | int | None = None,
    budget: Budget | str | None = None,
    address: str | None = None,
    resume: str | Path | None = None,
    runs: str | Path = "runs",
    device: str | None = None,
    seed: int | None = None,
    run_id: str | None = None,
    num_cpus: int | None = None,
    on_event: Event | None = None,
    display: Any = None,
    stop: Any = None,
) -> TournamentRun:
    """Train a tournament and write its run directory (see :mod:`finpod.runs`).

    Args:
        strategy_path: strategy TOML, or the :class:`~finpod.strategy.Strategy` read from it
            (optional with ``resume``: the run's copy is used).
        data: dataset directory on the driver's machine; the driver checks its hash and
            ships the train and validation splits to the pods through Ray's object store
            (optional with ``resume``: the run's dataset is used; its hash must match).
        pods: ``"auto"`` or the most pods at once (overrides ``tournament.pods``): a
            :class:`~finpod.grammar.Pods` or its text.
        budget: a :class:`~finpod.grammar.Budget` or its text, ``"30min"``, ``"1e6 steps"``,
            ``"40 pods"`` (overrides ``tournament.budget``; counted over the whole run, so a
            resumed run finishes the same budget; see ``docs/grammar.md``).
        address: Ray cluster (``"auto"`` or ``HOST:PORT``); ``None`` starts Ray in-process.
            An already initialised Ray connection is used as is.
        resume: a run directory (or its id under ``runs``) to continue.
        runs: where new run directories are created.
        device: ``auto``, ``cpu`` or ``cuda`` inside the pods (overrides ``train.device``).
        seed: run seed (overrides ``train.seed``).
        run_id: name of a new run directory (default: time-stamped).
        num_cpus: CPUs of the in-process Ray instance (default: all).
        on_event: ``f(kind, payload)`` called once with the run directory (``"run"``), then
            on pool changes, pod starts, finishes, failures.
        display: ``f(snapshot)`` called as the run goes (the CLI's live table).
        stop: ``f() -> bool``; once it returns True no new pod starts and the run ends
            when the running ones finish (e.g. a target score was reached).

    A resumed run is locked while written (:class:`~finpod.runs.lock.FolderLock`): a
    second writer, or a lock held on another host, is refused in one line.
    """
    kwargs = dict(pods=pods, budget=budget, address=address, runs=runs, device=device)
    kwargs |= dict(seed=seed, run_id=run_id, num_cpus=num_cpus, on_event=on_event)
    kwargs |= dict(display=display, stop=stop)
    if resume is None:
        return _train(strategy_path, data, resume=None, **kwargs)
    run_dir = find_run(resume, runs)
    say = None if on_event is None else (lambda line: on_event("note", {"message": line}))
    with FolderLock(run_dir, "run", say=say):
        return _train(strategy_path, data, resume=run_dir, **kwargs)


def _train(
    strategy_path: Strategy | str | Path | None,
    data: str | Path | None,
    *,
    pods: Pods | str | int | None,
    budget: Budget | str | None,
    address: str | None,
    resume: str | Path | None,
    runs: str | Path,
    device: str | None,
    seed: int | None,
    run_id: str | None,
    num_cpus: int | None,
    on_event: Event | None,
    display: Any,
    stop: Any,
) -> TournamentRun:
    """:func:`run_tournament`'s work (a resumed run's lock held)."""
    # Text is read once, here at the library's edge; typed values go down. A resumed run's
    # own budget is its recorded canonical text, read once by parse_tournament.
    pods = None if pods is None else parse_pods(pods)
    budget = None if budget is None else parse_budget(budget)
    if resume is not None:
        run_path = find_run(resume, runs)
        run = RunDir.open(run_path)
        info = run.info()
        strategy = load_strategy(run_path / STRATEGY_FILE)
        dataset = Path(data) if data is not None else Path(info["dataset"]["path"])
        manifest = check_inputs(strategy.config, dataset)
        if manifest.hash != info["dataset"]["hash"]:
            raise FinpodError(
                f"dataset {dataset} is not the one run {run_path.name} was trained on (hash differs)",
                "resume with the original dataset (--data)",
            )
        config, space, run_seed = resolve(strategy, pods, budget, int(info.get("seed", 0)))
        board = Leaderboard.load(run_path)
        if _finished(info, config, board):  # left byte for byte as it is
            if on_event is not None:
                on_event("run", {"run_dir": run_path, "finished": True, "budget": config.budget})
            return TournamentRun(run_path, board, Summary(), config, finished=True)
        problems = board.drop_missing_checkpoints(verify=_verify_checkpoint)
        for problem in problems:
            run.log(f"dropped leaderboard entry {problem}", logging.WARNING)
        board.remove_orphan_checkpoints()
        run.log(
            f"resumed with {len(board)} leaderboard entries, {board.candidates_evaluated} candidates, "
            f"{board.progress.wall_s:.0f}s trained"
        )
    else:
        if strategy_path is None or data is None:
            raise FinpodError("a tournament needs --strategy and --data", "or --resume RUN")
        strategy = as_strategy(strategy_path)
        dataset = Path(data)
        manifest = check_inputs(strategy.config, dataset)
        config, space, run_seed = resolve(strategy, pods, budget, seed)
        resolved = strategy.to_dict()
        reference = strategy.config.reference
        resolved["tournament"] = config.to_dict()
        resolved["search"] = space.to_dict()
        resolved["train"]["seed"] = run_seed
        if device is not None:
            resolved["train"]["device"] = device
        run_path = run_folder(runs, run_id or new_run_id())  # a single folder under runs
        run = RunDir.create(
            run_path,
            strategy=resolved,
            dataset_path=dataset,
            dataset_hash=manifest.hash,
            dataset_splits=split_hashes(dataset, manifest),  # a backtest checks its bars
            seed=run_seed,
            inputs={  # files read outside the run directory: kept with a copy and a hash
                "strategy": strategy.path,
                "reference": None if reference == EQUAL_WEIGHT else reference,
                "benchmark": dataset / bench if (bench := manifest.file("benchmark")) else None,
            },
        )
        board = Leaderboard(run_path, config.top_k, config.score)
        board.save()
        run.log(f"new tournament run {run_path.name} on {dataset} ({manifest.hash[:12]})")

    if on_event is not None:
        on_event("run", {"run_dir": run_path})
    started = connect_ray(address, num_cpus)
    try:
        pod_device, gpus = _resolve_device(
            device or strategy.train.device, config, autoscaling=address is not None
        )
        setup = Setup(
            config=config,
            space=space,
            dataset_dir=dataset.resolve(),
            env_config=strategy.config,
            num_envs=int(config.num_envs or strategy.train.num_envs),
            seed=run_seed,
            device=pod_device,
            gpus_per_pod=gpus,
            request_resources=address is not None,
            dataset_hash=manifest.hash,
        )
        orchestrator = Orchestrator(
            setup, board, run, on_event=on_event, display=display, stop=stop
        )
        try:
            summary = orchestrator.run()
        except KeyboardInterrupt:  # Ctrl-C or a stop signal: the board so far is the run
            _record_stop(run, board, config)
            raise
        run.record_stopped(None)  # trained to its budget (a resumed stopped run included)
    finally:
        if started:
            ray.shutdown()
        close_logger(run)
    return TournamentRun(run_path, board, summary, config)


def _finished(info: dict[str, Any], config: TournamentConfig, board: Leaderboard) -> bool:
    """Has the run trained to its budget (``config``'s: a larger ``--budget`` asks for
    more)? A run marked stopped is not finished, nor one killed after its last pod and
    before its final selection (a resume makes the selection and trains nothing)."""
    if "stopped" in info or (len(board) and board.selection is None):
        return False
    clock = BudgetClock(config.budget, board, time_cap=config.time_cap)
    return not clock.allows_more(clock.left(0, 0))


def _record_stop(run: RunDir, board: Leaderboard, config: TournamentConfig) -> None:
    """Mark a tournament stopped before its budget ended in ``run.json``, so a backtest of
    its board says it tests the best checkpoint *so far* (nothing to mark before the first
    pod is scored: there is nothing to backtest yet)."""
    if not len(board):
        return
    budget = config.budget
    target = budget.amount if budget.kind == "steps" else None
    run.record_stopped(BudgetClock(budget, board).counted_steps(), target)


def _verify_checkpoint(path: Path) -> None:

    read_checkpoint(path)


def connect_ray(
    address: str | None,
    num_cpus: int | None,
    hint: str = "check --address and that Ray is running",
) -> bool:
    """Connect to Ray (in-process local Ray when ``address`` is None); returns whether this
    call started it (and so must shut it down). A failure is one :class:`FinpodError` line
    ending with ``hint``."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts its workers at nice 15, so any other process on the machine starves the
    # pods (a quick start on a busy laptop ran 15× slower). A local Ray started here runs
    # them at the user's own priority; a cluster's nodes keep what `ray start` gave them.
    os.environ.setdefault("RAY_worker_niceness", "0")
    common: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }
    # A new local cluster turns on Ray's token authentication (unless RAY_AUTH_MODE says
    # otherwise) and logs a warning about it on every run; authentication stays on, the
    # notice is noise for a local run.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )
    try:
        if address is None:
            # "local" never attaches to someone else's cluster found on this machine.
            ray.init(address="local", num_cpus=num_cpus, **common)
        else:
            ray.init(address=address, **common)
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = "a local Ray instance" if address is None else f"the Ray cluster at {address}"
        raise FinpodError(f"cannot start or reach {where}: {err}", hint) from err
    return True


def _resolve_device(
    device: str, config: TournamentConfig, autoscaling: bool = False
) -> tuple[str, float]:
    """(torch device inside the pods, GPUs per pod) from the device setting and the cluster.

    On a cluster (``autoscaling``: ``--address``) that has no GPU now, a strategy that asks
    for GPUs (``device = "cuda"`` or ``gpus_per_pod > 0``) is kept: the orchestrator asks
    the autoscaler for them (a GPU worker group that scales from zero). A local Ray
    instance cannot grow, so there it is one error line.
    """
    cluster_gpus = float(ray.cluster_resources().get("GPU", 0.0))
    gpus = config.gpus_per_pod
    if gpus is None:
        wants_cuda = device.startswith("cuda") or (device == "auto" and cluster_gpus > 0)
        gpus = 1.0 if wants_cuda else 0.0
    if device.startswith("cuda") and gpus <= 0:
        raise FinpodError(
            "device cuda needs tournament.gpus_per_pod > 0",
            "set gpus_per_pod (e.g. 0.25) or use --device cpu",
        )
    if device == "cpu":
        gpus = 0.0
    if gpus > 0 and cluster_gpus <= 0 and not autoscaling:
        raise FinpodError(
            "pods ask for GPUs but the Ray cluster has none", "use --device cpu or add GPU nodes"
        )
    return ("cuda" if gpus > 0 else "cpu"), float(gpus)
