"""Stop signals as exceptions: SIGTERM and SIGHUP raise :class:`Stopped`, a
:class:`KeyboardInterrupt`, so that every long command (``train``, ``run``,
``walkforward``, ``download``, ``paper``) stops on them exactly as on Ctrl-C: it unwinds
(a download removes its temporary folder) and says in one line how to continue.

Ray replaces a driver's SIGTERM handler when it starts (a Python handler that exits, and
a C handler that prints its native stack): :func:`reclaim_stop_signals`, called from the
commands' progress hooks once Ray runs, puts finpod's handler back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: The signals that stop a command as Ctrl-C does.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP) raised as an exception, so that the command unwinds
    as it does on Ctrl-C (the default action of these signals ends the process on the spot
    and leaves temporary folders behind)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


#: Whether :func:`install_stop_signals` ran, and the last stop signal received.
_installed: dict[str, object] = {"on": False, "last": None}


def _raise_stopped(signum: int, frame: object) -> None:
    _installed["last"] = signum
    raise Stopped(signum)


def received_stop_signal() -> str | None:
    """The name of the stop signal that ended the command (``SIGTERM``), if one did: a
    library may catch :class:`Stopped` and raise a plain ``KeyboardInterrupt`` instead."""
    last = _installed["last"]
    return None if last is None else signal.Signals(int(last)).name  # type: ignore[arg-type]


def install_stop_signals() -> None:
    """From now on SIGTERM and SIGHUP raise :class:`Stopped` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in STOP_SIGNALS:
        signal.signal(s, _raise_stopped)
    _installed.update(on=True, last=None)


def reclaim_stop_signals() -> None:
    """Put finpod's stop handlers back after a library (Ray) replaced them; a no-op unless
    :func:`install_stop_signals` ran, or off the main thread."""
    if _installed["on"] and threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, _raise_stopped)


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Stopped` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise_stopped) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextmanager
def stop_signals_call(stop: Callable[[], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP call ``stop()`` instead of raising (main
    thread only): for a loop that stops at its next safe point, as it does on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        stop()

    before = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, previous in before.items():
            signal.signal(s, previous)
