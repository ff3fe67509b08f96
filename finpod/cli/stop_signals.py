"""Stop signals as exceptions: within :func:`stop_signals_raise`, SIGTERM and SIGHUP raise
:class:`Stopped`, so that ``finpod download`` unwinds and removes its temporary folder as it
does on Ctrl-C."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP) raised as an exception, so that the build unwinds
    and removes its temporary folder as it does on Ctrl-C (the default action of these
    signals ends the process on the spot and leaves ``.<out>.<…>`` behind)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Stopped` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    wanted = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    before = {s: signal.signal(s, stop) for s in wanted}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
