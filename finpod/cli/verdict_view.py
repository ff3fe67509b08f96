"""The verdict of a backtest as the console's last lines (``finpod backtest``, ``finpod
run``, ``finpod info RUN``): the headline word in its colour, then one line per answer."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

#: Console style of each verdict tone (:data:`finpod.backtest.verdict.HEADLINES`).
TONE_STYLES = {
    "edge": "bold green",
    "none": "bold yellow",
    "loss": "bold red",
    "null": "bold blue",
    "in_sample": "bold magenta",
}


def print_verdict(console: Console, verdict: Any) -> None:
    """Print ``verdict`` (a :class:`finpod.backtest.verdict.Verdict`): headline, lines."""
    console.print(f"[{TONE_STYLES[verdict.tone]}]verdict: {verdict.word}[/]", highlight=False)
    for line in verdict.lines:
        console.print(f"  {escape(line)}", highlight=False)
