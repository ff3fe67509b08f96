"""``finpod walkforward``: retrain over rolling or expanding folds and stitch the record.

Prints a progress bar over the fold × seed jobs, then the per-fold table and the HAC
t-statistic of the stitched agent's active return against equal weight; writes the
walk-forward directory (``--out``) with its ``report.html``. Running the same command
again resumes a killed walk-forward at the jobs it had not finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from finpod.cli import checks
from finpod.cli.interrupted import note_resume, same_command
from finpod.cli.lines import statement
from finpod.cli.options import DATA_HELP, DEVICE_DEFAULT, DEVICE_HELP
from finpod.cli.stop_signals import reclaim_stop_signals

console = Console()


def register(app: typer.Typer) -> None:
    """Add ``finpod walkforward`` to the app."""

    @app.command("walkforward")
    def walkforward_cmd(
        data: Annotated[Path, typer.Option("--data", "-d", help=DATA_HELP)],
        strategy: Annotated[
            Path,
            typer.Option("--strategy", "-s", help="Strategy TOML: the algorithm each fold trains."),
        ] = Path("strategies/ppo.toml"),
        out: Annotated[
            Path,
            typer.Option("--out", "-o", help="Walk-forward directory (same settings: resumes)."),
        ] = Path("reports/walkforward"),
        scheme: Annotated[
            str, typer.Option("--scheme", help="rolling (fixed train length) or expanding.")
        ] = "rolling",
        train: Annotated[
            str, typer.Option("--train", help="Train window: 3y, 18mo, 26w, 90d or sessions (750).")
        ] = "3y",
        validation: Annotated[
            str, typer.Option("--validation", help="Validation window (same units).")
        ] = "1y",
        backtest: Annotated[
            str, typer.Option("--backtest", help="Backtest window, also the step between folds.")
        ] = "1y",
        folds: Annotated[
            int | None, typer.Option("--folds", help="Number of folds (default: as many as fit).")
        ] = None,
        embargo: Annotated[
            int | None,
            typer.Option(
                "--embargo", help="Sessions between windows (default 5 daily, 1 intraday)."
            ),
        ] = None,
        seeds: Annotated[
            str, typer.Option("--seeds", help="Seeds per fold: a count (3) or a list (0,4,7).")
        ] = "3",
        steps: Annotated[
            int | None,
            typer.Option("--steps", help="Env steps per fold × seed (default: train.total_steps)."),
        ] = None,
        warm_start: Annotated[
            bool,
            typer.Option(
                "--warm-start/--retrain",
                help="Start each fold from the previous fold's winner, or retrain from scratch.",
            ),
        ] = False,
        use_ray: Annotated[
            bool,
            typer.Option("--ray/--no-ray", help="Run the jobs as Ray tasks (in parallel)."),
        ] = True,
        address: Annotated[
            str | None,
            typer.Option("--address", help="Ray cluster (auto or HOST:PORT); default in-process."),
        ] = None,
        num_cpus: Annotated[
            int | None, typer.Option("--num-cpus", help="CPUs of the local Ray (default: all).")
        ] = None,
        cpus_per_job: Annotated[
            int, typer.Option("--cpus-per-job", help="CPUs (torch threads) per fold × seed job.")
        ] = 1,
        device: Annotated[
            str | None,
            typer.Option("--device", help=DEVICE_HELP, show_default=DEVICE_DEFAULT),
        ] = None,
        restart: Annotated[
            bool,
            typer.Option("--restart", help="Discard results in --out made with other settings."),
        ] = False,
    ) -> None:
        """Walk-forward: train → validation → backtest per fold, over seeds, stitched.

        Selection (checkpoints and seeds) reads only each fold's validation window; each
        backtest window is read only by its own fold's backtest. The stitched agent's
        active return vs equal weight gets a HAC (Newey–West) t-statistic.
        """
        # Everything that needs no data, before torch, pandas or Ray load.
        checks.dataset_dir(data)
        checks.strategy_file(strategy)
        checks.scheme(scheme)
        for what, length in (("train", train), ("validation", validation), ("backtest", backtest)):
            checks.window_length(length, what)
        checks.at_least("--folds", folds, 1, "6")
        checks.at_least("--embargo", embargo, 0, "5")
        parsed_seeds = checks.seeds(seeds)  # read once: the typed value goes down
        checks.positive("--steps", steps, "100000")
        checks.at_least("--cpus-per-job", cpus_per_job, 1, "1")
        checks.at_least("--num-cpus", num_cpus, 1, "4")
        checks.device(device)
        checks.writable(out, "--out")
        note_resume(same_command())  # the same command resumes at the jobs not done

        def log(line: str) -> None:
            reclaim_stop_signals()  # Ray, once started, took SIGTERM over
            statement(bar.console, line, markup=False)

        def progress(done: int, total: int) -> None:
            # The bar starts once the folds are planned: a refused plan is one line alone.
            reclaim_stop_signals()
            if not bar.live.is_started:
                bar.start()
            bar.update(task, completed=done, total=total)

        # lazy: `finpod --help` and usage errors answer without loading torch and pandas
        from finpod.cli.tables import print_table
        from finpod.walkforward import FoldSpec, run_walkforward

        spec = FoldSpec(
            scheme=scheme,
            train=train,
            validation=validation,
            backtest=backtest,
            folds=folds,
            embargo=embargo,
        )
        bar = Progress(
            TextColumn("[bold]walk-forward"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("fold × seed jobs"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        task = bar.add_task("jobs", total=None)
        try:
            result = run_walkforward(
                data,
                strategy,
                out,
                spec=spec,
                seeds=parsed_seeds,
                steps=steps,
                warm_start=warm_start,
                use_ray=use_ray,
                address=address,
                num_cpus=num_cpus,
                cpus_per_job=cpus_per_job,
                device=device,
                restart=restart,
                on_progress=progress,
                log=log,
            )
        finally:
            if bar.live.is_started:
                bar.stop()
        header = [
            "fold",
            "from",
            "winner",
            "Sharpe",
            "EW Sharpe",
            "active/yr",
            "DSR",
            "PBO",
        ]
        rows = [
            [
                str(r["fold"]),
                str(r["backtest"]).split(" → ")[0],
                f"seed {r['winner_seed']}",
                _num(r["sharpe_agent"]),
                _num(r["sharpe_equal_weight"]),
                _pct(r["active_annual_mean"]),
                _num(r["dsr"]),
                _num(r["pbo"]),
            ]
            for _, r in result.folds.iterrows()
        ]
        print_table(
            console,
            "Walk-forward folds: backtest windows, the winner's Sharpe (annualized)",
            header,
            rows,
            lambda: [
                (f"fold {row[0]}", list(zip(header[1:], row[1:], strict=True))) for row in rows
            ],
        )
        h = result.hac["vs_equal_weight"]
        if h.get("t") is None:
            console.print(
                "HAC t-statistic of the active return: undefined " + str(h.get("note", ""))
            )
        else:
            verdict = "significant" if h["significant_5pct"] else "not significant"
            statement(
                console,
                f"[bold]active return vs equal weight:[/] mean {h['annual_mean'] * 100:+.2f} %/yr "
                f"over {h['n']} bars, [bold]HAC t = {h['t']:.2f}[/] (p = {h['p']:.3f}, "
                f"{h['maxlags']} Newey–West lags; naive t {h['naive_t']:.2f}): {verdict} at 5 %",
            )
        console.print(f"[bold green]report written to[/] {result.report}")


def _num(v: object) -> str:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return f"{x:.2f}" if x == x else "–"


def _pct(v: object) -> str:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return f"{x * 100:+.1f} %" if x == x else "–"
