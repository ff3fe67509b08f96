"""Schedulers: which pods the pool trains next. One class per mode, one module each:

- :mod:`.asynchronous` (``mode = "async"``): every free slot gets the generator's next pod;
- :mod:`.generational` (``mode = "generational"``): synchronous generations;
- :mod:`.asha` (``mode = "asha"``): asynchronous successive halving with continuation.

Every mode answers the questions of :class:`.base.Scheduler`, keeps the champion line
(``base_pod = true``) and saves its own state. :func:`make_scheduler` builds the one that
``tournament.mode`` names in the registry (:mod:`finpod.tournament.modes`); the
orchestrator never asks which it is.
"""

from __future__ import annotations

from finpod.errors import FinpodError
from finpod.tournament.modes import MODES, scheduler_class
from finpod.tournament.schedulers.base import SCHEDULER_FILE, Context, Scheduler, group_key


def make_scheduler(context: Context) -> Scheduler:
    """The scheduler of ``context.config.mode``."""
    mode = context.config.mode
    if mode not in MODES:
        raise FinpodError(
            f"tournament.mode {mode!r} is not known", f"use one of {', '.join(MODES)}"
        )
    return scheduler_class(mode)(context)


__all__ = ["SCHEDULER_FILE", "Context", "Scheduler", "group_key", "make_scheduler"]
