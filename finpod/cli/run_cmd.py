"""``finpod run``: the whole research loop on the shipped data, offline (displays around
:func:`finpod.pipeline.run_all`)."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from finpod.cli import checks
from finpod.cli.backtest_cmd import print_result
from finpod.cli.options import DEVICE_HELP, REPORTS_HELP, RUNS_HELP
from finpod.pipeline import QUICKSTART_STRATEGY, SAMPLE_DATASET_DIR, resolve_strategy, run_all

console = Console()


def _strategy_default(table: str, key: str) -> str:
    """``--help``'s default of an option that the strategy file sets: its ``[table] key``,
    with the value the quick-start strategy gives it."""
    try:
        with open(resolve_strategy(QUICKSTART_STRATEGY), "rb") as f:
            value = tomllib.load(f)[table][key]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return f"the strategy's [{table}] {key}"
    return f"the strategy's [{table}] {key}; {value} in {Path(QUICKSTART_STRATEGY).name}"


def run(
    strategy: Annotated[
        Path, typer.Option("--strategy", "-s", help="Strategy TOML of the tournament.")
    ] = QUICKSTART_STRATEGY,
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            "-d",
            help="Dataset directory. The shipped sample is built here when this is the "
            "default and missing, or with --build-sample; a missing folder is refused "
            "otherwise.",
        ),
    ] = SAMPLE_DATASET_DIR,
    build_sample: Annotated[
        bool,
        typer.Option("--build-sample", help="Build the shipped sample in a missing --data."),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help='Tournament budget, e.g. "5min", "2e6 steps", "20 pods" (docs/grammar.md).',
            show_default=_strategy_default("tournament", "budget"),
        ),
    ] = None,
    pods: Annotated[
        str | None,
        typer.Option(
            "--pods",
            help='"auto" or the most pods at once.',
            show_default=_strategy_default("tournament", "pods"),
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="Ray cluster address (auto or HOST:PORT); default in-process."
        ),
    ] = None,
    runs: Annotated[Path, typer.Option("--runs", help=RUNS_HELP)] = Path("runs"),
    reports: Annotated[Path, typer.Option("--reports", help=REPORTS_HELP)] = Path("reports"),
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help=DEVICE_HELP + " Inside the pods.",
            show_default=_strategy_default("train", "device"),
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Run seed (default: the strategy's).")
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild/--no-rebuild", help="Rebuild the dataset even if it exists.")
    ] = False,
) -> None:
    """Build the sample dataset, train a tournament, backtest the winner, write the tearsheet."""
    # Everything that needs no data, before torch, pandas or Ray load.
    budget = checks.budget(budget)  # read once: the typed value goes down
    pods = checks.pods(pods)
    checks.device(device)
    checks.strategy_file(strategy)
    wants_sample = build_sample or rebuild or data == SAMPLE_DATASET_DIR
    if not (data / "manifest.json").is_file() and not wants_sample:
        checks.dataset_dir(
            data,
            hint="check the path, or add --build-sample to build the shipped sample there",
        )
    checks.writable(runs, "--runs", "create the run directory under")
    checks.writable(reports, "--reports", "write the report to")
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.benchmarks import ROLLOUTS
    from finpod.cli.tournament_cmd import TournamentView

    titles = {
        "dataset": "1/3 dataset",
        "tournament": "2/3 tournament (selection on the validation split)",
        "backtest": "3/3 backtest (the backtest split, first touched here)",
    }
    view = TournamentView()
    rollouts = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    )

    def on_event(kind: str, payload: dict) -> None:
        if kind == "stage":
            console.rule(f"[bold]{titles[payload['name']]}")
            if payload["name"] == "backtest":
                rollouts.add_task("rollouts on the backtest split", total=len(ROLLOUTS))
                rollouts.start()
        elif kind == "dataset":
            manifest = payload["manifest"]
            console.print(
                f"dataset {payload['path']}: {len(manifest.tickers)} tickers, "
                f"{manifest.bar} bars, hash {manifest.hash[:12]}"
            )
        elif kind == "rollout":
            rollouts.update(rollouts.task_ids[0], advance=1)
        elif kind == "report":
            rollouts.stop()
        else:
            view.on_event(kind, payload)

    t0 = time.perf_counter()
    try:
        result = run_all(
            strategy,
            data,
            budget=budget,
            pods=pods,
            runs=runs,
            reports=reports,
            device=device,
            seed=seed,
            address=address,
            rebuild=rebuild,
            build_sample=build_sample or None,
            progress=True,
            on_event=on_event,
            display=view.display,
        )
    finally:
        view.close()
        rollouts.stop()
    print_result(result.backtest, result.tearsheet)  # the verdict first, as the page opens
    minutes = (time.perf_counter() - t0) / 60
    console.print(f"[bold green]done[/] in {minutes:.1f} min; open {result.tearsheet}")


def register(app: typer.Typer) -> None:
    """Add ``run`` to the finpod app."""
    app.command("run")(run)
