"""A wall-clock deadline that ``learn`` keeps between its own steps.

A tournament pod must end on time whatever its algorithm and the machine's load, so a
time-capped pod sets a deadline (:func:`set_deadline`, done by
:class:`~finpod.agents.callbacks.TimeBudget`) and the learners check it where they can stop
without leaving a half-done update: PPO and A2C before each rollout and between
minibatches, the off-policy learners before each vector step. A ``learn`` cut short
returns its statistics so far; the caller then scores the agent on validation as after
any segment, so a pod stopped by the cap is still scored.

The deadline is per process (a pod actor trains one job at a time; the learner threads of
a fused pod share it) and is cleared when the job ends.
"""

from __future__ import annotations

import time

_deadline: float | None = None


def set_deadline(at: float | None) -> None:
    """Stop learning at ``time.perf_counter()`` ``at`` (``None``: no deadline)."""
    global _deadline
    _deadline = at


def passed() -> bool:
    """Whether the deadline (if any) has passed."""
    return _deadline is not None and time.perf_counter() >= _deadline


def remaining() -> float | None:
    """Seconds to the deadline (``None``: no deadline)."""
    return None if _deadline is None else _deadline - time.perf_counter()
