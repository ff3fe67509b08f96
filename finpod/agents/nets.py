"""Networks shared by every algorithm: MLPs with orthogonal init, actors and critics.

All modules take observations ``(B, obs_dim) float32`` and work on any device; actions
live in ``[-1, 1]^action_dim`` (the env scales them).
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
    """State-independent-std Gaussian policy for on-policy agents (PPO, A2C).

    ``forward(obs) -> (mean, log_std)``, both ``(B, action_dim)``. Samples are clipped
    to ``[-1, 1]`` by the caller before reaching the env; log-probabilities are taken of
    the unclipped sample, as in the PPO reference implementations.
    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: Sequence[int], log_std_init: float
    ) -> None:
        super().__init__()
        self.mean = mlp(obs_dim, hidden, action_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.mean(obs)
        return mean, self.log_std.expand_as(mean)


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
    """Tanh-squashed Gaussian policy for SAC: actions in ``(-1, 1)`` with exact log-probs."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.body = mlp(obs_dim, hidden[:-1], hidden[-1], activation=nn.ReLU)
        self.act = nn.ReLU()
        self.mean = _ortho(nn.Linear(hidden[-1], action_dim), 0.01)
        self.log_std = _ortho(nn.Linear(hidden[-1], action_dim), 0.01)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.act(self.body(obs))
        # Under autocast the layers run in lower precision, the density math does not.
        log_std = torch.tanh(self.log_std(h).to(obs.dtype))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)
        return self.mean(h).to(obs.dtype), log_std

    def sample(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample ``(B, action_dim)`` and its log-probability ``(B,)``."""
        mean, log_std = self(obs)
        noise = torch.randn(mean.shape, device=mean.device, generator=generator)
        pre = mean + noise * log_std.exp()
        action = torch.tanh(pre)
        # log|d tanh/dx| = 2 (log 2 - x - softplus(-2x)), the numerically stable form.
        correction = 2.0 * (math.log(2.0) - pre - nn.functional.softplus(-2.0 * pre))
        log_prob = gaussian_log_prob(pre, mean, log_std) - correction.sum(-1)
        return action, log_prob


class DeterministicActor(nn.Module):
    """``tanh(mlp(obs))`` for TD3 and DDPG: ``(B, action_dim)`` in ``(-1, 1)``."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, action_dim, activation=nn.ReLU, out_gain=0.01)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs).to(obs.dtype))


class QCritic(nn.Module):
    """``Q(obs, action) -> (B,)``: an MLP on ``[obs, action]``.

    The first layer is applied as ``W_obs · obs + W_action · action + b`` (the two column
    blocks of one ``(hidden[0], obs_dim + action_dim)`` weight), which is the same function
    as the layer on the concatenation without copying ``obs`` into a new tensor, and whose
    backward computes the input gradient only for what needs one: the actor's loss needs
    ∂Q/∂action ``(B, action_dim)``, never ∂Q/∂obs ``(B, obs_dim)``.
    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.obs_dim = int(obs_dim)
        self.net = mlp(obs_dim + action_dim, hidden, 1, activation=nn.ReLU)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        first = self.net[0]
        w = first.weight
        h = nn.functional.linear(obs, w[:, : self.obs_dim], first.bias)
        h = h + nn.functional.linear(action, w[:, self.obs_dim :])
        for i, layer in enumerate(self.net):
            if i:
                h = layer(h)
        return h.squeeze(-1).to(obs.dtype)


class VCritic(nn.Module):
    """``V(obs) -> (B,)``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)
