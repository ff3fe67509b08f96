"""What every agent shares: hyperparameter validation, the flat state dict, RNG, counters.

An algorithm module (``ppo.py``, ``sac.py``, …) subclasses :class:`Agent`, builds its
networks and optimizers in ``__init__`` and implements ``act`` and ``learn``. Everything
a checkpoint or a tournament needs is here, identical for all algorithms:

- ``state_dict()`` is flat ``{name: Tensor}`` in a fixed key order: each network's
  parameters (``"<net>.<param>"``), each Adam optimizer's moments and step
  (``"optim.<opt>.<i>.exp_avg"``, ``…exp_avg_sq``, ``…step``), the counters
  (``"counter.env_steps"``, ``"counter.updates"``, int64) and the sampling RNG
  (``"rng.state"``, uint8). Averaging the floating tensors of several agents' state dicts
  of the same algorithm and architecture is a valid agent (model fusion).
- One ``torch.Generator`` per agent drives every random draw (exploration noise,
  minibatch order, env reset seeds), so the same seed gives the same run on CPU and a
  restored state dict continues the same random stream.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from finpod.errors import FinpodError

if TYPE_CHECKING:
    from finpod.env.protocol import VecEnv


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


def make_adam(params: list[nn.Parameter], lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam whose moment state exists from the start, so the state dict has fixed keys."""
    opt = torch.optim.Adam(params, lr=lr, eps=eps)
    for p in params:
        opt.state[p] = {
            "step": torch.tensor(0.0),
            "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
            "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
        }
    return opt


class Agent:
    """Base of every algorithm. Subclasses set :attr:`nets`, :attr:`optims`, :attr:`lr_fields`.

    Attributes:
        algorithm: registry name (``"ppo"``, ``"sac"``, …).
        hparams: the algorithm's hyperparameter dataclass.
        obs_dim, action_dim: sizes of the observation and action vectors.
        device: where networks, storage and the generator live.
        seed: the seed the agent was built with.
        env_steps: env transitions collected so far (summed over parallel envs).
        updates: gradient steps taken so far.
    """

    algorithm: ClassVar[str] = ""
    #: Which hyperparameter sets the learning rate of which optimizer: ``{optim: field}``.
    lr_fields: ClassVar[dict[str, str]] = {}
    #: Hyperparameters fixed at construction (network shapes, storage sizes).
    frozen_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self, hparams: Any, obs_dim: int, action_dim: int, device: torch.device, seed: int
    ) -> None:
        self.hparams = hparams
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.device = torch.device(device)
        self.seed = int(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)
        self.env_steps = 0
        self.updates = 0
        #: Networks in state-dict order: ``{name: module}``.
        self.nets: dict[str, nn.Module] = {}
        #: Optimizers in state-dict order: ``{name: Adam}``.
        self.optims: dict[str, torch.optim.Optimizer] = {}
        self._env: VecEnv | None = None
        self._obs: torch.Tensor | None = None
        #: Running return of each env's current episode, for logging.
        self._ep_ret: torch.Tensor | None = None

    # ----- acting and learning (per algorithm) -------------------------------------------
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(B, action_dim)`` in ``[-1, 1]`` for observations ``(B, obs_dim)``."""
        raise NotImplementedError

    def learn(self, env: VecEnv, num_steps: int) -> dict[str, float]:
        """Collect at least ``num_steps`` env transitions from ``env`` and update on them.

        Returns the latest losses and statistics as floats (one host sync per call).
        """
        raise NotImplementedError

    # ----- rollout state ----------------------------------------------------------------
    def reset_rollout(self) -> None:
        """Forget the current env observation: the next ``learn`` resets the env.

        The reset seed is drawn from the agent's generator, so a run restored from a
        state dict and one that was never interrupted reset the env identically.
        """
        self._env = None
        self._obs = None
        self._ep_ret = None

    def _current_obs(self, env: VecEnv) -> torch.Tensor:
        if self._obs is None or env is not self._env:
            seed = int(
                torch.randint(0, 2**31 - 1, (1,), generator=self.generator, device=self.device)
            )
            self._env = env
            self._obs = env.reset(seed=seed).to(self.device, torch.float32)
        return self._obs

    def _episodes_begin(self, num_envs: int) -> None:
        """Start counting finished episodes for this ``learn`` call (device tensors only)."""
        if self._ep_ret is None or self._ep_ret.shape[0] != num_envs:
            self._ep_ret = torch.zeros(num_envs, device=self.device)
        self._ep_sum = torch.zeros((), device=self.device)
        self._ep_count = torch.zeros((), device=self.device)

    def _episodes_track(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Add one step's ``reward (num_envs,)``; ``done (num_envs,) float`` closes episodes."""
        self._ep_ret += reward
        self._ep_sum += (self._ep_ret * done).sum()
        self._ep_count += done.sum()
        self._ep_ret *= 1.0 - done

    def _episodes_stats(self) -> dict[str, float]:
        """Mean return of the episodes finished in this ``learn`` call (NaN if none)."""
        count = float(self._ep_count)
        mean = float(self._ep_sum) / count if count > 0 else float("nan")
        return {"episode_return": mean, "episodes": count}

    # ----- hyperparameters --------------------------------------------------------------
    def set_hparams(self, updates: dict[str, Any]) -> None:
        """Change hyperparameters in place; learning-rate fields also update the optimizers.

        Fields that fix network or storage shapes cannot change (FinpodError).
        """
        frozen = sorted(set(updates) & set(self.frozen_fields))
        if frozen:
            raise FinpodError(
                f"hyperparameter {frozen[0]!r} of {self.algorithm} cannot change after creation",
                "only optimisation and loss settings can be changed on a live agent",
            )
        merged = {**dataclasses.asdict(self.hparams), **updates}
        self.hparams = build_hparams(type(self.hparams), merged)
        for opt_name, field in self.lr_fields.items():
            for group in self.optims[opt_name].param_groups:
                group["lr"] = float(getattr(self.hparams, field))

    # ----- state ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, torch.Tensor]:
        """Flat ``{name: tensor}``: networks, optimizer moments, counters, RNG (see module doc)."""
        sd: dict[str, torch.Tensor] = {}
        for name, net in self.nets.items():
            for key, value in net.state_dict().items():
                sd[f"{name}.{key}"] = value.detach().clone()
        for name, opt in self.optims.items():
            params = [p for g in opt.param_groups for p in g["params"]]
            for i, p in enumerate(params):
                state = opt.state[p]
                sd[f"optim.{name}.{i}.exp_avg"] = state["exp_avg"].detach().clone()
                sd[f"optim.{name}.{i}.exp_avg_sq"] = state["exp_avg_sq"].detach().clone()
                sd[f"optim.{name}.{i}.step"] = (
                    torch.as_tensor(state["step"], dtype=torch.float32).detach().clone().reshape(())
                )
        sd["counter.env_steps"] = torch.tensor(self.env_steps, dtype=torch.int64)
        sd["counter.updates"] = torch.tensor(self.updates, dtype=torch.int64)
        sd["rng.state"] = self.generator.get_state().clone()
        return sd

    def load_state_dict(self, sd: dict[str, torch.Tensor]) -> None:
        """Restore everything :meth:`state_dict` returned (keys and shapes must match)."""
        expected = self.state_dict()
        missing = [k for k in expected if k not in sd]
        extra = [k for k in sd if k not in expected]
        if missing or extra:
            what = f"missing {missing[0]!r}" if missing else f"unexpected {extra[0]!r}"
            raise FinpodError(
                f"state dict does not fit this {self.algorithm} agent: {what}",
                "load it into an agent with the same algorithm and network sizes",
            )
        for k, v in expected.items():
            if tuple(sd[k].shape) != tuple(v.shape):
                raise FinpodError(
                    f"state dict tensor {k!r} has shape {tuple(sd[k].shape)}, expected {tuple(v.shape)}",
                    "load it into an agent with the same network sizes",
                )
        with torch.no_grad():
            for name, net in self.nets.items():
                prefix = f"{name}."
                net.load_state_dict(
                    {
                        k[len(prefix) :]: v.to(self.device)
                        for k, v in sd.items()
                        if k.startswith(prefix)
                    }
                )
            for name, opt in self.optims.items():
                params = [p for g in opt.param_groups for p in g["params"]]
                for i, p in enumerate(params):
                    state = opt.state[p]
                    state["exp_avg"].copy_(sd[f"optim.{name}.{i}.exp_avg"])
                    state["exp_avg_sq"].copy_(sd[f"optim.{name}.{i}.exp_avg_sq"])
                    state["step"] = (
                        sd[f"optim.{name}.{i}.step"].detach().to("cpu", torch.float32).clone()
                    )
        self.env_steps = int(sd["counter.env_steps"])
        self.updates = int(sd["counter.updates"])
        self.generator.set_state(sd["rng.state"].to("cpu", torch.uint8).clone())
        self._after_load()
        self.reset_rollout()

    def _after_load(self) -> None:
        """Hook for agents with derived state (e.g. target networks are in ``nets``)."""
