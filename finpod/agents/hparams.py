"""Hyperparameters: validated dataclasses, and the fields algorithms of one kind share.

:func:`build_hparams` turns a strategy's ``[agent.hparams]`` table into an algorithm's
dataclass with one readable error per bad key or value. :class:`OnPolicyParams` (PPO,
A2C) and :class:`OffPolicyParams` (SAC, TD3, DDPG) hold the fields each family shares,
so an algorithm's own dataclass lists only what is its own.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

from finpod.agents.cross_section import NETS
from finpod.errors import FinpodError


def build_hparams(cls: type, values: dict[str, Any] | None, *, where: str = "hparams") -> Any:
    """Instantiate the hyperparameter dataclass ``cls`` from ``values`` with validation.

    Unknown keys and values of the wrong type raise :class:`FinpodError` naming the key;
    ints are accepted for float fields and lists for tuple fields.
    """
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise FinpodError(
            f"unknown key {where}.{unknown[0]!r} for {cls.__name__}",
            f"valid keys: {', '.join(sorted(fields))}",
        )
    hints = typing.get_type_hints(cls)
    coerced = {k: _coerce(f"{where}.{k}", hints[k], v) for k, v in values.items()}
    try:
        return cls(**coerced)
    except (ValueError, TypeError) as err:
        raise FinpodError(f"bad value in {where}: {err}", "fix the value and retry") from err


def _coerce(key: str, hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _coerce(key, args[0], value)
    if hint is bool:
        if not isinstance(value, bool):
            raise FinpodError(f"{key} must be true or false, got {value!r}", "use true/false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FinpodError(f"{key} must be an integer, got {value!r}", "use e.g. 64")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FinpodError(f"{key} must be a number, got {value!r}", "use e.g. 0.001")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise FinpodError(f"{key} must be a string, got {value!r}", 'use e.g. "name"')
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
        ):
            raise FinpodError(
                f"{key} must be a list of positive integers, got {value!r}", "use e.g. [64, 64]"
            )
        return tuple(int(v) for v in value)
    return value


def check_positive(obj: Any, *names: str) -> None:
    """Raise ``ValueError`` naming the first field of ``obj`` among ``names`` that is ≤ 0."""
    for name in names:
        if getattr(obj, name) <= 0:
            raise ValueError(f"{name} must be > 0, got {getattr(obj, name)!r}")


def check_unit(obj: Any, *names: str) -> None:
    """Raise ``ValueError`` naming the first field of ``obj`` among ``names`` outside [0, 1]."""
    for name in names:
        if not 0.0 <= getattr(obj, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(obj, name)!r}")


def check_net(hp: Any) -> None:
    """``ValueError`` unless ``hp.net`` names a network family of :data:`NETS`."""
    if hp.net is not None and hp.net not in NETS:
        raise ValueError(f"net must be one of {', '.join(NETS)}, got {hp.net!r}")
    if hp.ticker_features is not None and hp.ticker_features < 0:
        raise ValueError(f"ticker_features must be ≥ 0, got {hp.ticker_features!r}")


@dataclass
class NetChoice:
    """The network family, shared by every algorithm."""

    net: str | None = None
    """Network family: ``"mlp"`` (one MLP over the whole observation) or
    ``"cross_sectional"`` (one network shared by every ticker, with pooled context; the
    hidden widths are then the per-ticker encoder's, see :mod:`finpod.agents.cross_section`).
    None: cross-sectional when built for a benchmark-relative env, else the MLP."""
    ticker_features: int | None = None
    """Features per ticker in the observation (cross-sectional nets; None = read from the
    observation's size, set automatically from the env when an agent is built for one)."""


@dataclass
class OnPolicyParams(NetChoice):
    """Fields PPO and A2C share (defaults: CleanRL's PPO)."""

    learning_rate: float = 3e-4
    """Adam step size for actor and critic."""
    horizon: int = 128
    """Rollout length per env between updates (steps)."""
    gamma: float = 0.99
    """Discount factor per step."""
    gae_lambda: float = 0.95
    """λ of generalised advantage estimation."""
    norm_adv: bool = True
    """Normalise advantages (within each minibatch for PPO, over the rollout for A2C)."""
    ent_coef: float = 0.0
    """Weight c_e of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight c_v of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the policy network."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the value network."""

    def __post_init__(self) -> None:
        check_net(self)
        check_positive(self, "learning_rate", "horizon", "max_grad_norm")
        check_unit(self, "gamma", "gae_lambda")


@dataclass
class OffPolicyParams(NetChoice):
    """Fields SAC, TD3 and DDPG share (defaults: CleanRL's TD3)."""

    actor_lr: float = 3e-4
    """Adam step size of the policy."""
    critic_lr: float = 3e-4
    """Adam step size of the Q networks."""
    gamma: float = 0.99
    """Discount factor per step."""
    tau: float = 0.005
    """Polyak rate of the target networks."""
    batch_size: int = 256
    """Transitions per gradient step."""
    buffer_size: int = 200_000
    """Replay capacity in transitions (float32 obs and next obs: ~1.8 GB at the 95-ticker
    sample's ~1,150 observation floats; the buffer refuses sizes that do not fit)."""
    learning_starts: int = 25_000
    """Env steps of uniform random actions before learning starts."""
    gradient_steps: int = 1
    """Gradient steps per vector env step."""
    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of the policy network."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden widths of each Q network."""

    def __post_init__(self) -> None:
        check_net(self)
        check_positive(self, "actor_lr", "critic_lr", "batch_size", "buffer_size")
        check_positive(self, "gradient_steps")
        check_unit(self, "gamma", "tau")
        if self.learning_starts < 0:
            raise ValueError("learning_starts must be ≥ 0")
