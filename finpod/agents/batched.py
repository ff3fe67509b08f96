"""Batched networks and optimizers: K members' parameters stacked on a leading member axis.

A population of K agents of one architecture keeps each parameter of the single agent as
one tensor with a leading member axis: a ``nn.Linear(in, out)`` becomes a weight
``(K, out, in)`` and a bias ``(K, out)``, and a layer is one batched matmul
(``torch.baddbmm``) over inputs ``(K, B, in)``. Parameters are named exactly as in the
single agent's flat state dict (``"actor.mean.0.weight"``), so member ``k``'s slice
``[k]`` *is* that agent's tensor.

:class:`BatchedAdam` is ``torch.optim.Adam`` (no weight decay, no AMSGrad) with a
learning rate, a step count and a bias correction per member, and
:func:`clip_grad_norm_` clips each member's global gradient norm on its own. Nothing
here loops over members; loops run over the (few) parameter tensors only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

#: Adam's moment decay rates (torch.optim.Adam's defaults, as in ``make_adam``).
BETAS = (0.9, 0.999)

Params = dict[str, torch.Tensor]


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A ``(K,)`` tensor shaped ``(K, 1, …, 1)`` to broadcast against ``like`` ``(K, …)``."""
    return v.reshape(v.shape[0], *([1] * (like.dim() - 1)))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x (K, B, in) @ weight (K, out, in)ᵀ + bias (K, out)`` → ``(K, B, out)``."""
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


def mlp(
    x: torch.Tensor,
    params: Params,
    prefix: str,
    depth: int,
    activation: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """K stacked :func:`finpod.agents.nets.mlp` networks on ``x (K, B, in)``.

    ``depth`` = number of linear layers (hidden widths + 1); their parameters are
    ``params[f"{prefix}.{2 i}.weight"]`` and ``….bias`` (the ``nn.Sequential`` indices of
    the single network, activations in between).
    """
    for i in range(depth):
        x = linear(x, params[f"{prefix}.{2 * i}.weight"], params[f"{prefix}.{2 * i}.bias"])
        if i < depth - 1:
            x = activation(x)
    return x


def mlp_on_pair(
    a: torch.Tensor,
    b: torch.Tensor,
    params: Params,
    prefix: str,
    depth: int,
    activation: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """:func:`mlp` on the concatenation ``[a, b]`` without building it: the first layer is
    ``W_a·a + W_b·b + bias`` (the two column blocks of one weight), the same function as
    the layer on the concatenation, whose backward computes an input gradient only for
    what needs one (a Q network's action, never its observation)."""
    w = params[f"{prefix}.0.weight"]
    d = a.shape[-1]
    x = torch.baddbmm(params[f"{prefix}.0.bias"].unsqueeze(1), a, w[:, :, :d].transpose(1, 2))
    x = x + torch.bmm(b, w[:, :, d:].transpose(1, 2))
    for i in range(1, depth):
        x = linear(
            activation(x), params[f"{prefix}.{2 * i}.weight"], params[f"{prefix}.{2 * i}.bias"]
        )
    return x


def clip_grad_norm_(grads: Sequence[torch.Tensor], max_norm: torch.Tensor) -> torch.Tensor:
    """Scale each member's gradients so that their global L2 norm is ≤ ``max_norm[k]``.

    ``grads``: tensors ``(K, …)``; ``max_norm``: ``(K,)``. Same math as
    ``torch.nn.utils.clip_grad_norm_`` applied to each member alone (coefficient
    ``max_norm / (norm + 1e-6)`` capped at 1). Returns the norms before clipping ``(K,)``.
    """
    k = max_norm.shape[0]
    norms = torch.stack([g.reshape(k, -1).norm(dim=1) for g in grads])  # (P, K)
    total = norms.norm(dim=0)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(_bcast(coef, g))
    return total


class BatchedAdam:
    """Adam over stacked parameters ``(K, …)``, one learning rate and step count per member.

    Matches ``torch.optim.Adam(params, lr, eps)`` run separately for each member: the
    same moment updates and bias corrections (computed in float64 from the step count, as
    the single-tensor Adam does on the host). ``lr`` is a ``(K,)`` float64 tensor held by
    reference, so changing it in place changes the step size. ``step(mask)`` updates only
    the members where ``mask (K,) bool`` is True (their parameters, moments and steps; the
    others are left exactly as they were).

    State per parameter ``i``: ``exp_avg[i]``, ``exp_avg_sq[i]`` (shaped like the
    parameter) and ``steps[i]`` ``(K,)`` float32 (the single optimizer's ``"step"``).
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: torch.Tensor, eps: float) -> None:
        self.params = list(params)
        self.lr = lr
        self.eps = float(eps)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        k = lr.shape[0]
        self.steps = [torch.zeros(k, device=lr.device) for _ in self.params]

    def zero_grad(self) -> None:
        """Drop the gradients (``set_to_none``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, mask: torch.Tensor | None = None) -> None:
        """One Adam step of every member (or of the members where ``mask`` is True)."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        params = [self.params[i] for i in live]
        grads = [p.grad for p in params]
        exp_avg = [self.exp_avg[i] for i in live]
        exp_avg_sq = [self.exp_avg_sq[i] for i in live]
        steps = [self.steps[i] for i in live]
        if mask is None:
            torch._foreach_add_(steps, 1.0)
            step_size, bc2_sqrt = self._corrections(steps, params)
            self._moments_(exp_avg, exp_avg_sq, grads)
            update = self._update(exp_avg, exp_avg_sq, step_size, bc2_sqrt)
            torch._foreach_sub_(params, update)
            return
        # Only the masked members step: compute every member's new state, keep theirs.
        ones = mask.to(params[0].dtype)
        new_steps = [step + ones for step in steps]
        step_size, bc2_sqrt = self._corrections(new_steps, params)
        new_avg = [m.clone() for m in exp_avg]
        new_avg_sq = [v.clone() for v in exp_avg_sq]
        self._moments_(new_avg, new_avg_sq, grads)
        update = self._update(new_avg, new_avg_sq, step_size, bc2_sqrt)
        new_params = torch._foreach_sub(params, update)
        for olds, news in (
            (exp_avg, new_avg),
            (exp_avg_sq, new_avg_sq),
            (params, new_params),
            (steps, new_steps),
        ):
            for old, new in zip(olds, news, strict=True):
                old.copy_(torch.where(_bcast(mask, old), new, old))

    def _corrections(
        self, steps: list[torch.Tensor], params: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per parameter, shaped to broadcast against it: the step size ``lr / (1 − β₁ᵗ)``
        and ``√(1 − β₂ᵗ)``, from the step counts ``t`` (computed in float64 for all
        parameters at once, then cast to the parameters' dtype)."""
        beta1, beta2 = BETAS
        s64 = torch.stack(steps).double()  # (P, K)
        dtype = params[0].dtype
        step_size = (self.lr / (1.0 - beta1**s64)).to(dtype)
        bc2_sqrt = (1.0 - beta2**s64).sqrt().to(dtype)
        return (
            [_bcast(row, p) for row, p in zip(step_size, params, strict=True)],
            [_bcast(row, p) for row, p in zip(bc2_sqrt, params, strict=True)],
        )

    @staticmethod
    def _moments_(
        exp_avg: list[torch.Tensor], exp_avg_sq: list[torch.Tensor], grads: list[torch.Tensor]
    ) -> None:
        """``m ← β₁m + (1 − β₁)g``, ``v ← β₂v + (1 − β₂)g²`` in place, every parameter."""
        beta1, beta2 = BETAS
        torch._foreach_lerp_(exp_avg, grads, 1.0 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1.0 - beta2)

    def _update(
        self,
        exp_avg: list[torch.Tensor],
        exp_avg_sq: list[torch.Tensor],
        step_size: list[torch.Tensor],
        bc2_sqrt: list[torch.Tensor],
    ) -> list[torch.Tensor]:
        """What each parameter loses: ``step_size · m / (√v / √(1 − β₂ᵗ) + eps)``."""
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, self.eps)
        update = torch._foreach_div(exp_avg, denom)
        torch._foreach_mul_(update, step_size)
        return update


def polyak_(target: Params, source: Params, names: Sequence[tuple[str, str]], tau: torch.Tensor):
    """``target ← (1 − τ_k)·target + τ_k·source`` member-wise for each ``(target, source)``
    name pair; ``tau`` ``(K,)``."""
    with torch.no_grad():
        for t_name, s_name in names:
            t = target[t_name]
            t.lerp_(source[s_name], _bcast(tau, t))


def gather_rows(data: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``data (K, n, …)`` rows ``ids (K, b)`` of each member → ``(K, b, …)``.

    One ``index_select`` over the flattened ``(K·n, …)`` rows (a view of contiguous
    storage): on a CPU about twice as fast as advanced indexing ``data[rows, ids]`` for
    wide rows (observations), the same values.
    """
    k, n = data.shape[:2]
    offsets = _bcast(torch.arange(k, device=data.device) * n, ids)
    flat = data.flatten(0, 1).index_select(0, (ids + offsets).reshape(-1))
    return flat.view(*ids.shape, *data.shape[2:])
