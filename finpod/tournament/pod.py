"""A pod: one agent trained by W vectorized envs and L learners, then scored on validation.

:class:`Pod` is plain Python (usable without Ray); :class:`PodWorker` wraps it as a Ray
actor. The worker never opens a dataset path: it receives the driver's object-store refs
of the *train* and *validation* splits (see :mod:`finpod.tournament.dataplane`) and reads
them zero-copy on CPU, or copies them once to its GPU(s). The backtest split never reaches
a pod.

One pod = ``epochs`` rounds of: every learner ``learn``s ``steps / (epochs · L)`` env steps
on its own shard (its own env seed, reset seeds and start windows; with L GPUs each
learner runs on its own device; the L learners run side by side in threads of the pod's
actor) → with ``L > 1`` their state dicts (weights and optimizer moments) are averaged
and loaded back into every learner (model fusion; replay buffers stay) → the fused agent
is scored on the validation split (the evaluator) and the score appended to its history.

A pod whose losses, weights or validation returns are not finite stops at once and
reports ``failure`` instead of a score: the env turns NaN actions into no trades, so a
NaN network would otherwise sit in cash and score 0.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
import torch

from finpod.agents.callbacks import TimeBudget
from finpod.agents.learners import AgentLearner
from finpod.agents.loop import Validation, run_loop
from finpod.agents.progress import StepCountingEnv
from finpod.agents.validation import ValidationScorer, agent_act
from finpod.data.market import MarketData
from finpod.device import pick_device
from finpod.env import VecTradingEnv
from finpod.runs import package_versions
from finpod.scores import DEFAULT_SCORE
from finpod.tournament.dataplane import fetch_splits
from finpod.tournament.fusion import (
    learn_epoch,
    learner_devices,
    make_learners,
    threads_per_learner,
)
from finpod.tournament.generator import PodSpec
from finpod.tournament.members import PopulationTrainer, TrackProgress, fit_spec_to_env
from finpod.tournament.pod_results import PodResult, last_line, node_id, pod_result
from finpod.tournament.progress import PodProgress
from finpod.tournament.search import pod_env_config

if TYPE_CHECKING:
    from finpod.env import EnvConfig

#: Offset between the env seeds of two learners of a pod.
LEARNER_SEED_STRIDE = 7919


class Pod:
    """Trains pods on one train/validation pair of splits, on one or more devices."""

    def __init__(
        self,
        train: MarketData,
        validation: MarketData,
        env_config: EnvConfig,
        device: torch.device | str = "cpu",
        concurrent_learners: bool = True,
        learner_devices: Sequence[torch.device | str] | None = None,
    ) -> None:
        if train.split == "backtest" or validation.split == "backtest":
            raise ValueError("pods never see the backtest split")
        self.device = torch.device(device)
        self.train_market = train.to(self.device)
        self.valid_market = validation.to(self.device)
        self.env_config = env_config
        #: With L > 1, train the learners of an epoch concurrently (threads) rather than
        #: one after another; the result is the same either way.
        self.concurrent_learners = concurrent_learners
        #: Devices of learners 0..L−1 (learner 0 is scored and checkpointed); ``None`` =
        #: every learner on ``device``.
        self.learner_devices = (
            None if learner_devices is None else [torch.device(d) for d in learner_devices]
        )
        self._markets: dict[torch.device, MarketData] = {self.device: self.train_market}
        self._scoring: ValidationScorer | None = None
        self._scoring_key: tuple[EnvConfig, int, str] | None = None
        #: What ``progress()`` answers while a pod trains (read from the control thread).
        self.tracker = PodProgress()

    # ----- pieces -----------------------------------------------------------------------
    def devices_for(self, num_learners: int) -> list[torch.device]:
        """The device of each of ``num_learners`` learners (cycled over ``learner_devices``)."""
        devs = self.learner_devices or [self.device]
        return [devs[i % len(devs)] for i in range(num_learners)]

    def _train_market_on(self, device: torch.device) -> MarketData:
        """The train split on ``device``: copied there once, then kept for later pods."""
        if device not in self._markets:
            self._markets[device] = self.train_market.to(device)
        return self._markets[device]

    def env_config_for(self, spec: PodSpec) -> EnvConfig:
        """The pod's ``EnvConfig``: the run's with the pod's searched execution controls
        (``spec.env``) set, the cost model unchanged. Used for training *and* validation
        scoring, so every pod is scored with its own controls."""
        return pod_env_config(self.env_config, spec.env)

    def make_envs(self, spec: PodSpec) -> list[Any]:
        """One ``VecTradingEnv`` of W envs per learner, each with its own seed (its shard)."""

        config = self.env_config_for(spec)
        return [
            VecTradingEnv(
                self._train_market_on(dev),
                config,
                num_envs=spec.num_envs,
                seed=spec.seed + 1 + learner * LEARNER_SEED_STRIDE,
                random_start=True,
                device=dev,
            )
            for learner, dev in enumerate(self.devices_for(spec.num_learners))
        ]

    def make_learners(
        self,
        spec: PodSpec,
        obs_dim: int,
        action_dim: int,
        parent: bytes | None,
        parent_buffer: dict[str, np.ndarray] | None = None,
    ) -> list[Any]:
        """L agents with the spec's hyperparameters, all starting from the parent's state
        (and, for off-policy agents, its replay buffer when given), one per device of
        :meth:`devices_for` (see :func:`~finpod.tournament.fusion.make_learners`)."""
        devices = self.devices_for(spec.num_learners)
        return make_learners(spec, obs_dim, action_dim, devices, parent, parent_buffer)

    def run_epoch(
        self, learners: list[Any], envs: list[Any], steps_per_learner: int, epoch_seed: int
    ) -> tuple[dict[str, float], list[dict[str, torch.Tensor]] | None]:
        """Every learner learns on its shard; with L > 1 the learners are fused (see
        :func:`~finpod.tournament.fusion.learn_epoch`)."""
        return learn_epoch(
            learners, envs, steps_per_learner, epoch_seed, concurrent=self.concurrent_learners
        )

    def scorer_for(self, spec: PodSpec, members: int = 1) -> ValidationScorer:
        """The validation scorer of ``members`` accounts with ``spec``'s env settings and
        score: built once, reused while the settings stay the same."""
        key = (self.env_config_for(spec), members, spec.score_name)
        if self._scoring_key != key:
            self._scoring = None  # free the old tables first
            config, _, score_name = key
            self._scoring = ValidationScorer(
                self.valid_market, config, score_name, members, self.device
            )
            self._scoring_key = key
        return self._scoring

    def evaluate(
        self, agent: Any, score_name: str = DEFAULT_SCORE, env_config: EnvConfig | None = None
    ) -> Validation:
        """``agent``'s deterministic policy scored on the validation split (one member), with
        ``env_config`` (default: the run's env; a pod passes its own, see
        :meth:`env_config_for`)."""
        config = self.env_config if env_config is None else env_config
        scorer = ValidationScorer(self.valid_market, config, score_name, 1, self.device)
        return scorer.score(agent_act(agent, self.device))

    # ----- a whole pod ------------------------------------------------------------------
    def train(
        self,
        spec: PodSpec,
        parent: bytes | None = None,
        parent_buffer: dict[str, np.ndarray] | None = None,
    ) -> PodResult:
        """Train ``spec`` (from ``parent``'s checkpoint bytes and replay buffer if given)
        and score it; a non-finite loss, weight or validation return ends it as failed."""
        result, _ = self.train_with_buffer(spec, parent, parent_buffer, export_buffer=False)
        return result

    def train_with_buffer(
        self,
        spec: PodSpec,
        parent: bytes | None = None,
        parent_buffer: dict[str, np.ndarray] | None = None,
        export_buffer: bool = True,
    ) -> tuple[PodResult, dict[str, np.ndarray] | None]:
        """:meth:`train`, plus learner 0's replay buffer (off-policy agents, when asked)."""

        t0 = time.perf_counter()
        torch.manual_seed(spec.seed)
        envs = self.make_envs(spec)
        spec = fit_spec_to_env(spec, envs[0])
        learners = self.make_learners(
            spec, envs[0].obs_dim, envs[0].action_dim, parent, parent_buffer
        )
        agent = learners[0]
        # Learners step counting wrappers: progress moves with every env step.
        envs = [StepCountingEnv(env) for env in envs]
        config = self.env_config_for(spec)
        self.tracker.begin([spec.pod_id], spec.epochs, lambda: [sum(e.steps for e in envs)])

        def epoch(steps: int, index: int) -> dict[str, float]:
            return self.run_epoch(learners, envs, steps, spec.seed + index)[0]

        loop = run_loop(
            FusedLearner(agent, epoch),
            self.scorer_for(spec).scorer(agent_act(agent, self.device)),
            ids=[spec.pod_id],
            steps_per_segment=max(1, math.ceil(spec.steps / (spec.epochs * spec.num_learners))),
            segments=spec.epochs,
            callbacks=[
                TrackProgress(self.tracker),
                TimeBudget(spec.out_of_time, spec.max_seconds, t0),
            ],
            history=[spec.base_history],
            fail_non_finite=True,
            keep_best=False,
            t0=t0,
        )
        buffer = None
        if export_buffer and not loop.failures[0] and hasattr(agent, "export_buffer"):
            buffer = agent.export_buffer()
        result = pod_result(
            spec,
            agent,
            loop,
            0,
            config,
            env_steps=int(agent.env_steps),
            train_s=time.perf_counter() - t0,
            buffer_rows=0 if buffer is None else int(len(buffer.get("reward", ()))),
        )
        return result, buffer

    def progress(self) -> dict[str, Any]:
        """The running job's pods: epoch, env steps so far, last score (see
        :meth:`~finpod.tournament.progress.PodProgress.snapshot`)."""
        return self.tracker.snapshot()


class FusedLearner(AgentLearner):
    """A pod's L learners as one member: learner 0 (``agent``) holds the fused state that
    is scored; ``epoch(steps, index)`` runs the ``index``-th epoch of every learner (see
    :meth:`Pod.run_epoch`) and gives their mean training stats."""

    def __init__(self, agent: Any, epoch: Callable[[int, int], dict[str, float]]) -> None:
        super().__init__(agent, None)
        self.epoch, self.epochs = epoch, 0

    def learn(self, steps: int) -> dict[str, np.ndarray]:
        self.epochs += 1
        stats = self.epoch(steps, self.epochs)
        return {key: np.array([float(value)]) for key, value in stats.items()}


class PodWorker:
    """Ray actor body: reads the train and validation splits from the object store once,
    then trains pod after pod.

    ``train`` runs in its own concurrency group of one, so a call resubmitted after a
    transient ``ActorUnavailableError`` waits for the first instead of racing it; the
    ``control`` group (``ready``, ``progress``) answers while a pod trains.
    """

    def __init__(
        self,
        data_refs: list[Any],
        env_config: EnvConfig,
        device: str,
        cpus: float,
        num_learners: int = 1,
    ) -> None:
        self._node = node_id()
        self._error = ""
        self.pod: Pod | None = None
        self._members: Any = None
        try:
            self._setup(data_refs, env_config, device, cpus, num_learners)
        except Exception as err:  # noqa: BLE001 - reported by ready() with this node's id
            self._error = f"{type(err).__name__}: {last_line(err)}"

    def _setup(
        self,
        data_refs: list[Any],
        env_config: EnvConfig,
        device: str,
        cpus: float,
        num_learners: int,
    ) -> None:

        # L learners run as threads of this process; each gets an equal share of the
        # pod's CPUs for torch's intra-op pool (the pool is per process, so this caps the
        # whole pod at about its CPUs).
        torch.set_num_threads(threads_per_learner(cpus, num_learners))
        dev = pick_device(device)
        devices = None
        if dev.type == "cuda":
            devices = learner_devices(num_learners, [int(g) for g in ray.get_gpu_ids()], dev)
            dev = devices[0]
        train, validation = fetch_splits(data_refs, dev)
        self.pod = Pod(train, validation, env_config, dev, learner_devices=devices)

    @ray.method(concurrency_group="control")
    def ready(self) -> dict[str, Any]:
        """``{"node_id", "versions", "error"}``: where this worker runs, the packages it
        runs with, and why it could not start ("" when it is ready to train)."""

        return {"node_id": self._node, "versions": package_versions(), "error": self._error}

    @ray.method(concurrency_group="train", num_returns=2)
    def train(
        self,
        spec: PodSpec,
        parent: bytes | None = None,
        parent_buffer: list[Any] | None = None,
        export_buffer: bool = False,
    ) -> tuple[PodResult, dict[str, np.ndarray] | None]:
        """(result, replay buffer or None). ``parent_buffer``: ``[ObjectRef]`` of the
        parent's buffer, fetched here; a lost one (its node died) means an empty buffer."""
        if self.pod is None:
            raise RuntimeError(f"pod worker did not start: {self._error}")
        self.pod.tracker.clear()
        buffer = None
        if parent_buffer:
            try:
                buffer = ray.get(parent_buffer[0])
            except ray.exceptions.RayError:
                buffer = None
        return self.pod.train_with_buffer(spec, parent, buffer, export_buffer=export_buffer)

    @ray.method(concurrency_group="train")
    def train_group(self, specs: list[PodSpec], parents: list[bytes | None]) -> list[PodResult]:
        """One population: ``specs`` trained as one batched model (see
        :mod:`finpod.tournament.members`), one result per spec, in order."""
        if self.pod is None:
            raise RuntimeError(f"pod worker did not start: {self._error}")
        self.pod.tracker.clear()
        if self._members is None:
            self._members = PopulationTrainer(self.pod)
        return self._members.train(list(specs), list(parents))

    @ray.method(concurrency_group="control")
    def progress(self) -> dict[str, Any]:
        return {} if self.pod is None else self.pod.progress()
