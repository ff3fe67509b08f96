"""The registry of scheduler modes: ``tournament.mode`` → the class that schedules it.

A mode is one class in one module (:mod:`finpod.tournament.schedulers`); this registry
names where it lives, so that a strategy file's ``mode`` is checked when the file is read,
before anything heavy is imported. A new mode is a new module plus one line here, or a
:func:`register` call (a class defined anywhere, e.g. in a notebook or a test)::

    register("random", RandomSearchScheduler)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: Mode name → ``"module:Class"`` of its scheduler (or the class itself, once registered).
MODES: dict[str, Any] = {
    "async": "finpod.tournament.schedulers.asynchronous:AsyncScheduler",
    "generational": "finpod.tournament.schedulers.generational:GenerationalScheduler",
    "asha": "finpod.tournament.schedulers.asha:HalvingScheduler",
}


def register(name: str, scheduler: Any) -> None:
    """Make ``tournament.mode = name`` train with ``scheduler`` (a
    :class:`~finpod.tournament.schedulers.base.Scheduler` subclass, or its
    ``"module:Class"`` path)."""
    MODES[str(name)] = scheduler


def scheduler_class(name: str) -> Any:
    """The scheduler class of mode ``name`` (KeyError for an unknown mode: the strategy's
    settings refuse it before a run starts)."""
    target = MODES[name]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        return getattr(import_module(module), attr)
    return target
