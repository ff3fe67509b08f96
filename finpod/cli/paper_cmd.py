"""``finpod paper RUN``: the run's agent trading an Alpaca paper account (displays around
:class:`finpod.paper.trader.PaperTrader`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from finpod.runs.agent_names import AGENT_HELP

console = Console()

#: Seconds between polls by default: a daily agent needs one decision a day, an intraday
#: one a look after each bar (the bar is complete a few seconds after its end).
DEFAULT_POLL_S = 30.0


def paper(
    run: Annotated[Path, typer.Argument(help="Run directory written by finpod train.")],
    agent: Annotated[str, typer.Option(help=f"Which agent trades: {AGENT_HELP}")] = "selected",
    data: Annotated[
        Path | None,
        typer.Option(help="The run's dataset directory (default: the one run.json records)."),
    ] = None,
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
    realtime: Annotated[
        bool,
        typer.Option(
            "--realtime",
            help="The data plan serves real-time SIP bars (not the free plan's 15 minutes "
            "late): sip requests run up to the clock.",
        ),
    ] = False,
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
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.errors import FinpodError
    from finpod.paper.trader import PaperTrader

    if feed is not None and feed not in ("iex", "sip"):
        raise FinpodError(f"unknown feed {feed!r}", "use iex or sip")
    if poll <= 0 or lookback < 2:
        raise FinpodError("--poll must be > 0 and --lookback at least 2", "e.g. --poll 30")
    trader = PaperTrader(
        run,
        agent,
        data_dir=data,
        dry_run=dry_run,
        feed=feed,
        realtime=realtime,
        lookback_sessions=lookback,
        feature_file=feature_file,
        log=lambda line: console.print(escape(line), highlight=False, soft_wrap=True),
    )
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
