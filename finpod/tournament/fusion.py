"""Model fusion: average several learners' state dicts into one agent.

The learners of a pod start an epoch from the same state, train on separate shards, and at
the epoch's end their parameters *and optimizer moments* are averaged (Podracer's
"learner fusion"), instead of synchronising gradients every step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from finpod.errors import FinpodError


def fuse_state_dicts(state_dicts: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of every floating tensor; other tensors from the first learner.

    Floating tensors are network weights, Adam's ``exp_avg``/``exp_avg_sq`` and ``step``;
    the mean is taken in float64 and cast back, so it does not depend on the learners'
    order beyond rounding. Integer counters and RNG states are not averageable and are
    taken from ``state_dicts[0]`` (the caller fixes counters it wants summed). All dicts
    must have the same keys, shapes and dtypes.
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
        if ref.is_floating_point():
            acc = torch.zeros(ref.shape, dtype=torch.float64, device=ref.device)
            for t in tensors:
                acc += t.to(ref.device, torch.float64)
            fused[key] = (acc / len(tensors)).to(ref.dtype)
        else:
            fused[key] = ref.clone()
    return fused
