"""Learners and scorers of the train-and-score loop (:mod:`finpod.agents.loop`): a single
agent and a population as learners, a single agent's ``eval_fn`` as a scorer."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from finpod.agents.loop import Validation
from finpod.agents.validation import evaluate

__all__ = [
    "AgentLearner",
    "EvalScorer",
    "PopulationLearner",
    "host_state",
    "population_learning_rates",
    "weight_failure",
]


def population_learning_rates(population: Any) -> dict[str, np.ndarray]:
    """Step size of each of a population's optimizers by its hyperparameter name
    (``learning_rate`` for PPO and A2C; ``actor_lr``, ``critic_lr``, ``alpha_lr``), one
    per member ``(K,) float64``."""
    out = {}
    for hp_name in population.lr_fields.values():
        if hp_name in population.hp:
            out[hp_name] = population.hp[hp_name].detach().to("cpu", torch.float64).numpy()
        else:
            out[hp_name] = np.array([float(getattr(h, hp_name)) for h in population.hparams])
    return out


def host_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict copied to the host."""
    return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


def weight_failure(agent: Any) -> str:
    """``""`` when every network weight of ``agent`` is finite, else ``"weights <name>"``."""
    for key, value in agent.weights().items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return f"weights {key}"
    return ""


class AgentLearner:
    """A single agent as a learner of one member, learning on ``env``. Each segment
    starts from an env reset seeded by the agent's own generator, so a restored agent
    continues exactly as the uninterrupted one would have."""

    members = 1

    def __init__(self, agent: Any, env: Any) -> None:
        self.agent, self.env = agent, env

    def learn(self, steps: int) -> dict[str, np.ndarray]:
        self.agent.reset_rollout()
        stats = self.agent.learn(self.env, steps)
        return {key: np.array([float(value)]) for key, value in stats.items()}

    def env_steps(self) -> np.ndarray:
        return np.array([self.agent.env_steps], np.int64)

    def updates(self) -> np.ndarray:
        return np.array([self.agent.updates], np.int64)

    def weight_failures(self) -> list[str]:
        return [weight_failure(self.agent)]

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return host_state(self.agent.state_dict())

    def step_sizes(self) -> dict[str, np.ndarray]:
        population = getattr(self.agent, "population", None)
        if population is None:
            return {}
        return {k: v[:1] for k, v in population_learning_rates(population).items()}


class PopulationLearner:
    """A population of K members (:func:`finpod.agents.registry.make_population`)
    learning on one env of K × W envs (each member steps its own W)."""

    def __init__(self, population: Any, env: Any) -> None:
        self.population, self.env = population, env
        self.members = int(population.env_steps().numel())

    def learn(self, steps: int) -> dict[str, np.ndarray]:
        stats = self.population.learn(self.env, steps)
        return {
            key: value.detach().to("cpu", torch.float64).numpy() for key, value in stats.items()
        }

    def env_steps(self) -> np.ndarray:
        return self.population.env_steps().cpu().numpy().astype(np.int64)

    def updates(self) -> np.ndarray:
        return self.population.updates().cpu().numpy()

    def weight_failures(self) -> list[str]:
        if hasattr(self.population, "finite_members"):
            finite = self.population.finite_members().cpu().tolist()
            return ["" if ok else "weights" for ok in finite]
        return [
            "weights" if weight_failure(self.population.export_member(k)) else ""
            for k in range(self.members)
        ]

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return host_state(self.population.member_state_dict(k))

    def step_sizes(self) -> dict[str, np.ndarray]:
        return population_learning_rates(self.population)


class EvalScorer:
    """A single agent's ``eval_fn`` as a scorer: ``agent -> score`` or ``agent ->
    (score, returns)``; an ``activity`` attribute on it (name → number, set by each call)
    adds validation rows after the score."""

    def __init__(self, eval_fn: Any, agent: Any, score_name: str) -> None:
        self.eval_fn, self.agent, self.score_name = eval_fn, agent, score_name

    def __call__(self, alive: np.ndarray) -> Validation:
        score, returns = evaluate(self.eval_fn, self.agent)
        rows = {self.score_name: score, **(getattr(self.eval_fn, "activity", None) or {})}
        return Validation(np.array([score]), [returns], [rows])
