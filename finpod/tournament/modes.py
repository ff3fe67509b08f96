"""The registry of scheduler modes: ``tournament.mode`` → the class that schedules it.

A mode is one class in one module (:mod:`finpod.tournament.schedulers`). Its name is known
here, at the bottom of the tournament package, so that a strategy file's ``mode`` is checked
when the file is read; the class is registered by :mod:`finpod.tournament.schedulers` when
the scheduler modules load. A new mode is one module plus one :func:`register` line there,
or a :func:`register` call anywhere before the run starts (a notebook, a test)::

    register("random", RandomSearchScheduler)
"""

from __future__ import annotations

from typing import Any

#: Mode name → its scheduler class (``None`` until :mod:`finpod.tournament.schedulers`
#: registers the built-in ones).
MODES: dict[str, Any] = {"async": None, "generational": None, "asha": None}


def register(name: str, scheduler: Any) -> None:
    """Make ``tournament.mode = name`` train with ``scheduler`` (a
    :class:`~finpod.tournament.schedulers.base.Scheduler` subclass)."""
    MODES[str(name)] = scheduler
