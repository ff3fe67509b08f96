"""A run's agents as a backtest loads them: the agent selection (``best``, ``top-k``,
``ensemble-N``, ``selected``), the checkpoints, their mean-action policy and the env
settings each entry was trained and scored with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from finpod.agents import load_checkpoint, read_checkpoint
from finpod.agents.checkpoint import checkpoint_env
from finpod.env.config import EnvConfig
from finpod.errors import FinpodError
from finpod.runs import Entry, Leaderboard
from finpod.runs.agent_names import (  # noqa: F401 (re-exported: the backtest's agent names)
    AGENT_CHOICES,
    AGENT_HELP,
    DEFAULT_TOP_K,
    agent_description,
    canonical_agent,
    is_ensemble,
    is_pod_id,
    parse_agent,
)

Policy = Callable[[torch.Tensor], torch.Tensor]


# ---------------------------------------------------------------------- agent selection
def resolve_agent(run_dir: str | Path, agent: str) -> str:
    """The canonical name (:func:`canonical_agent`) of the agent ``agent`` asks for:
    ``"selected"`` → what the run selected on validation (``leaderboard.json``'s
    ``"selected"``: ``"ensemble-K"`` when the leaderboard ensemble won, else ``"best"``).
    An unknown name is a :class:`FinpodError` that lists every choice."""
    if agent.strip().lower() != "selected":
        return canonical_agent(agent)
    return canonical_agent(Leaderboard.load(Path(run_dir)).selected())


# ------------------------------------------------------------------------------- agents
def ensemble_policy(agents: Sequence[Any]) -> Policy:
    """Deterministic policy averaging the actions of ``agents`` (each (B, A) in [-1, 1])."""

    @torch.no_grad()
    def policy(obs: torch.Tensor) -> torch.Tensor:
        actions = [a.act(obs, deterministic=True) for a in agents]
        return torch.stack(actions).mean(0)

    return policy


def load_agents(run_dir: Path, entries: Sequence[Entry], device: torch.device) -> list:
    """The agents of leaderboard ``entries``, from their checkpoints, on ``device``."""
    agents = []
    for entry in entries:
        path = Path(run_dir) / entry.checkpoint
        if not path.is_file():
            raise FinpodError(f"checkpoint of {entry.pod_id} missing: {path}", "re-run train")
        agents.append(load_checkpoint(path, device))
    return agents


# ------------------------------------------------------------------------ run's settings
def recorded_env_config(
    run_dir: Path, run_meta: dict[str, Any], entry: Entry
) -> tuple[EnvConfig, str]:
    """The env settings the entry was trained and scored with, and where they came from.

    In order: the leaderboard entry's ``env`` (a tournament pod's searched execution
    controls, applied over the run's strategy ``env`` table), the checkpoint's ``env``
    metadata, the run's resolved strategy ``env`` table. Never the defaults of a newer
    finpod: a setting the run did not record is the default it ran with.
    """
    if entry.env:
        base = dict((run_meta.get("strategy") or {}).get("env") or {})
        return EnvConfig.from_dict({**base, **entry.env}), "leaderboard entry"
    path = Path(run_dir) / entry.checkpoint
    if path.is_file():
        meta, _ = read_checkpoint(path)
        config = checkpoint_env(meta, path)
        if config is not None:
            return config, "checkpoint"
    strategy = run_meta.get("strategy") or {}
    if "env" not in strategy:
        raise FinpodError(
            f"run {run_dir.name} recorded no env settings", "re-run finpod train to record them"
        )
    return EnvConfig.from_dict(dict(strategy.get("env") or {})), "run.json strategy"
