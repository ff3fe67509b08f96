"""``VecEnv``: what finpod's agents ask of a vectorized environment.

The agents (:mod:`finpod.agents`) train on anything with these attributes and methods:
:class:`finpod.env.VecTradingEnv` (the trading MDP) and
:class:`finpod.agents.gym_adapter.GymVecEnv` (any gymnasium env with Box actions). Every
tensor is batched over envs and lives on ``device``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from finpod.env.config import EnvConfig

if TYPE_CHECKING:
    from finpod.env.tables import ObsLayout

#: ``step``'s answer: ``(obs, reward, terminated, truncated, info)``.
StepResult = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]


@runtime_checkable
class VecEnv(Protocol):
    """``num_envs`` environments stepped together with torch tensors.

    ``isinstance(env, VecEnv)`` checks that the attributes and methods exist (not their
    types; see the attribute docstrings for those).
    """

    num_envs: int
    """E: environments stepped together."""
    obs_dim: int
    """Length of one env's flat float32 observation."""
    action_dim: int
    """Length of one env's action; actions are in ``[-1, 1]``."""
    device: torch.device
    """Where the tensors ``reset`` and ``step`` return live."""

    @property
    def config(self) -> EnvConfig | None:
        """The env's settings, recorded with every checkpoint trained on it
        (:func:`finpod.agents.train.train`); None for an env without finpod settings
        (a gymnasium env)."""
        ...

    @property
    def action_mode(self) -> str | None:
        """How an action is read: one of :data:`finpod.env.config.ACTION_MODES`
        (``"shares"``, ``"weights"``, ``"active"``: tilts around a reference portfolio);
        None for an env without finpod settings (a gymnasium env)."""
        ...

    @property
    def layout(self) -> ObsLayout | None:
        """The named slices of the observation (:class:`finpod.env.ObsLayout`: per-env
        values, then per-ticker holdings, prices and features); None for an observation
        without per-ticker parts (a gymnasium env)."""
        ...

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start every env; returns obs ``(num_envs, obs_dim)`` float32."""
        ...

    def step(self, action: torch.Tensor) -> StepResult:
        """One step of every env with ``action (num_envs, action_dim)`` in ``[-1, 1]``.

        Returns ``obs (E, obs_dim)`` float32 (after any automatic reset), ``reward (E,)``,
        ``terminated (E,)`` and ``truncated (E,)`` bool, and ``info``; ``info["final_obs"]``
        (E, obs_dim) holds the last observation of each env whose episode just ended (the
        same tensor as ``obs`` when none did).
        """
        ...

    def close(self) -> None:
        """Release what the env holds (processes, buffers)."""
        ...
