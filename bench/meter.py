"""Timing shared by the benchmarks: wall and CPU seconds, and how busy the rest of the
machine was meanwhile (a benchmark on a shared machine reports its noise)."""

from __future__ import annotations

import os
import time


class Meter:
    """Wall time, this process's CPU time and other processes' share of the machine."""

    def __enter__(self) -> Meter:
        self._busy0 = _machine_busy_s()
        self._cpu0 = time.process_time()
        self._wall0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = time.process_time() - self._cpu0
        foreign = max(0.0, _machine_busy_s() - self._busy0 - self.cpu)
        self.foreign_frac = foreign / max(1e-9, self.wall * (os.cpu_count() or 1))


def _machine_busy_s() -> float:
    try:
        with open("/proc/stat") as fh:
            parts = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / os.sysconf("SC_CLK_TCK")
