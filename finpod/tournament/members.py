"""Populations inside a pod actor: K pods trained as one batched model, scored together.

A *population* is the unit one pod actor trains at a time when ``tournament.population``
is K > 1. Its K members share the algorithm, the network architecture and the execution
controls, and differ in everything else: seed, hyperparameters, parent. Each member is
still a pod to the rest of the tournament (own id, result, score, checkpoint, leaderboard
entry, candidates record).

One round = build (or reuse) one train env of K × W envs → a batched population
(:func:`finpod.agents.population.make_population`) whose member k starts from scratch
with the spec's seed or from its parent's weights and optimizer state (copied into its
slice) → ``epochs`` rounds of ``learn`` on every member at once → after each epoch, every
member scored on the validation split in one env of K accounts (the pod's
:class:`~finpod.agents.validation.ValidationScorer`, the one every learner is scored by).

The env tables are built once per actor and reused by every round that trains with the
same settings, and so is the validation scorer of K accounts. Algorithms without a batched
engine (and rounds of one pod) train their members one after another on the usual path.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from finpod.agents import ALGORITHMS, make_agent
from finpod.agents.callbacks import TimeBudget
from finpod.agents.cross_section import hparams_for_env
from finpod.agents.hparams import build_hparams
from finpod.agents.learners import PopulationLearner
from finpod.agents.loop import Callback, Segment, run_loop
from finpod.agents.progress import StepCountingEnv
from finpod.agents.registry import make_population
from finpod.agents.validation import ValidationScorer
from finpod.env import VecTradingEnv
from finpod.tournament.generator import PodSpec, population_class
from finpod.tournament.pod_results import PodResult, pod_result, state_from_checkpoint_bytes

if TYPE_CHECKING:
    from finpod.env import EnvConfig

#: Offset of a population's train-env seed from its first member's seed.
ENV_SEED_OFFSET = 1


def fit_spec_to_env(spec: PodSpec, env: Any) -> PodSpec:
    """``spec`` with its hyperparameters fitted to the train env it trains on: the network
    family of a benchmark-relative env and the per-ticker feature count (see
    :func:`finpod.agents.cross_section.hparams_for_env`)."""

    hparams = hparams_for_env(ALGORITHMS[spec.algorithm][0], spec.hparams, env)
    return spec if hparams == spec.hparams else replace(spec, hparams=hparams)


class PodSplits(Protocol):
    """What a population trainer uses of a :class:`~finpod.tournament.pod.Pod`: its
    splits and device, each pod's env settings, its progress tracker, and training one
    pod (rounds of one, algorithms without a batched engine)."""

    train_market: Any
    valid_market: Any
    device: torch.device
    tracker: Any

    def env_config_for(self, spec: PodSpec) -> EnvConfig: ...

    def scorer_for(self, spec: PodSpec, members: int) -> ValidationScorer: ...

    def train_with_buffer(
        self, spec: PodSpec, parent: bytes | None, parent_buffer: Any, export_buffer: bool
    ) -> tuple[PodResult, Any]: ...


class PopulationTrainer:
    """Trains populations on a pod's splits (see :class:`PodSplits`), keeping the train
    and validation envs of the last settings for the next round."""

    def __init__(self, pod: PodSplits) -> None:
        self.pod = pod
        self._env: Any = None
        self._env_key: tuple[EnvConfig, int] | None = None

    def train_env(self, spec: PodSpec, members: int) -> Any:
        """The train env of ``members × W`` envs for ``spec``'s settings: built once, reused
        while the settings stay the same (its episodes are re-seeded by each round)."""

        config = self.pod.env_config_for(spec)
        key = (config, members * spec.num_envs)
        if self._env_key != key:
            self._env = None  # free the old tables first
            self._env = VecTradingEnv(
                self.pod.train_market,
                config,
                num_envs=members * spec.num_envs,
                seed=spec.seed + ENV_SEED_OFFSET,
                random_start=True,
                device=self.pod.device,
            )
            self._env_key = key
        self._env.reset(seed=spec.seed + ENV_SEED_OFFSET)
        return self._env

    def train(self, specs: list[PodSpec], parents: list[bytes | None]) -> list[PodResult]:
        """Train ``specs`` (one population) and return one result per spec, in order."""
        if len(specs) == 1 or population_class(specs[0].algorithm) is None:
            return [
                self.pod.train_with_buffer(spec, parent, None, export_buffer=False)[0]
                for spec, parent in zip(specs, parents, strict=True)
            ]
        return self._train_batched(specs, parents)

    def _train_batched(self, specs: list[PodSpec], parents: list[bytes | None]) -> list[PodResult]:

        t0 = time.perf_counter()
        lead = specs[0]
        k_members = len(specs)
        torch.manual_seed(lead.seed)
        env = self.train_env(lead, k_members)
        specs = [fit_spec_to_env(s, env) for s in specs]
        lead = specs[0]
        device = self.pod.device
        params_cls = ALGORITHMS[lead.algorithm][0]
        hparams = [
            build_hparams(params_cls, s.hparams, where=f"{s.algorithm} hparams") for s in specs
        ]
        population = make_population(
            lead.algorithm,
            hparams,
            env.obs_dim,
            env.action_dim,
            device,
            [s.seed for s in specs],
        )
        for k, (spec, parent) in enumerate(zip(specs, parents, strict=True)):
            if parent is None:
                continue
            agent = make_agent(
                spec.algorithm, spec.hparams, env.obs_dim, env.action_dim, device, spec.seed
            )
            agent.load_state_dict(state_from_checkpoint_bytes(parent))
            # The parent's RNG stream is not inherited: siblings must explore differently.
            agent.generator.manual_seed(spec.seed)
            population.import_member(k, agent)
        # Every member steps W of the K × W envs per env step: each has trained 1/K.
        counted = StepCountingEnv(env)
        self.pod.tracker.begin(
            [s.pod_id for s in specs], lead.epochs, lambda: [counted.steps // k_members] * k_members
        )
        loop = run_loop(
            PopulationLearner(population, counted),
            self.pod.scorer_for(lead, k_members).scorer(
                lambda obs: population.act(obs, deterministic=True)
            ),
            ids=[s.pod_id for s in specs],
            steps_per_segment=max(1, math.ceil(lead.steps / lead.epochs)),
            segments=lead.epochs,
            callbacks=[
                TrackProgress(self.pod.tracker),
                TimeBudget(lead.out_of_time, lead.max_seconds, t0),
            ],
            history=[s.base_history for s in specs],
            fail_non_finite=True,
            keep_best=False,
            t0=t0,
        )
        steps = population.env_steps().cpu().numpy().astype(np.int64)
        train_s = time.perf_counter() - t0
        return [
            pod_result(
                spec,
                population.export_member(k),
                loop,
                k,
                self.pod.env_config_for(spec),
                env_steps=int(steps[k]),
                train_s=train_s,
            )
            for k, spec in enumerate(specs)
        ]


class TrackProgress(Callback):
    """What a pod actor's ``progress()`` answers (:class:`~finpod.tournament.progress.PodProgress`):
    each member's epoch and last score (None once failed) after every segment."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker

    def on_segment(self, segment: Segment) -> bool:
        result = segment.result
        scores = [
            None if f else float(s) for f, s in zip(result.failures, result.scores, strict=True)
        ]
        self.tracker.epoch(segment.index, scores)
        return False

    def close(self) -> None:
        self.tracker.end()
