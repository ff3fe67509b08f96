"""What Ctrl-C says: the run directory the running command writes, noted by the verb that
starts it (:func:`note_run_dir`), and the line that names the ``--resume`` continuing it.

A module of its own so that the verbs (:mod:`finpod.cli.train_cmd`,
:mod:`finpod.cli.tournament_cmd`) note the run without importing :mod:`finpod.cli`,
which imports them.
"""

from __future__ import annotations

from finpod.runs import RunDir

#: The run directory the running command writes (named in the hint after Ctrl-C).
_state: dict[str, object] = {}


def note_run_dir(run_dir: object) -> None:
    """Remember the run directory a command is writing (for the hint after Ctrl-C)."""
    _state["run_dir"] = run_dir


def noted_run_dir() -> object:
    """The run directory last noted by :func:`note_run_dir` (None before any)."""
    return _state.get("run_dir")


def interrupted_line(run_dir: object) -> str:
    """What Ctrl-C during training says: the ``--resume`` that continues the run once
    it has a checkpoint to continue from, or that nothing can be resumed yet."""
    if not run_dir:
        return "[bold red]interrupted[/]"
    if RunDir(run_dir).checkpoint("last").is_file():
        return f"[bold red]interrupted[/]; continue with: finpod train --resume {run_dir}"
    return (
        f"[bold red]interrupted[/] before the first checkpoint of {run_dir}: nothing can be "
        "resumed yet (start the training again)"
    )
