"""Networks shared by every algorithm: MLPs with orthogonal init, actors and critics.

The modules here name and initialise a single agent's parameters (its flat state dict:
``"actor.mean.0.weight"`` …); they have no ``forward``. Each algorithm computes its
networks once, over a leading member axis, from those parameters stacked ``(K, …)``
(:mod:`finpod.agents.batched`, the populations of :mod:`finpod.agents.ppo`,
:mod:`finpod.agents.sac`, :mod:`finpod.agents.td3`), so a single agent is the case K = 1
and there is no second copy of the math to keep equal. Actions live in
``[-1, 1]^action_dim`` (the env scales them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    *,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
) -> nn.Sequential:
    """``in_dim → hidden[0] → … → out_dim`` with ``activation`` between layers.

    Hidden layers get orthogonal weights with gain √2 and zero biases (the PPO
    implementation-details recipe); the output layer gets gain ``out_gain``, so a small
    gain (0.01) makes a fresh policy start near the zero action.
    """
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [_ortho(nn.Linear(last, int(width)), math.sqrt(2.0)), activation()]
        last = int(width)
    layers.append(_ortho(nn.Linear(last, out_dim), out_gain))
    return nn.Sequential(*layers)


def _ortho(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class GaussianActor(nn.Module):
    """State-independent-std Gaussian policy for on-policy agents (PPO, A2C): the mean
    ``mlp(obs)`` (tanh between layers) and one learned ``log_std`` per action.

    Samples are clipped to ``[-1, 1]`` before reaching the env; log-probabilities are
    taken of the unclipped sample, as in the PPO reference implementations.
    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: Sequence[int], log_std_init: float
    ) -> None:
        super().__init__()
        self.mean = mlp(obs_dim, hidden, action_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Sum over the action axis of the diagonal Gaussian log-density: ``(B,)``."""
    var = torch.exp(2.0 * log_std)
    return (-((x - mean) ** 2) / (2.0 * var) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the action axis: ``(B,)``."""
    return (log_std + 0.5 * (1.0 + math.log(2.0 * math.pi))).sum(-1)


#: Bounds on the SAC actor's log standard deviation (pre-tanh), from the SAC reference code.
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class SquashedGaussianActor(nn.Module):
    """Tanh-squashed Gaussian policy for SAC: actions in ``(-1, 1)`` with exact log-probs.

    ``h = relu(body(obs))``; the pre-tanh mean is ``mean(h)`` and the log std
    ``tanh(log_std(h))`` mapped onto ``[LOG_STD_MIN, LOG_STD_MAX]``.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.body = mlp(obs_dim, hidden[:-1], hidden[-1], activation=nn.ReLU)
        self.mean = _ortho(nn.Linear(hidden[-1], action_dim), 0.01)
        self.log_std = _ortho(nn.Linear(hidden[-1], action_dim), 0.01)


class DeterministicActor(nn.Module):
    """``tanh(mlp(obs))`` for TD3 and DDPG: ``(B, action_dim)`` in ``(-1, 1)``."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, action_dim, activation=nn.ReLU, out_gain=0.01)


class QCritic(nn.Module):
    """``Q(obs, action)``: an MLP on ``[obs, action]`` (computed without building the
    concatenation by :func:`finpod.agents.batched.mlp_on_pair`)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim + action_dim, hidden, 1, activation=nn.ReLU)


class VCritic(nn.Module):
    """``V(obs)``: an MLP on the observation."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1)
