"""``finpod backtest RUN`` and ``finpod report RUN``: displays around
:func:`finpod.pipeline.backtest_and_report` and :class:`finpod.backtest.BacktestResult`.

Reports are named by agent: ``reports/<run>/`` holds the best agent's backtest and
``reports/<run>/<agent>/`` any other's (``--agent top-3``), so they never overwrite each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

console = Console()


def _print_metrics(result) -> None:
    from rich.table import Table

    from finpod.backtest.labels import format_metric, metric_label

    table = Table(title=f"backtest of {result.run_id}", show_lines=False)
    table.add_column("metric")
    for col in result.metrics.columns:
        table.add_column(str(col), justify="right")
    for name, row in result.metrics.iterrows():
        label = escape(metric_label(str(name)))  # labels hold [brackets]
        table.add_row(label, *[format_metric(str(name), v) for v in row])
    console.print(table)


def _print_statistics(result) -> None:
    """PSR, DSR and PBO on one line each, with what they measure or why they are undefined."""
    stats = result.statistics or {}
    names = {
        "psr": "PSR (backtest Sharpe > 0)",
        "dsr": f"DSR (selection among {stats.get('num_trials') or '?'} on validation)",
        "pbo": "PBO (CSCV over the validation candidates)",
    }
    for key, title in names.items():
        value = stats.get(key)
        shown = f"{value:.3f}" if isinstance(value, int | float) else "undefined"
        note = stats.get(f"{key}_note")
        note = f" ({escape(str(note))})" if note else ""
        console.print(f"{title}: [bold]{shown}[/]{note}", highlight=False)
    ceiling = (result.info or {}).get("ceiling")
    if ceiling:
        console.print(ceiling_line(ceiling), highlight=False)


def ceiling_line(ceiling: dict) -> str:
    """One line: what the scripted signal rule reaches under the agent's own bounds, the
    agent's share of it, and the unconstrained cost-aware reference's Sharpe."""

    def pct(x: float | None) -> str:
        return f"{100 * x:.0f} %" if isinstance(x, int | float) and x == x else "undefined"

    text = (
        "ceiling (signal rule under the agent's bounds and controls): information ratio "
        f"[bold]{ceiling['rule_information_ratio']:.2f}[/], Sharpe {ceiling['rule_sharpe']:.2f}; "
        f"the agent reaches {pct(ceiling.get('ir_share_of_rule'))} of its information ratio"
    )
    if "cost_aware_sharpe" in ceiling:
        text += f"; unconstrained cost-aware reference: Sharpe {ceiling['cost_aware_sharpe']:.2f}"
    return text


def backtest(
    run: Annotated[str, typer.Argument(help="Run directory, or a run id under runs/.")],
    agent: Annotated[
        str,
        typer.Option(
            help="selected (what the run selected on validation: best, or the ensemble when "
            "it won), best, top-k (mean action of the top 3 entries), top-N, or ensemble / "
            "ensemble-N (mean target weights of the top entries, each with its own settings)."
        ),
    ] = "selected",
    data: Annotated[
        Path | None, typer.Option(help="Dataset directory (default: the one the run recorded).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Reports folder.")] = Path("reports"),
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:K.")] = "auto",
) -> None:
    """Backtest the run's agent on the backtest split against the index and simple rules."""
    show_backtest(run, agent=agent, data=data, out=out, device=device)


def show_backtest(
    run: str | Path,
    agent: str = "selected",
    data: Path | None = None,
    out: Path = Path("reports"),
    device: str = "auto",
    runs: Path = Path("runs"),
) -> None:
    """Run :func:`finpod.pipeline.backtest_and_report` with a progress bar; print the
    metrics, the selection statistics, the disclosures and where the tearsheet is."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from finpod.backtest.agents import resolve_agent
    from finpod.backtest.benchmarks import BENCHMARKS
    from finpod.pipeline import backtest_and_report, check_writable, report_folder
    from finpod.runs import find_run

    # The report folder is named by agent and checked before the rollouts, not after.
    run_path = find_run(run, runs)
    agent = resolve_agent(run_path, agent)
    check_writable(report_folder(out, run_path.name, agent))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("rollouts on the backtest split", total=1 + len(BENCHMARKS))

        def on_event(kind: str, payload: dict) -> None:
            if kind == "rollout":
                name = payload["name"]
                progress.update(task, advance=1, description=f"rollouts ({name} done)")

        result, html = backtest_and_report(
            run,
            agent=agent,
            data_dir=data,
            reports=out,
            device=device,
            runs=runs,
            on_event=on_event,
        )
    print_result(result, html)


def print_result(result, html: Path) -> None:
    """The metrics table, the selection statistics, the disclosures, the tearsheet's path."""
    _print_metrics(result)
    _print_statistics(result)
    for topic in ("dataset", "universe"):
        if result.disclosures.get(topic):
            text = escape(str(result.disclosures[topic]))
            console.print(f"[yellow]note:[/] {text}", highlight=False)
    console.print(f"tearsheet: {html}")


def report(
    run: Annotated[str, typer.Argument(help="Run id, or a reports/<run> folder.")],
    out: Annotated[Path, typer.Option(help="Reports folder.")] = Path("reports"),
    agent: Annotated[
        str, typer.Option(help="Which backtest of the run: best, top-k, top-N, ensemble.")
    ] = "best",
) -> None:
    """Redraw the tearsheet from a saved backtest (no rollout is run)."""
    from finpod.backtest import BacktestResult
    from finpod.pipeline import report_folder

    given = Path(run) if agent == "best" else Path(run) / agent
    if (given / "backtest.json").is_file():
        folder = given
    else:
        folder = report_folder(out, Path(run).name, agent)
    with console.status("writing the tearsheet..."):
        result = BacktestResult.load(folder)
        html = result.to_html(folder / "tearsheet.html")
    console.print(f"tearsheet: {html}")


def register(app: typer.Typer) -> None:
    """Add ``backtest`` and ``report`` to the finpod app."""
    app.command("backtest")(backtest)
    app.command("report")(report)
