"""Training progress counted in env steps as they are taken, and its console bar.

An agent's own counter (``agent.env_steps``) moves when a rollout ends (PPO and A2C add a
whole ``horizon × num_envs`` at once), so a display that reads it sits still for a whole
rollout. :class:`StepCountingEnv` wraps a VecEnv, passes every call through unchanged and
counts the transitions of each ``step``: what has been trained so far, readable at any
time (also from another thread: a pod actor answers ``progress()`` while it trains).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: Seconds between two redraws of the bar from inside a rollout.
REDRAW_S = 0.25


class StepCountingEnv:
    """``env`` unchanged, plus ``steps``: env transitions taken through this wrapper
    (``num_envs`` per ``step`` call). ``on_step(steps)``, when given, is called after each
    ``step`` with the new total (keep it cheap: it runs inside the rollout loop)."""

    def __init__(self, env: Any, on_step: Callable[[int], None] | None = None) -> None:
        self.env = env
        self.steps = 0
        self.on_step = on_step

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.steps += self.env.num_envs
        if self.on_step is not None:
            self.on_step(self.steps)
        return out

    def __getattr__(self, name: str) -> Any:
        # Everything but ``step`` is the wrapped env's (reset, num_envs, obs_dim, config...).
        if name == "env":  # not set yet: no recursion through a half-built wrapper
            raise AttributeError(name)
        return getattr(self.env, name)


class TrainingBar:
    """Rich progress bar over env steps (with the time left), or nothing when disabled.

    :meth:`on_step` (a :class:`StepCountingEnv`'s hook) moves it as env steps are taken,
    redrawn at most every :data:`REDRAW_S`; :meth:`update` sets the agent's own counter
    and best score after each segment.
    """

    def __init__(self, enabled: bool, total: int, done: int) -> None:
        self.enabled = enabled
        self.total = total
        #: The agent's env steps when the bar started (a resumed run starts past 0).
        self.start = done
        self._drawn = -math.inf
        if enabled:
            self.progress = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[best]}"),
            )
            self.task = self.progress.add_task("train", total=total, completed=done, best="")

    def __enter__(self) -> TrainingBar:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def on_step(self, steps: int) -> None:
        """``steps`` env steps taken since the bar started."""
        now = time.monotonic()
        if self.enabled and now - self._drawn >= REDRAW_S:
            self._drawn = now
            self.progress.update(self.task, completed=min(self.start + steps, self.total))

    def update(self, steps: int, best: float) -> None:
        """The agent's env-step counter and best validation score after a segment."""
        if self.enabled:
            text = f"best {best:.3f}" if math.isfinite(best) else ""
            self.progress.update(self.task, completed=min(steps, self.total), best=text)
