"""Model fusion and the epoch of a pod's learners: average several learners' state dicts
into one agent, across devices.

The learners of a pod start an epoch from the same state, train on separate shards, and at
the epoch's end their parameters *and optimizer moments* are averaged (Podracer's
"learner fusion"), instead of synchronising gradients every step.

With ``gpus_per_pod = L`` each of the L learners runs on its own GPU
(:func:`learner_devices`); the mean is taken on the first learner's device and each
learner loads it back onto its own device (:func:`fuse_learners`). The learners run side
by side in threads of one process, so torch's intra-op pool is split between them
(:func:`threads_per_learner`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from finpod.agents import make_agent
from finpod.errors import FinpodError
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod_results import state_from_checkpoint_bytes


def learner_devices(
    num_learners: int, gpu_ids: Sequence[int] | None, base: torch.device | str
) -> list[torch.device]:
    """The device of each of a pod's ``num_learners`` learners.

    Args:
        num_learners: L ≥ 1.
        gpu_ids: the GPU ids Ray assigned to the pod's actor (``ray.get_gpu_ids()``), or
            ``None``/empty outside Ray or without GPUs.
        base: the pod's device (``cpu``, ``cuda`` or ``cuda:K``).

    Returns:
        ``L`` devices. On a CPU ``base``, or with no GPU ids, every learner uses ``base``.
        On CUDA with ``g`` ids, learner ``i`` uses the ``(i mod g)``-th of them: L learners
        on L GPUs when ``g ≥ L``, several learners sharing a GPU when ``g < L`` (a
        fractional ``gpus_per_pod`` gives one id, so all learners share it). Ray sets
        ``CUDA_VISIBLE_DEVICES`` to the assigned GPUs, so an id is mapped to its position
        in that list (the ordinal torch sees); without it the id is the ordinal.
    """
    if num_learners < 1:
        raise ValueError(f"num_learners must be ≥ 1, got {num_learners}")
    base = torch.device(base)
    if base.type != "cuda" or not gpu_ids:
        return [base] * num_learners
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    ordinals = []
    for gpu in gpu_ids:
        text = str(gpu)
        ordinals.append(visible.index(text) if text in visible else int(gpu))
    return [torch.device("cuda", ordinals[i % len(ordinals)]) for i in range(num_learners)]


def threads_per_learner(cpus_per_pod: float, num_learners: int) -> int:
    """Torch intra-op threads for one learner: the pod's whole CPUs split between its L
    learners (at least 1).

    The L learners run as threads of one process and ``torch.set_num_threads`` is
    process-wide; setting it to this value keeps the pod at about ``cpus_per_pod`` busy
    cores instead of ``L × cpus_per_pod``.
    """
    if num_learners < 1:
        raise ValueError(f"num_learners must be ≥ 1, got {num_learners}")
    return max(1, math.floor(float(cpus_per_pod) / num_learners))


def fuse_state_dicts(
    state_dicts: Sequence[dict[str, torch.Tensor]], device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """Element-wise mean of every floating tensor; other tensors from the first learner.

    Floating tensors are network weights, Adam's ``exp_avg``/``exp_avg_sq`` and ``step``;
    the mean is taken in float64 and cast back, so it does not depend on the learners'
    order beyond rounding. Integer counters and RNG states are not averageable and are
    taken from ``state_dicts[0]`` (the caller fixes counters it wants summed). All dicts
    must have the same keys, shapes and dtypes; their tensors may live on different
    devices. The result lives on ``device`` (default: where ``state_dicts[0]``'s tensors
    are).
    """
    if not state_dicts:
        raise ValueError("nothing to fuse")
    first = state_dicts[0]
    for i, sd in enumerate(state_dicts[1:], start=1):
        if sd.keys() != first.keys():
            diff = sorted(set(sd) ^ set(first))
            raise FinpodError(
                f"learner {i} has a different state layout ({diff[0]!r})",
                "fuse only learners of one algorithm and architecture",
            )
    fused: dict[str, torch.Tensor] = {}
    for key, ref in first.items():
        tensors = [sd[key] for sd in state_dicts]
        if any(t.shape != ref.shape or t.dtype != ref.dtype for t in tensors):
            raise FinpodError(
                f"learners disagree on the shape or dtype of {key!r}",
                "fuse only learners of one algorithm and architecture",
            )
        where = torch.device(device) if device is not None else ref.device
        if ref.is_floating_point():
            acc = torch.zeros(ref.shape, dtype=torch.float64, device=where)
            for t in tensors:
                acc += t.to(where, torch.float64)
            fused[key] = (acc / len(tensors)).to(ref.dtype)
        else:
            fused[key] = ref.to(where).clone()
    return fused


def fuse_learners(
    learners: Sequence[Any], *, start_env_steps: int, start_updates: int
) -> list[dict[str, torch.Tensor]]:
    """Fuse a pod's learners in place; returns their state dicts from just before.

    Every learner then holds the mean of the learners' weights and optimizer moments, on
    its own device (``learner.load_state_dict`` moves each tensor to ``learner.device``),
    and keeps its replay buffer. Counters add up, since the fused agent has learned from
    every learner's transitions: ``start_env_steps`` / ``start_updates`` are the counters
    the learners shared at the start of the epoch, and the fused counters are that start
    plus every learner's gain.
    """
    sds = [learner.state_dict() for learner in learners]
    if len(learners) == 1:
        return sds
    fused = fuse_state_dicts(sds, device=learners[0].device)
    for key, start in (("counter.env_steps", start_env_steps), ("counter.updates", start_updates)):
        if key in fused:
            gained = sum(int(sd[key]) - int(start) for sd in sds)
            fused[key] = torch.tensor(int(start) + gained, dtype=torch.int64)
    for learner in learners:
        learner.load_state_dict(fused)
    return sds


def learn_epoch(
    learners: Sequence[Any],
    envs: Sequence[Any],
    steps_per_learner: int,
    epoch_seed: int,
    concurrent: bool = True,
) -> tuple[dict[str, float], list[dict[str, torch.Tensor]] | None]:
    """One epoch of a pod's learners: each learns ``steps_per_learner`` env steps on its
    own env (its shard); with L > 1 the learners are then fused (:func:`fuse_learners`).

    Returns the learners' mean training stats and, with L > 1, their state dicts just
    before fusion (every learner holds the fused state afterwards; each keeps its own
    replay buffer). ``concurrent``: train the L learners side by side in threads rather
    than one after another; the result is the same either way.
    """
    num = len(learners)
    if num > 1:
        for i, learner in enumerate(learners):
            # Distinct reset seeds per learner and epoch: shards differ in start windows.
            learner.generator.manual_seed(epoch_seed * 1009 + i)
    base_steps = [learner.env_steps for learner in learners]
    base_updates = [learner.updates for learner in learners]
    pairs = list(zip(learners, envs, strict=True))
    if num > 1 and concurrent:
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
    # Learners started the epoch from the same (fused) state: learner 0's counters.
    sds = fuse_learners(learners, start_env_steps=base_steps[0], start_updates=base_updates[0])
    return mean_stats, sds


def make_learners(
    spec: PodSpec,
    obs_dim: int,
    action_dim: int,
    devices: Sequence[torch.device],
    parent: bytes | None,
    parent_buffer: dict[str, Any] | None = None,
) -> list[Any]:
    """One agent per device with the spec's hyperparameters, all starting from the
    parent's checkpoint bytes (and, for off-policy agents, its replay buffer when given);
    learner 0 is on ``devices[0]``, its twins copy its state onto their own devices."""

    agent = make_agent(spec.algorithm, spec.hparams, obs_dim, action_dim, devices[0], spec.seed)
    if parent is not None:
        agent.load_state_dict(state_from_checkpoint_bytes(parent))
        # The parent's RNG stream is not inherited: siblings must explore differently.
        agent.generator.manual_seed(spec.seed)
    learners = [agent]
    for dev in devices[1:]:
        twin = make_agent(spec.algorithm, spec.hparams, obs_dim, action_dim, dev, spec.seed)
        twin.load_state_dict(state_on(agent.state_dict(), dev))
        learners.append(twin)
    if parent_buffer is not None and hasattr(agent, "import_buffer"):
        for learner in learners:
            learner.import_buffer(parent_buffer)
    return learners


def state_on(sd: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """``sd`` with floating and integer tensors on ``device`` (RNG states stay on the host)."""
    return {k: v if k.startswith("rng.") else v.to(device) for k, v in sd.items()}
