"""``finpod paper RUN``: the run's agent trading an Alpaca paper account (displays around
:class:`finpod.paper.trader.PaperTrader`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from finpod.cli import checks
from finpod.cli.interrupted import note_resume, same_command
from finpod.cli.lines import statement
from finpod.cli.options import RUNS_HELP
from finpod.cli.stop_signals import stop_signals_call
from finpod.errors import FinpodError
from finpod.runs.agent_names import AGENT_HELP

console = Console()

#: Seconds between polls by default: a daily agent needs one decision a day, an intraday
#: one a look after each bar (the bar is complete a few seconds after its end).
DEFAULT_POLL_S = 30.0


def paper(
    run: Annotated[str, typer.Argument(help="Run directory, or a run id under --runs.")],
    agent: Annotated[
        str, typer.Option("--agent", help=f"Which agent trades: {AGENT_HELP}")
    ] = "selected",
    data: Annotated[
        Path | None,
        typer.Option(
            "--data", "-d", help="The run's dataset directory (default: the one the run recorded)."
        ),
    ] = None,
    runs: Annotated[Path, typer.Option("--runs", help=RUNS_HELP)] = Path("runs"),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Log the orders; send nothing, write no state.")
    ] = False,
    feed: Annotated[
        str | None,
        typer.Option(
            help="Alpaca data feed of the live bars: iex or sip (default: the dataset's own, "
            "so the agent decides on the bars it trained on)."
        ),
    ] = None,
    plan: Annotated[
        str,
        typer.Option(
            help="Alpaca data plan: auto (ask the data API whether it serves real-time SIP "
            "bars), free (SIP bars 15 minutes late: decisions on them, the delay recorded) "
            "or paid (real-time SIP bars).",
        ),
    ] = "auto",
    poll: Annotated[float, typer.Option(help="Seconds between two polls.")] = DEFAULT_POLL_S,
    lookback: Annotated[
        int, typer.Option(help="Sessions of live history the features are computed on.")
    ] = 300,
    feature_file: Annotated[
        Path | None,
        typer.Option(
            help="CSV/Parquet of timestamp, tic and the user feature columns the agent "
            "observes (each bar's row written by its close; read at each decision)."
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="One poll, then exit.")] = False,
    max_decisions: Annotated[
        int | None, typer.Option(help="Exit after this many decisions (default: run until Ctrl-C).")
    ] = None,
) -> None:
    """Trade the run's agent on the Alpaca paper account of APCA_API_KEY_ID (Ctrl-C stops
    cleanly; a restart continues without sending any order twice)."""
    if feed is not None and feed not in ("iex", "sip"):
        raise FinpodError(f"unknown feed {feed!r}", "use iex or sip")
    if plan not in ("auto", "free", "paid"):
        raise FinpodError(f"unknown data plan {plan!r}", "use auto, free or paid")
    if not poll > 0 or lookback < 2:  # `not >` also refuses --poll nan
        raise FinpodError("--poll must be > 0 and --lookback at least 2", "e.g. --poll 30")
    checks.at_least("--max-decisions", max_decisions, 1, "10")
    if data is not None:
        checks.dataset_dir(data)
    run_path = checks.run_with_board(run, runs)
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.paper.trader import PaperTrader

    trader = PaperTrader(
        run_path,
        agent,
        data=data,
        dry_run=dry_run,
        feed=feed,
        plan=plan,
        lookback_sessions=lookback,
        feature_file=feature_file,
        log=lambda line: statement(console, line, markup=False),
    )
    # SIGTERM and SIGHUP stop as Ctrl-C does: the request in flight finishes, its answer
    # is recorded, and the trader says how to continue.
    note_resume(same_command())
    with stop_signals_call(lambda: setattr(trader, "stopping", True)):
        trader.run(poll, max_decisions=max_decisions, once=once)


def register(app: typer.Typer) -> None:
    app.command(no_args_is_help=True)(paper)


def paper_report(run: str | Path, folder: Path, runs: Path = Path("runs")) -> Path | None:
    """Write ``folder/paper.html`` from the paper record of ``run`` (a run directory, or a
    run id under ``runs``); None when the run never traded on paper."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.paper.record import write_paper_page

    run_dir = Path(run) if (Path(run) / "paper").is_dir() else runs / Path(run).name
    if not (run_dir / "paper").is_dir():
        return None
    return write_paper_page(run_dir, folder / "paper.html", f"paper trading of {run_dir.name}")
