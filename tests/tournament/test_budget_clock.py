"""When a run with a wall-time cap gives up the pods still running."""

from __future__ import annotations

import pytest

from finpod.runs.leaderboard import Leaderboard
from finpod.tournament.budget import BudgetClock
from finpod.tournament.settings import parse_budget


def _clock(tmp_path, budget: str, cap: float | None, before_s: float) -> BudgetClock:
    board = Leaderboard(tmp_path, 4, "sharpe")
    board.progress.wall_s = before_s  # wall time of the run's earlier sessions
    return BudgetClock(parse_budget(budget), board, time_cap=cap)


@pytest.mark.parametrize(
    ("budget", "cap", "before_s", "overdue"),
    [
        ("3.2M steps", 300.0, 300.0, False),  # at the cap: pods are stopping at their deadline
        ("3.2M steps", 300.0, 323.0, False),  # 7.7 % past it: still waiting for their scores
        ("3.2M steps", 300.0, 325.0, True),  # 8.3 % past it: given up
        ("3.2M steps", 30.0, 34.0, False),  # short caps wait at least 5 s ...
        ("3.2M steps", 30.0, 35.5, True),  # ... and no more
        ("300s", None, 325.0, True),  # a time budget is a cap too
        ("3.2M steps", None, 1e6, False),  # no cap: never overdue
    ],
)
def test_a_run_is_overdue_only_past_its_cap_by_8_percent_or_5_seconds(
    tmp_path, budget, cap, before_s, overdue
):
    assert _clock(tmp_path, budget, cap, before_s).overdue() is overdue
