"""The names of a run's agents, one vocabulary for ``finpod backtest``, ``finpod report``,
the leaderboard's ``"selected"`` and the reports: ``selected``, ``best``, ``top-k`` /
``top-N`` (mean action of the top entries) and ``ensemble`` / ``ensemble-N`` (mean target
weights of the top entries). Text only, so the CLI's ``--help`` imports no torch.
"""

from __future__ import annotations

import re

from finpod.errors import FinpodError

#: Entries averaged by ``agent="top-k"`` or ``"ensemble"`` when no number is given.
DEFAULT_TOP_K = 3

#: The agents ``finpod backtest``, ``finpod report`` and :func:`run_backtest` accept, in
#: the words every help text and error uses (one vocabulary).
AGENT_CHOICES = "selected, best, top-k, top-N, ensemble, ensemble-N, or a pod id (p00012)"

#: A pod id: one leaderboard entry by name (what a tournament's selection hands over).
POD_ID = re.compile(r"p\d{5,}")

#: What each agent name means, for ``--help``.
AGENT_HELP = (
    "selected (what the run selected on validation: best, or ensemble-K when the ensemble "
    f"won), best (the top leaderboard entry), top-k / top-N (mean action of the top "
    f"{DEFAULT_TOP_K} / N entries), ensemble / ensemble-N (mean target weights of the top "
    f"{DEFAULT_TOP_K} / N entries, each with its own settings), or a pod id such as p00012 "
    "(that leaderboard entry)."
)


def is_pod_id(agent: str) -> bool:
    """Whether ``agent`` names one leaderboard entry by its pod id (``"p00012"``)."""
    return POD_ID.fullmatch(agent.strip().lower()) is not None


def _unknown_agent(agent: str) -> FinpodError:
    return FinpodError(f"unknown agent {agent!r}", f"use one of: {AGENT_CHOICES}")


def parse_agent(agent: str) -> int:
    """Number of leaderboard entries to average: ``best`` → 1, ``top-k`` → 3, ``top-5`` → 5;
    ``ensemble`` → 3, ``ensemble-5`` → 5 (see :func:`is_ensemble`). ``selected`` is not a
    count: resolve it first (:func:`resolve_agent`)."""
    agent = agent.strip().lower()
    if agent == "best" or is_pod_id(agent):
        return 1
    if agent in ("top-k", "ensemble"):
        return DEFAULT_TOP_K
    match = re.fullmatch(r"(?:top|ensemble)-?(\d+)", agent)
    if match and int(match.group(1)) >= 1:
        return int(match.group(1))
    raise _unknown_agent(agent)


def canonical_agent(agent: str) -> str:
    """The one name of an agent (``best``, ``top-N`` or ``ensemble-N``): ``top-k`` →
    ``top-3``, ``ensemble`` → ``ensemble-3``, ``Top5`` → ``top-5``. It names the report
    folder and the report's agent label, so ``--agent ensemble`` and ``--agent
    ensemble-3`` are one backtest. ``selected`` is returned as is."""
    name = agent.strip().lower()
    if name == "selected" or is_pod_id(name):
        return name
    k = parse_agent(name)
    if name == "best":
        return "best"
    return f"{'ensemble' if is_ensemble(name) else 'top'}-{k}"


def agent_description(agent: str, members: int | None = None) -> str:
    """What ``agent`` trades, in the words of :data:`AGENT_HELP`: ``"best (the top
    leaderboard entry)"``, ``"top-3 (mean action of the top 3 entries)"``, ``"ensemble-3
    (mean target weights of the top 3 entries)"``. ``members``: entries actually averaged
    (a leaderboard shorter than asked)."""
    name = canonical_agent(agent)
    if is_pod_id(name):
        return f"{name} (one leaderboard entry)"
    if name == "best":
        return "best (the top leaderboard entry)"
    k = members if members is not None else parse_agent(name)
    if is_ensemble(name):
        return f"ensemble-{k} (mean target weights of the top {k} entries)"
    return f"top-{k} (mean action of the top {k} entries)"


def is_ensemble(agent: str) -> bool:
    """Whether ``agent`` asks for the leaderboard ensemble (mean of the members' target
    weights, :mod:`finpod.env.ensemble`) rather than the mean action (``top-k``)."""
    return agent.strip().lower().startswith("ensemble")
