"""Tables on the console that either fit or switch to a long form.

A rich table squeezed into 80 columns (or into a file, which rich writes 80 columns wide)
wraps a metric's name over several lines and cuts column names to "equal_we…". Here a
table is printed only when it fits the console's width with nothing wrapped or cut;
otherwise its long form is printed: one value per line, each under its heading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table


def _is_number(text: str) -> bool:
    """Whether a cell reads as a number (``-1.25 %``, ``$1,000``, ``12.3``, ``–``)."""
    core = text.replace(",", "").replace("%", "").replace("$", "").replace("+", "").strip()
    if core in ("–", "—", "-", ""):
        return True
    try:
        float(core)
    except ValueError:
        return False
    return True


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` prints within ``console``'s width without wrapping a cell."""
    # Measured without the console's width, which would clamp the measurement to it.
    unbounded = console.options.update(max_width=1_000_000)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def print_table(
    console: Console,
    title: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    long_form: Callable[[], list[tuple[str, list[tuple[str, str]]]]],
    *,
    compact: bool = False,
) -> None:
    """Print ``rows`` under ``header`` as a table (numbers right-aligned, text left, no
    cell wrapped or cut) when it fits; else ``long_form()``: blocks of
    ``(heading, [(name, value), ...])``, one name and value per line, names aligned.
    ``title``, ``header`` and cells are plain text (not rich markup). ``compact``: no box,
    one space between columns (a summary that fits 80 columns)."""
    table = (
        Table(title=escape(title), box=None, padding=(0, 1), pad_edge=False)
        if compact
        else Table(title=escape(title), show_lines=False)
    )
    for i, name in enumerate(header):
        numbers = i > 0 and all(_is_number(str(row[i])) for row in rows)
        table.add_column(escape(name), justify="right" if numbers else "left", no_wrap=True)
    for row in rows:
        table.add_row(*[escape(str(cell)) for cell in row])
    if fits(console, table):
        console.print(table)
        return
    console.print(f"[bold]{escape(title)}[/]", highlight=False, soft_wrap=True)
    blocks = long_form()
    width = max((len(name) for _, lines in blocks for name, _ in lines), default=0)
    values = max((len(value) for _, lines in blocks for _, value in lines), default=0)
    for heading, lines in blocks:
        console.print(f"[bold]{escape(heading)}[/]", highlight=False, soft_wrap=True)
        for name, value in lines:
            text = f"  {name.ljust(width)}  {value.rjust(values)}"
            console.print(escape(text), highlight=False, soft_wrap=True)


def print_metrics(
    console: Console,
    title: str,
    metrics: pd.DataFrame,
    label: Callable[[str], str],
    fmt: Callable[[str, float], str],
) -> None:
    """A metrics × strategies frame as a table, or in long form one block per strategy
    with one metric per line (:func:`print_table`)."""
    frame = metrics.rename(index=str, columns=str)
    rows = [[label(n), *[fmt(n, v) for v in row]] for n, row in frame.iterrows()]

    def long_form() -> list[tuple[str, list[tuple[str, str]]]]:
        return [(col, [(label(n), fmt(n, v)) for n, v in frame[col].items()]) for col in frame]

    print_table(console, title, ["metric", *frame.columns], rows, long_form)


#: The summary table's columns: (metric, short heading); ``finpod backtest --details``
#: prints every metric.
SUMMARY_METRICS = (
    ("annual_return", "return/yr"),
    ("sharpe", "Sharpe"),
    ("max_drawdown", "max DD"),
    ("active_return", "active/yr"),
    ("information_ratio", "IR"),
    ("annual_turnover_ex_initial", "turnover"),
)


def print_summary(
    console: Console,
    title: str,
    metrics: pd.DataFrame,
    fmt: Callable[[str, float], str],
) -> None:
    """One compact table of a metrics × strategies frame: a row per strategy (the agent
    first, then the reference and the benchmarks), a column per :data:`SUMMARY_METRICS`
    the frame has; in long form when it does not fit (:func:`print_table`)."""
    frame = metrics.rename(index=str, columns=str)
    shown = [(name, head) for name, head in SUMMARY_METRICS if name in frame.index]
    header = ["strategy", *[head for _, head in shown]]
    rows = [[col, *[fmt(name, frame.at[name, col]) for name, _ in shown]] for col in frame]

    def long_form() -> list[tuple[str, list[tuple[str, str]]]]:
        return [(row[0], list(zip(header[1:], row[1:], strict=True))) for row in rows]

    print_table(console, title, header, rows, long_form, compact=True)
