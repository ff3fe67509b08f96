"""``mode = "async"``: every free slot gets the generator's next pod (or population) at
once, drawn against the leaderboard as it is now (Podracer's asynchronous training pool).
"""

from __future__ import annotations

from finpod.tournament.generator import PodSpec
from finpod.tournament.schedulers.base import Scheduler


class AsyncScheduler(Scheduler):
    """The generator's next pod, or population, drawn against the board as it is now."""

    name = "async"

    def choose(self, size: int, busy: bool) -> list[PodSpec]:
        if self.config.population == 1:
            return [self.generator.next(self.board, self.take_ids(1))]
        index = self.board.progress.next_pod
        specs = self.generator.next_group(self.board, index, size)
        self.take_ids(len(specs))
        return specs
