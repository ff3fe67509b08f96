"""Tournament of agents on Ray (the ElegantRL-Podracer scheme).

Entry point: :func:`run_tournament` (``finpod train --pods …``). The parts, each usable
alone: :class:`Leaderboard` (top-K, atomic), :class:`Generator` (scratch or perturbed
child), :func:`fuse_state_dicts` (learner fusion), :class:`Pod`/:class:`PodWorker` (one
agent trained by W envs and L learners, scored on validation), :class:`Orchestrator`
(elastic pool of pod actors, asynchronous or generational), :class:`DataPlane` (the
train and validation splits in Ray's object store), :class:`FailurePolicy` (node losses,
quarantine, when a run stops).
"""

from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.tournament.dataplane import DataPlane
from finpod.tournament.failures import FailurePolicy
from finpod.tournament.fusion import fuse_state_dicts
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.launch import TournamentRun, run_tournament
from finpod.tournament.orchestrator import Orchestrator, Setup, Summary
from finpod.tournament.pod import Pod, PodResult, PodWorker
from finpod.tournament.search import SearchSpace, parse_search
from finpod.tournament.settings import Budget, TournamentConfig, parse_budget, parse_tournament

__all__ = [
    "Budget",
    "DataPlane",
    "Entry",
    "FailurePolicy",
    "Generator",
    "Leaderboard",
    "Orchestrator",
    "Pod",
    "PodResult",
    "PodSpec",
    "PodWorker",
    "SearchSpace",
    "Setup",
    "Summary",
    "TournamentConfig",
    "TournamentRun",
    "fuse_state_dicts",
    "parse_budget",
    "parse_search",
    "parse_tournament",
    "run_tournament",
]
