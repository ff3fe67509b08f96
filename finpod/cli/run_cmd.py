"""``finpod run``: the whole research loop on the shipped data, offline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from finpod.pipeline import QUICKSTART_STRATEGY, SAMPLE_DATASET_DIR

console = Console()


def run(
    strategy: Annotated[Path, typer.Option(help="Strategy TOML of the tournament.")] = (
        QUICKSTART_STRATEGY
    ),
    data: Annotated[
        Path, typer.Option(help="Dataset directory (the shipped sample is built here if missing).")
    ] = SAMPLE_DATASET_DIR,
    budget: Annotated[
        str | None, typer.Option(help='Tournament budget, e.g. "5m", "2e6 steps", "20 pods".')
    ] = None,
    pods: Annotated[str | None, typer.Option(help='"auto" or the most pods at once.')] = None,
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (auto or HOST:PORT); default in-process."),
    ] = None,
    runs: Annotated[Path, typer.Option(help="Where run directories go.")] = Path("runs"),
    reports: Annotated[Path, typer.Option(help="Where tearsheets go.")] = Path("reports"),
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda inside the pods.")] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed (default: the strategy's).")] = None,
    rebuild: Annotated[bool, typer.Option(help="Rebuild the dataset even if it exists.")] = False,
) -> None:
    """Build the sample dataset, train a tournament, backtest the winner, write the tearsheet."""
    from finpod.cli import backtest_cmd
    from finpod.cli.tournament_cmd import train_tournament
    from finpod.data import load_manifest
    from finpod.pipeline import ensure_dataset, resolve_strategy

    t0 = time.perf_counter()
    console.rule("[bold]1/3 dataset")
    dataset = ensure_dataset(data, rebuild=rebuild, progress=True)
    manifest = load_manifest(dataset)
    console.print(
        f"dataset {dataset}: {len(manifest['tickers'])} tickers, {manifest['bar']} bars, "
        f"hash {manifest['hash'][:12]}"
    )
    console.rule("[bold]2/3 tournament (selection on the validation split)")
    run_dir = train_tournament(
        resolve_strategy(strategy),
        dataset,
        pods=pods,
        budget=budget,
        address=address,
        out=runs,
        device=device,
        seed=seed,
    )
    console.rule("[bold]3/3 backtest (the backtest split, first touched here)")
    backtest_cmd.backtest(str(run_dir), agent="best", data=dataset, out=reports, device="auto")
    minutes = (time.perf_counter() - t0) / 60
    console.print(
        f"[bold green]done[/] in {minutes:.1f} min; open {reports / Path(run_dir).name / 'tearsheet.html'}"
    )


def register(app: typer.Typer) -> None:
    """Add ``run`` to the finpod app."""
    app.command("run")(run)
