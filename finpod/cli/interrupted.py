"""What a stop (Ctrl-C, SIGTERM) says: the run directory the running command writes,
noted by the verb that starts it (:func:`note_run_dir`), or the command that continues
the work (:func:`note_resume`), and the one line that names it.

A module of its own so that the verbs (:mod:`finpod.cli.train_cmd`,
:mod:`finpod.cli.tournament_cmd`) note the run without importing :mod:`finpod.cli`,
which imports them.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from finpod.errors import FinpodError
from finpod.runs import Leaderboard, RunDir

#: What the running command writes and how to continue it (named in the stop line).
_state: dict[str, object] = {}


def note_run_dir(run_dir: object) -> None:
    """Remember the run directory a command is writing (for the line after a stop)."""
    _state["run_dir"] = run_dir


def noted_run_dir() -> object:
    """The run directory last noted by :func:`note_run_dir` (None before any)."""
    return _state.get("run_dir")


def note_resume(command: str | None) -> None:
    """Remember the command that continues the running one (said after a stop when no
    run directory is noted), e.g. the same ``finpod walkforward …`` again."""
    _state["resume"] = command


def note_command(argv: list[str]) -> None:
    """Remember the arguments of the command being run (for :func:`same_command`)."""
    _state["argv"] = list(argv)


def same_command() -> str:
    """The command being run, as the shell line that runs it again (``finpod …``)."""
    argv = _state.get("argv")
    return shlex.join(["finpod", *(argv if isinstance(argv, list) else [])])


def noted_resume() -> str | None:
    """The command last noted by :func:`note_resume` (None before any)."""
    value = _state.get("resume")
    return None if value is None else str(value)


def _resumable(run_dir: Path) -> bool:
    """Has the run something to continue from: one agent's last checkpoint, or a
    tournament's leaderboard with an entry?"""
    if RunDir(run_dir).checkpoint("last").is_file():
        return True
    try:
        return len(Leaderboard.load(run_dir)) > 0
    except FinpodError:  # no board, or none readable yet: nothing to resume
        return False


def interrupted_line(run_dir: object, resume: str | None = None, signal: str | None = None) -> str:
    """What a stop says, in one line: the ``--resume`` that continues the run once it has
    a checkpoint to continue from (or that nothing can be resumed yet), else ``resume``,
    the command that continues the work. ``signal`` names a stop signal (``SIGTERM``)."""
    head = f"[bold red]stopped by {signal}[/]" if signal else "[bold red]interrupted[/]"
    if run_dir:
        if _resumable(Path(str(run_dir))):
            return f"{head}; continue with: finpod train --resume {run_dir}"
        return (
            f"{head} before the first checkpoint of {run_dir}: nothing can be resumed yet "
            "(start the training again)"
        )
    if resume:
        return f"{head}; continue with: {resume}"
    return head
