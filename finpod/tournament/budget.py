"""The run's budget as a clock: what is left, and fitting a pod into it."""

from __future__ import annotations

import time
from collections.abc import Callable

from finpod.grammar import Budget
from finpod.runs.leaderboard import Leaderboard
from finpod.tournament.generator import PodSpec

#: Seconds a time budget keeps for a pod's first epoch and evaluation.
TIME_SLIVER_S = 0.5
#: A run past its wall-time cap by this share of it (at least OVERDUE_MIN_S seconds) gives
#: up the pods still running, recorded as not scored (see :meth:`BudgetClock.overdue`).
OVERDUE_SHARE, OVERDUE_MIN_S = 0.08, 5.0


class BudgetClock:
    """Wall time, env steps or pods trained, counted over the whole run (earlier sessions
    of a resumed run included), minus what is already planned.

    The budget arrives parsed (:class:`finpod.grammar.Budget`: exact seconds or a whole
    count); the clock counts in floats."""

    def __init__(
        self,
        budget: Budget,
        board: Leaderboard,
        stop: Callable[[], bool] | None = None,
        time_cap: float | None = None,
    ) -> None:
        self.budget = budget
        #: Wall seconds of the whole run beside a step or pod budget (None: no cap).
        self.time_cap = time_cap
        self.board = board
        self.stop = stop
        self.wall_before = board.progress.wall_s
        self._t0 = time.monotonic()

    def __str__(self) -> str:
        cap = "" if self.time_cap is None else f" capped at {self.time_cap:g}s of wall time"
        return f"budget {self.budget}{cap}"

    def start(self) -> None:
        """Start counting this session's wall time."""
        self._t0 = time.monotonic()

    def session_s(self) -> float:
        """Wall seconds of this session."""
        return time.monotonic() - self._t0

    def run_time_at(self, monotonic: float) -> float:
        """Seconds into the run (earlier sessions included) of a ``time.monotonic()``."""
        return self.wall_before + (monotonic - self._t0)

    def elapsed(self) -> float:
        """Wall seconds of the whole run, earlier sessions included."""
        return self.wall_before + self.session_s()

    def left(self, planned_steps: int, planned_pods: int) -> float:
        """Budget left after what runs or waits to run: seconds, env steps or pods."""
        if self.budget.kind == "time":
            return self.budget.amount - self.elapsed()
        if self.budget.kind == "steps":
            return self.budget.amount - self.counted_steps() - planned_steps
        return self.budget.amount - self.board.candidates_evaluated - planned_pods

    def counted_steps(self) -> int:
        """Env steps the step budget counts: every evaluated pod's, less those trained
        beyond it while the champion finished its share (``tournament.fill``)."""
        progress = self.board.progress
        return progress.env_steps - progress.fill_steps

    def stopped(self) -> bool:
        """Was a stop asked for?"""
        return self.stop is not None and bool(self.stop())

    def capped(self) -> bool:
        """Has the run's wall-time cap (beside a step or pod budget) run out?"""
        return self.time_cap is not None and self.time_cap - self.elapsed() <= TIME_SLIVER_S

    def overdue(self) -> bool:
        """Has the wall-time cap (or a time budget) passed by more than
        :data:`OVERDUE_SHARE` of itself (at least :data:`OVERDUE_MIN_S`)? Pods still running
        then are given up: they stop learning at their deadline, so only a pod stuck in
        something else (a validation rollout slowed down many times) gets here."""
        caps = [c for c in (self.time_cap,) if c is not None]
        if self.budget.kind == "time":
            caps.append(self.budget.amount)
        if not caps:
            return False
        cap = min(caps)
        return self.elapsed() > cap + max(OVERDUE_MIN_S, OVERDUE_SHARE * cap)

    def allows_more(self, left: float) -> bool:
        """Is there budget for one more pod (and no stop asked for)?"""
        if self.stopped() or self.capped():
            return False
        return left > (TIME_SLIVER_S if self.budget.kind == "time" else 0)

    def allows_retry(self, left: float) -> bool:
        """May requeued pods still start? (Not once a stop was asked for or time is up;
        their share of a step or pod budget was already counted.)"""
        if self.stopped() or self.capped():
            return False
        return self.budget.kind != "time" or left > TIME_SLIVER_S

    def cap(self, spec: PodSpec, seconds: float | None = None) -> PodSpec:
        """Stop ``spec`` by the run's wall-time cap and, given, within ``seconds``."""
        caps = [] if seconds is None else [seconds]
        if self.time_cap is not None:
            caps.append(max(TIME_SLIVER_S, self.time_cap - self.elapsed()))
        if spec.max_seconds is not None:
            caps.append(spec.max_seconds)
        spec.max_seconds = min(caps, default=None)
        return spec

    def fit(self, spec: PodSpec, left: float, share: int = 1) -> PodSpec:
        """Shrink ``spec`` so it ends with the budget (steps or seconds left); ``share``:
        pods dispatched together that split the steps left."""
        self.cap(spec)
        if self.budget.kind == "steps":
            spec.steps = int(max(1, min(spec.steps, left // share)))
        elif self.budget.kind == "time":
            cap = max(TIME_SLIVER_S, left)
            spec.max_seconds = cap if spec.max_seconds is None else min(spec.max_seconds, cap)
        return spec

    def used(self) -> float:
        """What the budget counts so far: seconds, env steps or pods."""
        return {
            "time": self.elapsed(),
            "steps": float(self.counted_steps()),
            "pods": float(self.board.candidates_evaluated),
        }[self.budget.kind]


def running_steps(running: list[dict]) -> float:
    """Env steps the running pods have trained so far: each row's live ``done`` count
    (:mod:`finpod.tournament.progress`), else its finished epochs' share of ``steps``."""
    return sum(
        r["done"]
        if "done" in r
        else r.get("epoch", 0) / max(1, r.get("epochs") or 1) * (r.get("steps") or 0)
        for r in running
    )


def eta_seconds(
    budget: Budget,
    used: float,
    running: list[dict],
    elapsed: float,
    time_cap: float | None = None,
) -> float | None:
    """Seconds left in the run, estimated from the work done so far (None before any).

    A step budget counts the finished pods' env steps plus the running pods' steps so far
    (:func:`running_steps`). The steps left go at the running pods' current pace (each
    row's ``done / elapsed_s`` since its dispatch, summed) once they have trained some, else
    at the run's average pace; past the budget's end, the running pods' own steps left
    (None once they trained what they were asked: rounding up to whole rollouts has no
    estimate). A time budget is its own answer; a wall-time cap bounds the
    estimate.
    """
    if budget.kind == "time":
        left: float | None = max(0.0, budget.amount - elapsed)
    elif budget.kind == "steps":
        live = used + running_steps(running)
        pace = sum(
            r["done"] / r["elapsed_s"] for r in running if r.get("done") and r.get("elapsed_s")
        )
        if pace <= 0 and live > 0 and elapsed > 0:
            pace = live / elapsed
        # Running pods finish what they were asked even past the budget's end.
        steps_left = max(
            budget.amount - live,
            sum(max(0.0, (r.get("steps") or 0) - r.get("done", 0)) for r in running),
        )
        left = steps_left / pace if pace > 0 and (steps_left > 0 or not running) else None
    else:
        left = None
    if time_cap is not None:
        cap_left = max(0.0, time_cap - elapsed)
        left = cap_left if left is None else min(left, cap_left)
    return left
