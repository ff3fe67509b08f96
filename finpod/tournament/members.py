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
member scored on the validation split in one env of K accounts (:func:`member_returns`).

The env tables are built once per actor and reused by every round that trains with the
same settings, and so is the validation env of K accounts. Algorithms without a batched
engine (and rounds of one pod) train their members one after another on the usual path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
import torch

from finpod.agents import ALGORITHMS, make_agent
from finpod.agents.callbacks import TimeBudget
from finpod.agents.cross_section import hparams_for_env
from finpod.agents.hparams import build_hparams
from finpod.agents.learners import PopulationLearner
from finpod.agents.loop import Callback, Segment, Validation, run_loop
from finpod.agents.progress import StepCountingEnv
from finpod.agents.registry import make_population
from finpod.data.market import periods_per_year
from finpod.env import VecTradingEnv
from finpod.env.rollout import trading_activity
from finpod.scores import score_returns, scored_series
from finpod.tournament.generator import PodSpec, population_class
from finpod.tournament.pod_results import (
    NON_FINITE,
    PodResult,
    checkpoint_bytes,
    node_id,
    state_from_checkpoint_bytes,
)

if TYPE_CHECKING:
    from finpod.env import EnvConfig

#: Offset of a population's train-env seed from its first member's seed.
ENV_SEED_OFFSET = 1


def scoring_env(market: Any, config: EnvConfig, members: int, device: torch.device) -> Any:
    """The env :func:`member_returns` trades ``members`` accounts in (build once, reuse)."""

    config = replace(config, episode_length=None, dtype="float64")
    return VecTradingEnv(
        market, config, num_envs=members, seed=0, random_start=False, device=device
    )


@torch.no_grad()
def member_returns(
    act: Any,
    market: Any,
    config: EnvConfig,
    members: int,
    device: torch.device,
    env: Any = None,
    activity: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Per-bar simple returns ``(members, T − 1) float64`` of ``members`` accounts, each
    traded deterministically over the whole of ``market`` by its own member.

    ``act`` maps obs ``(members, obs_dim)`` to actions ``(members, num_stocks)``; row k is
    member k. The same env as :func:`finpod.env.rollout` (whole split, float64
    accounting, next-bar fills, the config's execution controls), with one account per
    member instead of one: account k's returns equal a single-account rollout of member
    k's policy. ``env``: a :func:`scoring_env` of the same settings to reuse.

    ``activity``, when given, receives each account's trading: ``"turnover"`` and
    ``"costs"`` ``(members, T − 1) float64`` (the rollout's per-bar turnover and dollars
    of costs, see :class:`finpod.env.Rollout`).
    """
    if env is None:
        env = scoring_env(market, config, members, device)
    obs = env.reset()
    values = [torch.full((members,), float(config.initial_cash), dtype=torch.float64)]
    turnover, costs = [], []
    ref = [torch.full((members,), float(config.initial_cash), dtype=torch.float64)]
    for _ in range(env.episode_length):
        action = act(obs).to(env.device, torch.float32)
        obs, _, _, _, info = env.step(action)
        values.append(info["account_value"].to("cpu", torch.float64))
        if activity is not None:
            turnover.append(info["turnover"])
            costs.append(info["cost"])
            if "reference_value" in info:
                ref.append(info["reference_value"].to("cpu", torch.float64))
    v = torch.stack(values, dim=1).numpy()  # (members, T)
    if activity is not None:
        activity["turnover"] = torch.stack(turnover, 1).to("cpu", torch.float64).numpy()
        activity["costs"] = torch.stack(costs, 1).to("cpu", torch.float64).numpy()
        if len(ref) > 1:
            rv = torch.stack(ref, 1).numpy()
            activity["reference_returns"] = rv[:, 1:] / rv[:, :-1] - 1.0
    return v[:, 1:] / v[:, :-1] - 1.0


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
        self._scoring: Any = None
        self._scoring_key: tuple[EnvConfig, int] | None = None

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

    def scoring_env(self, spec: PodSpec, members: int) -> Any:
        """The validation env of ``members`` accounts for ``spec``'s settings (cached)."""
        config = self.pod.env_config_for(spec)
        key = (config, members)
        if self._scoring_key != key:
            self._scoring = None
            self._scoring = scoring_env(self.pod.valid_market, config, members, self.pod.device)
            self._scoring_key = key
        return self._scoring

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
            PopulationScorer(
                population,
                self.pod.valid_market,
                self.pod.env_config_for(lead),
                self.scoring_env(lead, k_members),
                lead.score_name,
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
        node = node_id()
        results = []
        for k, spec in enumerate(specs):
            agent = population.export_member(k)
            failure = f"{NON_FINITE}: {loop.failures[k]}" if loop.failures[k] else ""
            results.append(
                PodResult(
                    pod_id=spec.pod_id,
                    algorithm=spec.algorithm,
                    hparams=json.loads(json.dumps(dataclasses.asdict(agent.hparams))),
                    score=float(loop.scores[k]),
                    history=loop.history[k],
                    env_steps=int(steps[k]),
                    updates=int(agent.updates),
                    steps_done=int(steps[k] - loop.start_env_steps[k]),
                    checkpoint=b""
                    if failure
                    else checkpoint_bytes(agent, self.pod.env_config_for(spec)),
                    metrics=loop.metrics[k],
                    node_id=node,
                    train_s=train_s,
                    epochs_done=int(loop.scored[k]),
                    returns=loop.returns[k],
                    failure=failure,
                    env=dict(spec.env),
                )
            )
        return results


class PopulationScorer:
    """Every member of a population scored on the validation split at once, in one env
    of K accounts (:func:`member_returns`): its score, the annualized return, turnover and
    costs, and the series the score ranks ``(T − 1,) float32`` (its candidate record)."""

    def __init__(
        self, population: Any, valid: Any, config: EnvConfig, env: Any, score_name: str
    ) -> None:
        self.population, self.valid, self.config = population, valid, config
        self.env, self.score_name = env, score_name
        self.ann = float(valid.annualization) or periods_per_year(valid.bar)
        # empyrical reads the index's values: tz-naive UTC, as finpod.env.score does.
        self.index = pd.DatetimeIndex(valid.timestamps[1:]).tz_convert(None)

    def __call__(self, alive: np.ndarray) -> Validation:
        k_members = len(alive)
        trading: dict[str, np.ndarray] = {}
        rets = member_returns(
            lambda obs: self.population.act(obs, deterministic=True),
            self.valid,
            self.config,
            k_members,
            self.env.device,
            env=self.env,
            activity=trading,
        )
        turnover, costs = trading_activity(
            trading["turnover"], trading["costs"], float(self.config.initial_cash), self.ann
        )
        reference = trading.get("reference_returns")
        out = Validation(np.full(k_members, math.nan), [None] * k_members, [{}] * k_members)
        for k in np.flatnonzero(alive):
            r = scored_series(rets[k], None if reference is None else reference[k], self.score_name)
            value = score_returns(pd.Series(r, index=self.index), self.score_name, self.ann)
            out.scores[k], out.returns[k] = value, r.astype(np.float32)
            if not bool(np.isfinite(r).all()) or not math.isfinite(value):
                continue
            rows = {self.score_name: value}
            if self.score_name != "return":
                annual = pd.Series(rets[k], index=self.index)
                rows["return"] = score_returns(annual, "return", self.ann)
            out.rows[k] = {**rows, "turnover": float(turnover[k]), "costs": float(costs[k])}
        return out


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
