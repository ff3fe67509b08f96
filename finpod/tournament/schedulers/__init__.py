"""Schedulers: which pods the pool trains next. One class per mode, one module each:

- :mod:`.asynchronous` (``mode = "async"``): every free slot gets the generator's next pod;
- :mod:`.generational` (``mode = "generational"``): synchronous generations;
- :mod:`.asha` (``mode = "asha"``): asynchronous successive halving with continuation.

Every mode answers the questions of :class:`.base.Scheduler`, keeps the champion line
(``base_pod = true``) and saves its own state. The lines below register them
(:mod:`finpod.tournament.modes`); :func:`make_scheduler` builds the one that
``tournament.mode`` names, and the orchestrator never asks which it is.
"""

from __future__ import annotations

from finpod.errors import FinpodError
from finpod.tournament.modes import MODES, register
from finpod.tournament.schedulers.asha import HalvingScheduler
from finpod.tournament.schedulers.asynchronous import AsyncScheduler
from finpod.tournament.schedulers.base import SCHEDULER_FILE, Context, Scheduler, group_key
from finpod.tournament.schedulers.generational import GenerationalScheduler

register("async", AsyncScheduler)
register("generational", GenerationalScheduler)
register("asha", HalvingScheduler)


def make_scheduler(context: Context) -> Scheduler:
    """The scheduler of ``context.config.mode``."""
    mode = context.config.mode
    if MODES.get(mode) is None:
        raise FinpodError(
            f"tournament.mode {mode!r} is not known", f"use one of {', '.join(MODES)}"
        )
    return MODES[mode](context)


__all__ = ["SCHEDULER_FILE", "Context", "Scheduler", "group_key", "make_scheduler"]
