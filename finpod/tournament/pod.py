"""A pod: one agent trained by W vectorized envs and L learners, then scored on validation.

:class:`Pod` is plain Python (usable without Ray); :class:`PodWorker` wraps it as a Ray
actor that loads the dataset itself, by path — the *train* split to learn on and the
*validation* split to score on. The backtest split is never opened here.

One pod = ``epochs`` rounds of: every learner ``learn``s ``steps / (epochs · L)`` env steps
on its own shard (its own env seed, reset seeds and start windows; the L learners run side
by side in threads of the pod's actor, so give the pod L CPUs) → with ``L > 1`` their
state dicts (weights and optimizer moments) are averaged and loaded back into every
learner (model fusion) → the fused agent is scored on the validation split (the
evaluator) and the score appended to its history.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from finpod.data.market import MarketData
from finpod.tournament.fusion import fuse_state_dicts
from finpod.tournament.generator import PodSpec

#: Offset between the env seeds of two learners of a pod.
LEARNER_SEED_STRIDE = 7919


@dataclass
class PodResult:
    """What a finished pod sends back to the orchestrator."""

    pod_id: str
    """The spec's pod id."""
    algorithm: str
    """Registry name of the agent's algorithm."""
    hparams: dict[str, Any]
    """Every hyperparameter of the trained agent, JSON-ready."""
    score: float
    """Validation score of the final (returned) weights."""
    history: list[dict[str, float]]
    """Validation scores along the lineage, this pod's epochs last."""
    env_steps: int
    """Env steps the agent has learned from, ancestors included."""
    steps_done: int
    """Env steps this pod trained (all learners)."""
    checkpoint: bytes
    """The agent as a finpod safetensors checkpoint file."""
    metrics: list[tuple[int, float, str, str, float]] = field(default_factory=list)
    """Learning-curve rows ``(env_steps, pod_wall_s, split, metric, value)``."""
    node_id: str = ""
    """Ray node the pod ran on ("" outside Ray)."""
    train_s: float = 0.0
    """Seconds spent inside the pod (training, fusion, evaluation, checkpoint)."""
    epochs_done: int = 0
    """Epochs completed (fewer than asked when ``max_seconds`` stopped the pod)."""


class Pod:
    """Trains pods on one train/validation pair of splits, on one device."""

    def __init__(
        self,
        train: MarketData,
        validation: MarketData,
        env_config: Any,
        device: torch.device | str = "cpu",
        concurrent_learners: bool = True,
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
        self._progress: dict[str, Any] = {}
        self._lock = threading.Lock()

    # ----- pieces -----------------------------------------------------------------------
    def make_envs(self, spec: PodSpec) -> list[Any]:
        """One ``VecTradingEnv`` of W envs per learner, each with its own seed (its shard)."""
        from finpod.env import VecTradingEnv

        return [
            VecTradingEnv(
                self.train_market,
                self.env_config,
                num_envs=spec.num_envs,
                seed=spec.seed + 1 + learner * LEARNER_SEED_STRIDE,
                random_start=True,
                device=self.device,
            )
            for learner in range(spec.num_learners)
        ]

    def make_learners(
        self, spec: PodSpec, obs_dim: int, action_dim: int, parent: bytes | None
    ) -> list[Any]:
        """L agents with the spec's hyperparameters, all starting from the parent's state."""
        from finpod.agents import make_agent

        agent = make_agent(
            spec.algorithm, spec.hparams, obs_dim, action_dim, self.device, spec.seed
        )
        if parent is not None:
            agent.load_state_dict(_state_from_checkpoint_bytes(parent))
            # The parent's RNG stream is not inherited: siblings must explore differently.
            agent.generator.manual_seed(spec.seed)
        learners = [agent]
        for _ in range(1, spec.num_learners):
            twin = make_agent(
                spec.algorithm, spec.hparams, obs_dim, action_dim, self.device, spec.seed
            )
            twin.load_state_dict(agent.state_dict())
            learners.append(twin)
        return learners

    def run_epoch(
        self, learners: list[Any], envs: list[Any], steps_per_learner: int, epoch_seed: int
    ) -> tuple[dict[str, float], list[dict[str, torch.Tensor]] | None]:
        """Every learner learns on its shard; with L > 1 the learners are fused.

        Returns the learners' mean training stats and, with L > 1, their state dicts just
        before fusion (learner 0 and every other learner hold the fused state afterwards).
        """
        num = len(learners)
        if num > 1:
            for i, learner in enumerate(learners):
                # Distinct reset seeds per learner and epoch: shards differ in start windows.
                learner.generator.manual_seed(epoch_seed * 1009 + i)
        base_steps = [learner.env_steps for learner in learners]
        base_updates = [learner.updates for learner in learners]
        pairs = list(zip(learners, envs, strict=True))
        if num > 1 and self.concurrent_learners:
            # Learners share nothing (own agent, env, generator), and torch releases the GIL
            # inside its kernels: run them side by side within this actor, one thread each.
            with ThreadPoolExecutor(max_workers=num, thread_name_prefix="learner") as pool:
                stats = list(pool.map(lambda p: p[0].learn(p[1], steps_per_learner), pairs))
        else:
            stats = [learner.learn(env, steps_per_learner) for learner, env in pairs]
        mean_stats: dict[str, float] = {}
        for key in stats[0]:
            values = [float(s[key]) for s in stats if key in s]
            mean_stats[key] = sum(values) / len(values)
        if num == 1:
            return mean_stats, None
        sds = [learner.state_dict() for learner in learners]
        fused = fuse_state_dicts(sds)
        # Counters add up: the fused agent has learned from every learner's transitions.
        if "counter.env_steps" in fused:
            done = sum(lr.env_steps - b for lr, b in zip(learners, base_steps, strict=True))
            fused["counter.env_steps"] = torch.tensor(base_steps[0] + done, dtype=torch.int64)
        if "counter.updates" in fused:
            done = sum(lr.updates - b for lr, b in zip(learners, base_updates, strict=True))
            fused["counter.updates"] = torch.tensor(base_updates[0] + done, dtype=torch.int64)
        for learner in learners:
            learner.load_state_dict(fused)
        return mean_stats, sds

    def evaluate(self, agent: Any, score_name: str) -> tuple[float, float]:
        """(score, annual return) of ``agent``'s deterministic policy on the validation split."""
        from finpod.env import rollout, score

        def policy(obs: torch.Tensor) -> torch.Tensor:
            return agent.act(obs, deterministic=True)

        result = rollout(policy, self.valid_market, self.env_config, device=self.device)
        return score(result, score_name), score(result, "return")

    # ----- a whole pod ------------------------------------------------------------------
    def train(self, spec: PodSpec, parent: bytes | None = None) -> PodResult:
        """Train ``spec`` (from ``parent``'s checkpoint bytes if given) and score it."""
        t0 = time.perf_counter()
        torch.manual_seed(spec.seed)
        envs = self.make_envs(spec)
        learners = self.make_learners(spec, envs[0].obs_dim, envs[0].action_dim, parent)
        agent = learners[0]
        start_steps = agent.env_steps
        per_learner = max(1, math.ceil(spec.steps / (spec.epochs * spec.num_learners)))
        history = [dict(h) for h in spec.base_history]
        metrics: list[tuple[int, float, str, str, float]] = []
        value = float("nan")
        epochs_done = 0
        self._set_progress(spec, 0, agent.env_steps, None, t0)
        for epoch in range(spec.epochs):
            stats, _ = self.run_epoch(learners, envs, per_learner, spec.seed + epoch + 1)
            value, annual = self.evaluate(agent, spec.score_name)
            epochs_done = epoch + 1
            wall = time.perf_counter() - t0
            history.append({"env_steps": int(agent.env_steps), "score": value})
            metrics.extend(
                (int(agent.env_steps), wall, "train", k, float(v)) for k, v in stats.items()
            )
            metrics.append((int(agent.env_steps), wall, "validation", spec.score_name, value))
            if spec.score_name != "return":
                metrics.append((int(agent.env_steps), wall, "validation", "return", annual))
            self._set_progress(spec, epochs_done, agent.env_steps, value, t0)
            if not math.isfinite(value):
                break
            if spec.max_seconds is not None and wall >= spec.max_seconds:
                break
        checkpoint = _checkpoint_bytes(agent)
        hparams = json.loads(json.dumps(dataclasses.asdict(agent.hparams)))
        return PodResult(
            pod_id=spec.pod_id,
            algorithm=spec.algorithm,
            hparams=hparams,
            score=value,
            history=history,
            env_steps=int(agent.env_steps),
            steps_done=int(agent.env_steps - start_steps),
            checkpoint=checkpoint,
            metrics=metrics,
            node_id=_node_id(),
            train_s=time.perf_counter() - t0,
            epochs_done=epochs_done,
        )

    def progress(self) -> dict[str, Any]:
        """The running pod's id, epoch, env steps, last score and seconds so far."""
        with self._lock:
            out = dict(self._progress)
        if "t0" in out:
            out["elapsed_s"] = time.perf_counter() - out.pop("t0")
        return out

    def _set_progress(
        self, spec: PodSpec, epoch: int, env_steps: int, value: float | None, t0: float
    ) -> None:
        with self._lock:
            self._progress = {
                "pod_id": spec.pod_id,
                "epoch": epoch,
                "epochs": spec.epochs,
                "env_steps": int(env_steps),
                "score": value,
                "t0": t0,
            }


class PodWorker:
    """Ray actor body: loads the train and validation splits once, then trains pods."""

    def __init__(
        self, dataset_dir: str, env_config: dict[str, Any], device: str, threads: int
    ) -> None:
        from finpod.data import load_split
        from finpod.device import pick_device
        from finpod.env import EnvConfig

        torch.set_num_threads(max(1, int(threads)))
        # Import what training and scoring need now, so a pod's time is training time.
        import empyrical  # noqa: F401

        import finpod.agents  # noqa: F401

        dev = pick_device(device)
        data = Path(dataset_dir)
        self.pod = Pod(
            load_split(data, "train", device=dev),
            load_split(data, "validation", device=dev),
            EnvConfig.from_dict(env_config),
            dev,
        )

    def ready(self) -> str:
        """The node this worker runs on (returns once the data is loaded)."""
        return _node_id()

    def train(self, spec: PodSpec, parent: bytes | None = None) -> PodResult:
        return self.pod.train(spec, parent)

    def progress(self) -> dict[str, Any]:
        return self.pod.progress()

    def pid(self) -> int:
        return os.getpid()


def _checkpoint_bytes(agent: Any) -> bytes:
    from finpod.agents import save_checkpoint

    with tempfile.TemporaryDirectory(prefix="fpod") as tmp:
        path = Path(tmp) / "agent.safetensors"
        save_checkpoint(agent, path)
        return path.read_bytes()


def _state_from_checkpoint_bytes(data: bytes) -> dict[str, torch.Tensor]:
    """Verified state dict of a checkpoint file's bytes (checksum checked)."""
    from finpod.agents import read_checkpoint

    with tempfile.TemporaryDirectory(prefix="fpod") as tmp:
        path = Path(tmp) / "parent.safetensors"
        path.write_bytes(data)
        _, sd = read_checkpoint(path)
    return sd


def _node_id() -> str:
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray there is no node id to report
        pass
    return ""
