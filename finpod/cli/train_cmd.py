"""``finpod train``: one agent, or a tournament of agents on Ray; writes ``runs/<run-id>/``.

Display only: the work is :func:`finpod.pipeline.train` (see :mod:`finpod.pipeline`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from finpod.cli import checks
from finpod.cli.interrupted import note_run_dir
from finpod.cli.lines import statement
from finpod.cli.options import (
    DATA_HELP,
    DEVICE_DEFAULT,
    DEVICE_HELP,
    RUNS_HELP,
    STRATEGY_HELP,
)
from finpod.errors import FinpodError
from finpod.pipeline import check_train, train
from finpod.runs import RUN_FILE, check_run_id
from finpod.strategy import load_strategy

#: Progress and the friendly lines go to stderr: stdout holds only the run directory, so
#: ``RUN=$(finpod train …)`` captures it.
console = Console(stderr=True)


def run_header(payload: dict) -> str:
    """The first line of a single agent's training: ``run directory: DIR`` for a new run,
    ``resuming DIR from N env steps (to T)`` for a resumed one (never a fresh-start
    header over a run that continues)."""
    run_dir = payload["run_dir"]
    resumed = payload.get("resumed_from")
    if resumed is None:
        return f"run directory: {run_dir}"
    if payload.get("finished"):
        seed = f" (seed {payload['seed']})" if payload.get("seed") is not None else ""
        return (
            f"run {run_dir}{seed} is finished at {resumed:,} env steps: nothing to do, "
            "nothing changed"
        )
    total = payload.get("total_steps")
    if total is not None and resumed >= total:
        return (
            f"resuming {run_dir} from {resumed:,} env steps: already at its {total:,} "
            "(pass --steps to train further)"
        )
    to = f" (training to {total:,})" if total is not None else ""
    return f"resuming {run_dir} from {resumed:,} env steps{to}"


def register(app: typer.Typer) -> None:
    """Add ``finpod train`` to the app."""

    @app.command("train")
    def train_cmd(
        strategy: Annotated[
            Path | None, typer.Option("--strategy", "-s", help=STRATEGY_HELP)
        ] = None,
        data: Annotated[Path | None, typer.Option("--data", "-d", help=DATA_HELP)] = None,
        runs: Annotated[Path, typer.Option("--runs", help=RUNS_HELP)] = Path("runs"),
        device: Annotated[
            str | None,
            typer.Option("--device", help=DEVICE_HELP, show_default=DEVICE_DEFAULT),
        ] = None,
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed (default: the strategy's train.seed).")
        ] = None,
        steps: Annotated[
            int | None,
            typer.Option(
                "--steps", help="Single agent: env steps to train (default: train.total_steps)."
            ),
        ] = None,
        run_id: Annotated[
            str | None,
            typer.Option(
                "--run-id",
                help="Run directory name under --runs (default: time-stamped); an existing "
                "run of that name is continued, as with --resume.",
            ),
        ] = None,
        pods: Annotated[
            str | None,
            typer.Option(
                "--pods",
                help='Tournament: "auto" (what the cluster fits) or the most pods at once.',
                show_default="the strategy's [tournament] pods",
            ),
        ] = None,
        budget: Annotated[
            str | None,
            typer.Option(
                "--budget",
                help='Tournament budget: "30min", "2h", "1e6 steps" or "40 pods" (docs/grammar.md).',
                show_default="the strategy's [tournament] budget",
            ),
        ] = None,
        address: Annotated[
            str | None,
            typer.Option(
                "--address", help="Tournament: Ray cluster (auto or HOST:PORT); default in-process."
            ),
        ] = None,
        resume: Annotated[
            str | None,
            typer.Option("--resume", help="Continue this run directory (or run id under --runs)."),
        ] = None,
        threads: Annotated[
            int | None,
            typer.Option(
                "--threads",
                help="Single agent: torch threads while it trains (run.json records them; "
                "a resumed run keeps its own unless this is given).",
                show_default="one per 2 idle CPUs, 1 to 4",
            ),
        ] = None,
    ) -> None:
        """Train one agent, or a tournament of agents on Ray, and write runs/<run-id>/.

        A tournament runs when the strategy has a tournament table or any of --pods,
        --budget, --address, --resume is given; otherwise one agent is trained. Either way
        checkpoints are chosen on the validation split only.
        """
        if run_id is not None:
            check_run_id(run_id)  # one folder under --runs, never a path out of it
        continuing = resume is None and run_id is not None and (runs / run_id / RUN_FILE).is_file()
        if continuing:
            # A fixed run id continues its run (e.g. a retried Kubernetes job); said once the
            # run is opened (a refusal is then its one line).
            resume = str(runs / run_id)
        # Everything that needs no data, before torch, pandas or Ray load: the options, the
        # strategy's keys, then a resumed run's lock and seed, and the options its kind
        # would not use.
        checks.positive("--steps", steps, "100000")
        checks.positive_int("--threads", threads, "1")
        checks.device(device)
        budget = checks.budget(budget)  # read once: the typed value goes down
        pods = checks.pods(pods)
        if resume is None:
            if strategy is None or data is None:
                raise FinpodError(
                    "finpod train needs --strategy and --data", "or --resume RUN to continue a run"
                )
            checks.strategy_file(strategy)
            checks.dataset_dir(data)
            checks.writable(runs, "--runs", "create the run directory under")
        tournament = check_train(
            strategy,
            data,
            runs,
            pods=pods,
            budget=budget,
            address=address,
            resume=resume,
            seed=seed,
            total_steps=steps,
            threads=threads,
            run_id=None if continuing else run_id,
        )
        # lazy: the tournament's live view (and pandas, for its tables) loads only to train
        from finpod.cli.tournament_cmd import TournamentView

        view = TournamentView()
        parsed = None
        if resume is None and strategy is not None:
            parsed = load_strategy(strategy)  # read once, handed down (torch loads here)
        finished: list[bool] = []

        def show(kind: str, payload: dict) -> None:
            if kind == "run" and tournament and continuing and not payload.get("finished"):
                console.print(f"continuing run {payload['run_dir']}", highlight=False)
            if kind == "log":  # a single agent's training log
                statement(console, payload["line"], markup=False)
            elif kind == "run" and not tournament:  # a single agent's run directory, first
                note_run_dir(payload["run_dir"])
                finished.append(bool(payload.get("finished")))
                if continuing and not finished[-1]:
                    console.print(f"continuing run {payload['run_dir']}", highlight=False)
                console.print(run_header(payload), highlight=False, soft_wrap=True)
            else:
                view.on_event(kind, payload)

        try:
            run_dir = train(
                parsed or strategy,
                data,
                runs,
                pods=pods,
                budget=budget,
                address=address,
                resume=resume,
                device=device,
                seed=seed,
                total_steps=steps,
                threads=threads,
                run_id=None if continuing else run_id,
                # Without a terminal a progress bar draws nothing: the log lines carry progress.
                progress=console.is_terminal,
                on_event=show,
                display=view.display,
                checked=tournament,  # checked above, before torch loaded
            )
        finally:
            view.close()
        if not tournament and not any(finished):
            console.print(f"[bold green]run written to[/] {run_dir}", highlight=False)
        # The run directory on stdout, alone (a finished run's too), so scripts capture it.
        typer.echo(str(run_dir))
