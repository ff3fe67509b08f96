"""The one vocabulary of finpod's options, shared by every command.

- ``--data``/``-d``: a dataset directory (``finpod download`` writes one);
- ``--strategy``/``-s``: a strategy TOML file;
- ``--runs``: the folder of run directories; ``--reports``: the folder of reports;
- ``--out``/``-o``: only where a command makes exactly one thing (``download``: the
  dataset; ``walkforward``: the walk-forward directory);
- ``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:K``.

Old spellings (``train --out``, ``backtest --out``, ``report --out``, ``download -s``)
still work for one release, hidden from ``--help``, with one deprecation line
(:func:`renamed`).
"""

from __future__ import annotations

from typing import TypeVar

from rich.console import Console

T = TypeVar("T")

DATA_HELP = "Dataset directory (finpod download writes one)."
STRATEGY_HELP = "Strategy TOML file (see strategies/)."
RUNS_HELP = "Folder of run directories."
REPORTS_HELP = "Folder of reports (tearsheets)."
DEVICE_HELP = "auto, cpu, cuda or cuda:K."
#: ``--help``'s default of a ``--device`` the strategy sets.
DEVICE_DEFAULT = "the strategy's [train] device"
#: Hidden old spellings: shown nowhere, said once when used.
OLD = "Deprecated spelling."

_err = Console(stderr=True)


def renamed(new_flag: str, new_value: T, old_flag: str, old_value: T | None) -> T:
    """The option's value, given by its new name or by its old one (the old one, when
    given, wins, with one yellow line saying that spelling goes away)."""
    if old_value is None:
        return new_value
    _err.print(
        f"[yellow]warning:[/] {old_flag} is deprecated here and will be removed in the next "
        f"release; use {new_flag}",
        highlight=False,
        soft_wrap=True,
    )
    return old_value
