"""The research loop as library calls: dataset → training → backtest → tearsheet.

The verbs, each usable alone (the CLI commands and the notebooks call them):

- :func:`ensure_dataset`: a ready dataset directory, built if missing;
- :func:`train_agent`: one agent, written to a run directory (``kind = "agent"``);
- :func:`run_tournament`: a Podracer tournament on Ray (``kind = "tournament"``);
- :func:`train`: either, as the strategy (or the resumed run) says;
- :func:`backtest_and_report`: a run's agent on the backtest split, and its tearsheet;
- :func:`run_all`: all of it on the shipped sample data.

The keyword names are the CLI's (``data``, ``runs``, ``reports``), and so are the lower
layers'. Where things are and go: :mod:`finpod.pipeline.places`.

Nothing here prints. Progress goes to an optional ``on_event(kind, payload)`` hook
(:data:`Event`); the CLI turns events into rich displays. Kinds sent from here:
``"stage"`` (``name``, ``index``, ``total``: a step of :func:`run_all` begins),
``"dataset"`` (``path``, ``manifest``: a :class:`~finpod.data.Manifest`; a dataset is ready), ``"log"`` (``line``: a
line of a single agent's training log), ``"tournament"`` (``result``: a tournament
ended), ``"rollout"`` (``name``: one backtest rollout done) and ``"report"``
(``path``: the tearsheet is written); a tournament also forwards the orchestrator's
events (``"waiting"``, ``"node_lost"``, ``"quarantine"``, ...).
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finpod.errors import FinpodError
from finpod.grammar import Budget, Pods, parse_budget, parse_pods
from finpod.pipeline.places import (
    QUICKSTART_STRATEGY,
    SAMPLE_DATASET_DIR,
    check_writable,
    report_folder,
    resolve_strategy,
)

#: A progress hook: ``on_event(kind, payload)``.
Event = Callable[[str, dict[str, Any]], None]
#: A strategy file's path, or the :class:`finpod.strategy.Strategy` a command read from it.
StrategyArg = Any


@dataclass
class PipelineResult:
    """Everything the end-to-end run produced."""

    dataset_dir: Path
    """Dataset directory (Parquet + manifest.json)."""
    run_dir: Path
    """Tournament run directory (leaderboard, checkpoints, metrics)."""
    report_dir: Path
    """Backtest outputs and the tearsheet."""
    tearsheet: Path
    """The self-contained HTML tearsheet."""
    backtest: Any
    """The :class:`finpod.backtest.BacktestResult`."""
    seconds: dict[str, float]
    """Wall seconds of each stage: dataset, train, backtest, total."""
    tournament: Any = None
    """The :class:`finpod.tournament.TournamentRun` (leaderboard, summary)."""


def _emit(on_event: Event | None, kind: str, **payload: Any) -> None:
    if on_event is not None:
        on_event(kind, payload)


def ensure_dataset(
    data: str | Path = SAMPLE_DATASET_DIR,
    source: str = "sample",
    rebuild: bool = False,
    progress: bool = False,
    on_event: Event | None = None,
    **opts: Any,
) -> Path:
    """Return a ready dataset directory, building it from ``source`` if it is missing.

    An existing directory is reused only when its manifest loads and names the same
    source; otherwise (or with ``rebuild``) it is rebuilt. ``progress`` shows the
    builder's progress bars; ``on_event("dataset", path=, manifest=)`` when ready.
    """
    from finpod.data import Manifest, build_dataset  # lazy: the CLI imports pipeline at start-up

    dataset_dir = Path(data)
    ready = None
    if not rebuild and (dataset_dir / "manifest.json").is_file():
        try:
            manifest = Manifest.load(dataset_dir)
        except FinpodError:
            manifest = None
        if manifest is not None and manifest.source == source:
            ready = dataset_dir
    if ready is None:
        ready = Path(build_dataset(source, dataset_dir, progress=progress, **opts))
    if on_event is not None:
        _emit(on_event, "dataset", path=ready, manifest=Manifest.load(ready))
    return ready


def _dataset_source(data: Path) -> str | None:
    """The source named by the manifest at ``data`` (None: no manifest that loads)."""
    from finpod.data import Manifest  # lazy: pandas, in the dataset stage only

    if not (data / "manifest.json").is_file():
        return None
    try:
        return Manifest.load(data).source
    except FinpodError:
        return None


def backtest_and_report(
    run: str | Path,
    agent: str = "selected",
    data: str | Path | None = None,
    reports: str | Path = "reports",
    device: str | None = None,
    *,
    runs: str | Path = "runs",
    on_event: Event | None = None,
    use_recorded_inputs: bool = False,
    allow_in_sample: bool = False,
) -> tuple[Any, Path]:
    """Backtest a run's agent, save its outputs and tearsheet in :func:`report_folder`
    (``reports/<run>`` for the best agent, ``reports/<run>/<agent>`` for another).

    ``agent`` ``"selected"`` (the default) is what the run selected on validation: the
    best entry, or the leaderboard ensemble (``ensemble-K``) when it won.

    ``run`` is a run directory or a run id under ``runs``; ``device`` None is ``auto``. Events: ``"rollout"``
    after each of the agent's and the benchmarks' rollouts, ``"report"`` when the
    tearsheet is written. Returns the :class:`finpod.backtest.BacktestResult` and the
    tearsheet path. ``use_recorded_inputs`` reads the run's copies of the files it read
    (reference weights, benchmark levels); otherwise a changed one is refused.
    ``allow_in_sample``: see :func:`finpod.backtest.run_backtest`.
    """
    from finpod.backtest import run_backtest  # lazy: the CLI imports pipeline at start-up
    from finpod.backtest.agents import resolve_agent  # lazy: the CLI imports pipeline at start-up
    from finpod.device import pick_device  # lazy: the CLI imports pipeline at start-up
    from finpod.runs import find_run  # lazy: the CLI imports pipeline at start-up

    run_path = find_run(run, runs)
    name = resolve_agent(run_path, agent)
    result = run_backtest(
        run_path,
        agent=agent,  # as asked: the report says "selected on validation" when it was
        data=data,
        device=pick_device(device or "auto"),
        on_rollout=lambda name: _emit(on_event, "rollout", name=name),
        use_recorded_inputs=use_recorded_inputs,
        allow_in_sample=allow_in_sample,
    )
    report_dir = report_folder(reports, result.run_id, name)
    result.save(report_dir)
    html = Path(result.to_html(report_dir / "tearsheet.html"))
    _emit(on_event, "report", path=html)
    return result, html


def run_tournament(
    strategy: str | Path | None,
    data: str | Path | None,
    *,
    runs: str | Path = "runs",
    on_event: Event | None = None,
    **options: Any,
) -> Any:
    """Train (or ``resume=``) a tournament in ``runs``; the
    :class:`finpod.tournament.TournamentRun`.

    ``options`` are those of :func:`finpod.tournament.run_tournament` (``pods``,
    ``budget``, ``address``, ``resume``, ``device``, ``seed``, ``run_id``, ``display``,
    ``stop``, ...). The orchestrator's events go to ``on_event``, then ``"tournament"``
    with the result.
    """
    from finpod.tournament import run_tournament as _run  # lazy: CLI start-up imports this

    result = _run(strategy, data, runs=runs, on_event=on_event, **options)
    _emit(on_event, "tournament", result=result)
    return result


def train_agent(
    strategy: StrategyArg | str | Path | None,
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
    on_event: Event | None = None,
) -> Path:
    """Train the strategy's agent on ``data``'s train split; returns the run directory.

    ``device``, ``seed`` and ``total_steps`` override the strategy's ``[train]`` values;
    ``threads`` is torch's thread count while it trains (default: a resumed run's recorded
    count, else :func:`finpod.agent_run.train_threads`'s choice; ``run.json`` records it).
    With ``resume`` (a run directory, or a run id under ``runs``) the run's own strategy,
    dataset and ``checkpoints/last.safetensors`` are used and training continues where the
    last checkpoint left it; its best-on-validation checkpoint is kept unless beaten.
    ``progress`` shows a progress bar; each log line goes to ``on_event("log", line=)``;
    ``on_event("run", run_dir=, total_steps=)`` comes first, with ``resumed_from=`` (the
    env steps of the checkpoint training continues from) when resuming.
    """
    from finpod.agent_run import train_single_agent  # lazy: the CLI imports pipeline at start-up

    return train_single_agent(
        strategy,
        data,
        runs,
        device=device,
        seed=seed,
        total_steps=total_steps,
        threads=threads,
        run_id=run_id,
        resume=resume,
        progress=progress,
        log=None if on_event is None else (lambda line: _emit(on_event, "log", line=line)),
        on_run=None
        if on_event is None
        else (lambda path, **about: _emit(on_event, "run", run_dir=path, **about)),
    )


def wants_tournament(
    strategy: StrategyArg | str | Path | None,
    data: str | Path | None,
    runs: str | Path = "runs",
    *,
    pods: Pods | str | None = None,
    budget: Budget | str | None = None,
    address: str | None = None,
    resume: str | Path | None = None,
) -> bool:
    """Whether ``finpod train``'s arguments ask for a tournament rather than one agent.

    Tournament options (``pods``, ``budget``, ``address``) or a strategy with a
    ``[tournament]`` table ask for one; a resumed run continues as what it was (its
    ``run.json`` ``kind``). A strategy file is only looked into here (no torch loads).
    """
    from finpod.runs import find_run, read_run_info  # lazy: the CLI imports pipeline at start-up

    if any(v is not None for v in (pods, budget, address)):
        return True
    if resume is not None:
        return read_run_info(find_run(resume, runs))["kind"] != "agent"
    if strategy is None or data is None:
        raise FinpodError(
            "finpod train needs --strategy and --data", "or --resume RUN to continue a run"
        )
    return _has_tournament_table(strategy)


def _has_tournament_table(strategy: StrategyArg | str | Path) -> bool:
    """Does the strategy have a ``[tournament]`` table? A file is read as TOML only; one
    that does not read is read again by :func:`finpod.strategy.load_strategy`, which says
    what is wrong with it."""
    if not isinstance(strategy, str | Path):
        return bool(strategy.tournament)
    try:
        with open(resolve_strategy(strategy), "rb") as f:
            raw = tomllib.load(f)
    except (OSError, ValueError):
        from finpod.strategy import load_strategy  # lazy: the CLI imports pipeline at start-up

        return bool(load_strategy(strategy).tournament)
    return bool(raw.get("tournament"))


def check_train(
    strategy: StrategyArg | str | Path | None,
    data: str | Path | None,
    runs: str | Path = "runs",
    *,
    pods: Pods | str | None = None,
    budget: Budget | str | None = None,
    address: str | None = None,
    resume: str | Path | None = None,
    seed: int | None = None,
    total_steps: int | None = None,
    threads: int | None = None,
    run_id: str | None = None,
) -> bool:
    """Check :func:`train`'s arguments before any data, torch or Ray loads, in the order
    its refusals come: the options' values; a resumed run's lock (a second writer is
    refused at once, :func:`finpod.runs.lock.check_free`), its seed (which a resume cannot
    change) and its kind; then each option the chosen kind would not use is refused in one
    line rather than ignored. Returns whether a tournament trains
    (:func:`wants_tournament`)."""
    from finpod.runs import find_run, read_run_info  # lazy: the CLI imports pipeline at start-up
    from finpod.runs.lock import check_free  # lazy: the CLI imports pipeline at start-up

    if total_steps is not None and total_steps <= 0:
        raise FinpodError(f"--steps must be positive, got {total_steps}", "e.g. --steps 100000")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise FinpodError(
            f"--threads must be a whole number ≥ 1, got {threads}", "e.g. --threads 1"
        )
    if resume is None:
        check_writable(Path(runs), "create the run directory under", flag="--runs")
        tournament = wants_tournament(
            strategy, data, runs, pods=pods, budget=budget, address=address
        )
    else:
        if run_id is not None:
            raise FinpodError(
                "--run-id names a new run and --resume continues one",
                "give one of them (a --run-id of an existing run also continues it)",
            )
        run_dir = find_run(resume, runs)
        check_free(run_dir, "run")
        info = read_run_info(run_dir)
        recorded = info.get("seed")
        if seed is not None and recorded is not None and int(seed) != int(recorded):
            raise FinpodError(
                f"run {run_dir.name} has seed {recorded}, not {seed}: a run's seed cannot "
                "change when it is continued",
                f"leave out --seed to continue it, or start a new run with --seed {seed}",
            )
        tournament = info["kind"] != "agent"
        if not tournament:
            for flag, value in (("--pods", pods), ("--budget", budget), ("--address", address)):
                if value is not None:
                    raise FinpodError(
                        f"run {run_dir.name} is one agent's run: {flag} applies to a tournament",
                        "leave it out (--steps says how far one agent trains)",
                    )
    if tournament:
        if total_steps is not None:
            raise FinpodError(
                "--steps applies to one agent; a tournament's budget is its [tournament] "
                "budget or --budget",
                'e.g. --budget "2e6 steps"',
            )
        if threads is not None:
            raise FinpodError(
                "--threads applies to one agent; a tournament's pods take theirs from "
                "[tournament] cpus_per_pod",
                "leave out --threads",
            )
    return tournament


def train(
    strategy: StrategyArg | str | Path | None,
    data: str | Path | None,
    runs: str | Path = "runs",
    *,
    pods: Pods | str | None = None,
    budget: Budget | str | None = None,
    address: str | None = None,
    resume: str | Path | None = None,
    device: str | None = None,
    seed: int | None = None,
    total_steps: int | None = None,
    threads: int | None = None,
    run_id: str | None = None,
    progress: bool = False,
    on_event: Event | None = None,
    display: Any = None,
    checked: bool | None = None,
) -> Path:
    """``finpod train`` as a library call: one agent or a tournament; the run directory.

    A tournament runs when :func:`wants_tournament` says so (``display`` is then the
    tournament's live-view hook); otherwise :func:`train_agent`. The arguments that need
    no data are checked before any work (:func:`check_train`: an option the chosen kind
    would not use, e.g. ``total_steps`` or ``threads`` for a tournament, is refused);
    ``budget`` and ``pods`` text is read here once (:mod:`finpod.grammar`) and goes down
    typed. ``checked``: what :func:`check_train` returned for these same arguments, when
    the caller ran it already (``finpod train`` does, before torch loads), so the strategy
    is not read and the run's lock not probed twice; ``None``: checked here.
    """
    budget = None if budget is None else parse_budget(budget)
    pods = None if pods is None else parse_pods(pods)
    tournament = checked
    if tournament is None:
        tournament = check_train(
            strategy,
            data,
            runs,
            pods=pods,
            budget=budget,
            address=address,
            resume=resume,
            seed=seed,
            total_steps=total_steps,
            threads=threads,
            run_id=run_id,
        )
    if tournament:
        if resume is None and (strategy is None or data is None):
            raise FinpodError(
                "a new tournament needs --strategy and --data", "or --resume RUN to continue one"
            )
        result = run_tournament(
            strategy,
            data,
            pods=pods,
            budget=budget,
            address=address,
            resume=resume,
            runs=runs,
            device=device,
            seed=seed,
            run_id=run_id,
            on_event=on_event,
            display=display,
        )
        return Path(result.run_dir)
    return train_agent(
        strategy,
        data,
        runs,
        device=device,
        seed=seed,
        total_steps=total_steps,
        threads=threads,
        run_id=run_id,
        resume=resume,
        progress=progress,
        on_event=on_event,
    )


def run_all(
    strategy: str | Path = QUICKSTART_STRATEGY,
    data: str | Path = SAMPLE_DATASET_DIR,
    budget: Budget | str | None = None,
    pods: Pods | str | None = None,
    runs: str | Path = "runs",
    reports: str | Path = "reports",
    device: str | None = None,
    seed: int | None = None,
    address: str | None = None,
    rebuild: bool = False,
    *,
    build_sample: bool | None = None,
    progress: bool = False,
    on_event: Event | None = None,
    display: Any = None,
) -> PipelineResult:
    """Build (or reuse) the sample dataset, run a tournament, backtest the winner.

    Notebooks call this as is; ``finpod run`` passes ``on_event`` (and the tournament's
    live ``display``) to show progress. Selection uses the validation split only; the
    backtest split is read only by the backtest.

    A missing ``data`` folder is built from the shipped sample only where asked:
    ``build_sample`` True, or None with ``data`` the default :data:`SAMPLE_DATASET_DIR`.
    """
    from finpod.strategy import load_strategy  # lazy: the CLI imports pipeline at start-up

    # What needs no data is checked before the dataset stage: the strategy, the budget
    # (its text read here once: the tournament gets the typed value).
    load_strategy(resolve_strategy(strategy))
    pods = None if pods is None else parse_pods(pods)
    budget = None if budget is None else parse_budget(budget)
    sample = build_sample or (build_sample is None and Path(data) == SAMPLE_DATASET_DIR)
    if not (Path(data) / "manifest.json").is_file() and not (sample or rebuild):
        raise FinpodError(
            f"--data {data} is not a finpod dataset",
            "check the path, or add --build-sample to build the shipped sample there",
        )
    t0 = time.perf_counter()
    _emit(on_event, "stage", name="dataset", index=1, total=3)
    # A dataset already at --data is the one used, whatever its source (the sample is built
    # only where none is, or with rebuild): it is never replaced by the sample unasked.
    source = "sample" if rebuild else _dataset_source(Path(data)) or "sample"
    data = ensure_dataset(
        data, source=source, rebuild=rebuild, progress=progress, on_event=on_event
    )
    t1 = time.perf_counter()
    _emit(on_event, "stage", name="tournament", index=2, total=3)
    run = run_tournament(
        resolve_strategy(strategy),
        data,
        pods=pods,
        budget=budget,
        address=address,
        runs=runs,
        device=device,
        seed=seed,
        on_event=on_event,
        display=display,
    )
    t2 = time.perf_counter()
    _emit(on_event, "stage", name="backtest", index=3, total=3)
    result, html = backtest_and_report(run.run_dir, data=data, reports=reports, on_event=on_event)
    t3 = time.perf_counter()
    return PipelineResult(
        dataset_dir=data,
        run_dir=Path(run.run_dir),
        report_dir=html.parent,
        tearsheet=html,
        backtest=result,
        seconds={"dataset": t1 - t0, "train": t2 - t1, "backtest": t3 - t2, "total": t3 - t0},
        tournament=run,
    )
