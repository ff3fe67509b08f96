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
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from finpod.cli import checks
from finpod.cli.options import DEVICE_HELP, REPORTS_HELP, RUNS_HELP
from finpod.cli.paper_cmd import paper_report
from finpod.errors import FinpodError
from finpod.pipeline import backtest_and_report, check_writable, report_folder
from finpod.runs import LEADERBOARD_FILE, find_run, read_json, read_run_info
from finpod.runs.agent_names import AGENT_HELP

#: What a reader sees goes to stderr: stdout holds only the report folder, so
#: ``REPORT=$(finpod backtest RUN)`` captures it.
console = Console(stderr=True)
#: ``finpod info RUN`` is a reading, not a product: its lines are its stdout.
info_console = Console()


def _title(result) -> str:
    agent = (result.info or {}).get("agent")
    return f"backtest of {result.run_id}" + (f", agent {agent}" if agent else "")


def _print_metrics(result) -> None:
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.labels import format_metric, metric_label
    from finpod.cli.tables import print_metrics

    print_metrics(console, _title(result), result.metrics, metric_label, format_metric)


def _print_summary(result) -> None:
    """One compact table: the agent beside the reference and the benchmarks, a few
    headline metrics each (:data:`finpod.cli.tables.SUMMARY_METRICS`)."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.labels import format_metric
    from finpod.cli.tables import print_summary

    print_summary(console, _title(result), result.metrics, format_metric)


def _print_statistics(result) -> None:
    """PSR, DSR and PBO on one line each, with what they measure or why they are undefined
    (on in-sample bars the DSR and PBO are not applicable, and say so)."""
    stats = result.statistics or {}
    in_sample = "in_sample" in (result.info or {})
    names = {
        "psr": "PSR (backtest Sharpe > 0)",
        "dsr": f"DSR (selection among {stats.get('num_trials') or '?'} on validation)",
        "pbo": "PBO (CSCV over the validation candidates)",
    }
    for key, title in names.items():
        value = stats.get(key)
        shown = f"{value:.3f}" if isinstance(value, int | float) else "undefined"
        note = stats.get(f"{key}_note")
        if in_sample and key != "psr":
            shown, note = "not applicable", str(note or "").removeprefix("not applicable: ")
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
    run: Annotated[str, typer.Argument(help="Run directory, or a run id under --runs.")],
    agent: Annotated[str, typer.Option("--agent", help=AGENT_HELP)] = "selected",
    data: Annotated[
        Path | None,
        typer.Option("--data", "-d", help="Dataset directory (default: the one the run recorded)."),
    ] = None,
    reports: Annotated[Path, typer.Option("--reports", help=REPORTS_HELP)] = Path("reports"),
    runs: Annotated[Path, typer.Option("--runs", help=RUNS_HELP)] = Path("runs"),
    device: Annotated[
        str | None, typer.Option("--device", help=DEVICE_HELP, show_default="auto")
    ] = None,
    use_recorded_inputs: Annotated[
        bool,
        typer.Option(
            "--use-recorded-inputs",
            help="Read the run's own copies of the files it read (reference weights, "
            "benchmark levels) instead of refusing ones that changed since.",
        ),
    ] = False,
    details: Annotated[
        bool,
        typer.Option(
            "--details",
            help="Print every metric block (all metrics, capacity, selection statistics), "
            "not only the verdict and the summary table.",
        ),
    ] = False,
    allow_in_sample: Annotated[
        bool,
        typer.Option(
            "--allow-in-sample",
            help="Backtest another dataset's bars even where they overlap the run's train or "
            "validation bars: the verdict is then IN-SAMPLE, without the run's DSR and PBO.",
        ),
    ] = False,
) -> None:
    """Backtest the run's agent on the backtest split against the index and simple rules.

    The verdict comes first, then one table of the agent beside the reference and the
    benchmarks (on stderr); stdout holds only the report folder. Bars of another dataset
    (--data) that overlap what the run trained or selected on are refused before the
    rollouts, unless --allow-in-sample."""
    checks.device(device)
    if data is not None:
        checks.dataset_dir(data)
    elif allow_in_sample:
        raise FinpodError(
            "--allow-in-sample applies to another dataset's bars (--data DIR): the run's own "
            "backtest split never overlaps its train and validation splits",
            "leave out --allow-in-sample",
        )
    show_backtest(
        run,
        agent=agent,
        data=data,
        reports=reports,
        device=device or "auto",
        runs=runs,
        use_recorded_inputs=use_recorded_inputs,
        details=details,
        allow_in_sample=allow_in_sample,
    )


def show_backtest(
    run: str | Path,
    agent: str = "selected",
    data: Path | None = None,
    reports: Path = Path("reports"),
    device: str = "auto",
    runs: Path = Path("runs"),
    use_recorded_inputs: bool = False,
    details: bool = False,
    allow_in_sample: bool = False,
) -> Path:
    """Run :func:`finpod.pipeline.backtest_and_report` with a progress bar; print the
    verdict, the summary table (every metric block with ``details``), the disclosures and
    where the tearsheet is (on stderr), then the report folder alone on stdout. Returns
    the report folder. ``allow_in_sample``: see :func:`finpod.backtest.run_backtest`."""
    run_path = checks.run_with_board(run, runs)  # before torch and pandas load
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.agents import resolve_agent
    from finpod.backtest.benchmarks import ROLLOUTS

    # The report folder is named by agent and checked before the rollouts, not after.
    check_writable(
        report_folder(reports, run_path.name, resolve_agent(run_path, agent)), flag="--reports"
    )
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    # Without a terminal a bar draws nothing but a stray blank line: none then.
    bar = Progress(*columns, console=console, transient=True, disable=not console.is_terminal)
    with bar as progress:
        task = progress.add_task("rollouts on the backtest split", total=len(ROLLOUTS))

        def on_event(kind: str, payload: dict) -> None:
            if kind == "rollout":
                name = payload["name"]
                progress.update(task, advance=1, description=f"rollouts ({name} done)")

        result, html = backtest_and_report(
            run,
            agent=agent,
            data=data,
            reports=reports,
            device=device,
            runs=runs,
            on_event=on_event,
            use_recorded_inputs=use_recorded_inputs,
            allow_in_sample=allow_in_sample,
        )
    print_result(result, html, details=details)
    typer.echo(str(html.parent))  # alone on stdout, so scripts can capture it
    return html.parent


def print_result(result, html: Path, verdict: bool = True, details: bool = False) -> None:
    """(``verdict``) The verdict first, as the tearsheet opens, then one compact table of
    the agent beside the reference and the benchmarks, the disclosures and the tearsheet's
    path. ``details`` adds every metric block: the whole metrics table, the capacity table
    (square-root costs) and the selection statistics."""
    if verdict:
        show_verdict(result)
    if details:
        _print_details(result)
    else:
        _print_summary(result)
    for topic in ("stopped", "dataset", "in_sample", "bars", "universe", "inputs"):
        if result.disclosures.get(topic):
            text = escape(str(result.disclosures[topic]))
            console.print(f"[yellow]note:[/] {text}", highlight=False)
    console.print(f"tearsheet: {html}", highlight=False, soft_wrap=True)


def _print_details(result) -> None:
    """Every metric block: all metrics, capacity, the selection statistics."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.capacity import capacity_text
    from finpod.cli.tables import print_table

    _print_metrics(result)
    if (result.info or {}).get("capacity"):
        frame = capacity_text(result.info["capacity"])
        rows = [list(r) for r in frame.itertuples(index=False)]
        header = list(frame.columns)

        def long_form() -> list[tuple[str, list[tuple[str, str]]]]:
            return [(f"{r[0]} at {r[1]}", list(zip(header[2:], r[2:], strict=True))) for r in rows]

        print_table(console, "capacity (same policy, other account sizes)", header, rows, long_form)
    _print_statistics(result)


def show_verdict(result) -> None:
    """The verdict of ``result`` (:func:`finpod.backtest.verdict.backtest_verdict`)."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.verdict import backtest_verdict
    from finpod.cli.verdict_view import print_verdict

    print_verdict(console, backtest_verdict(result))


def show_run_info(
    target: str | Path, reports: Path = Path("reports"), runs: Path = Path("runs")
) -> bool:
    """``finpod info`` of a run (a run directory or id) or of a saved backtest folder: the
    run's backtest verdict, or what the run spent and how to backtest it. False when
    ``target`` is neither (a dataset, then)."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest import BacktestResult
    from finpod.backtest.run_record import read_curves, run_spend
    from finpod.backtest.verdict import backtest_verdict, spend_lines
    from finpod.cli.verdict_view import print_verdict

    folder, run_dir = None, None
    if (Path(target) / "backtest.json").is_file():
        folder = Path(target)
    else:
        try:
            run_dir = find_run(target, runs)
        except FinpodError:
            return False
        try:
            folder = saved_report_folder(run_dir, reports, "selected", runs)
        except FinpodError:
            folder = None
    spend = None
    if run_dir is not None:
        board_path = run_dir / LEADERBOARD_FILE
        board = read_json(board_path, LEADERBOARD_FILE) if board_path.is_file() else {}
        spend = run_spend(read_run_info(run_dir), board, read_curves(run_dir))
    if folder is None:
        info_console.print(f"run {run_dir.name}: not backtested yet", highlight=False)
        for line in spend_lines(spend):
            info_console.print(f"  {escape(line)}", highlight=False)
        info_console.print(f"run finpod backtest {run_dir} for its verdict", highlight=False)
        return True
    result = BacktestResult.load(folder)
    if spend and not (result.info or {}).get("spend"):
        result.info = {**(result.info or {}), "spend": spend}
    agent = (result.info or {}).get("agent")
    info_console.print(
        f"run {escape(result.run_id)}" + (f", agent {escape(str(agent))}" if agent else ""),
        highlight=False,
    )
    info_console.print(f"tearsheet: {folder / 'tearsheet.html'}", highlight=False)
    print_verdict(info_console, backtest_verdict(result))
    return True


def report(
    run: Annotated[str, typer.Argument(help="Run id, or a reports/<run> folder.")],
    reports: Annotated[Path, typer.Option("--reports", help=REPORTS_HELP)] = Path("reports"),
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="Which backtest of the run, as in finpod backtest: " + AGENT_HELP
        ),
    ] = "selected",
    runs: Annotated[Path, typer.Option("--runs", help=RUNS_HELP)] = Path("runs"),
) -> None:
    """Redraw the tearsheet from a saved backtest (no rollout is run)."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest import BacktestResult

    folder = saved_report_folder(run, reports, agent, runs)
    with console.status("writing the tearsheet..."):
        result = BacktestResult.load(folder)
        html = result.to_html(folder / "tearsheet.html")
    console.print(f"tearsheet: {html}", highlight=False, soft_wrap=True)
    paper = paper_report(run, folder, runs)
    if paper is not None:
        console.print(f"paper trading: {paper}", highlight=False, soft_wrap=True)
    typer.echo(str(folder))  # the report folder alone on stdout, as after finpod backtest


def saved_report_folder(
    run: str | Path,
    reports: Path = Path("reports"),
    agent: str = "selected",
    runs: Path = Path("runs"),
) -> Path:
    """The folder ``finpod backtest RUN --agent AGENT`` wrote: ``agent`` is named as in
    ``finpod backtest`` (``selected`` is looked up in the run's leaderboard, so ``finpod
    report RUN`` finds what ``finpod backtest RUN`` wrote). ``run`` is a run id, a run
    directory or a ``reports/<run>`` folder."""
    # lazy: `finpod --help` and usage errors answer without loading torch and pandas
    from finpod.backtest.agents import canonical_agent, resolve_agent

    run_id = Path(run).name
    if agent.strip().lower() == "selected":
        name = None
        for candidate in dict.fromkeys((str(run), run_id)):  # a reports/<run> path: its id
            try:
                name = resolve_agent(find_run(candidate, runs), agent)
                break
            except FinpodError:
                continue
        name = name or _only_saved_agent(run, reports)
    else:
        name = canonical_agent(agent)
    for given in (Path(run), Path(reports) / run_id):
        folder = given if name == "best" else given / name
        if (folder / "backtest.json").is_file():
            return folder
    folder = report_folder(reports, run_id, name)
    if not (folder / "backtest.json").is_file():
        raise FinpodError(
            f"no saved backtest of {run_id}'s {name} agent in {folder}",
            f"run finpod backtest {run_id} --agent {name} first",
        )
    return folder


def _only_saved_agent(run: str | Path, reports: Path) -> str:
    """``selected`` without the run directory: the run's one saved backtest, if it has one."""
    for base in (Path(run), Path(reports) / Path(run).name):
        if not base.is_dir():
            continue
        saved = ["best"] if (base / "backtest.json").is_file() else []
        saved += sorted(p.parent.name for p in base.glob("*/backtest.json"))
        if len(saved) == 1:
            return saved[0]
        if saved:
            raise FinpodError(
                f"cannot tell which agent run {Path(run).name} selected (its run directory "
                f"is not here) and {base} holds backtests of {', '.join(saved)}",
                "pass --agent with one of them",
            )
    return "best"


def register(app: typer.Typer) -> None:
    """Add ``backtest`` and ``report`` to the finpod app."""
    app.command("backtest")(backtest)
    app.command("report")(report)
