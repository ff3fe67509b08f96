"""The hyperparameter search space, validated from a strategy's raw ``[search]`` table::

    [search]
    algorithms = ["ppo", "sac"]
    [search.ppo]
    learning_rate = { low = 1e-4, high = 1e-3, log = true }   # continuous range
    horizon = [64, 128, 256]                                  # choice
    ent_coef = 0.0                                            # fixed value

    [search.env]                                              # execution controls
    no_trade_band = { low = 0.0, high = 0.05 }                # continuous range
    decision_interval = [1, 5, 15]                            # choice
    turnover_penalty = { low = 0.0, high = 0.004 }

A fresh pod draws its algorithm uniformly from ``algorithms`` and each ranged or choice
hyperparameter from its declaration; a child pod keeps its parent's algorithm and
perturbs only the numeric ranged hyperparameters that may change on a live agent.

``[search.env]`` ranges over the execution controls
(:data:`finpod.env.config.EXECUTION_CONTROLS`: decision interval, no-trade band, partial
adjustment, turnover penalty, …) with the same syntax, on top of the strategy's ``[env]``
table. A fresh pod draws them; a child inherits its parent's and perturbs them
(:meth:`SearchSpace.perturb_env`). Other env fields are set once in ``[env]``: the cost model
(:data:`FIXED_ENV_FIELDS`: cost rate, slippage, fill price, capital) so that every pod is
scored under the same costs, and fields that change the observation's size so that a child
can load its parent's networks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from finpod.agents.base import OffPolicyAgent
from finpod.agents.hparams import build_hparams
from finpod.agents.registry import ALGORITHMS
from finpod.env import EnvConfig
from finpod.env.config import EXECUTION_CONTROLS
from finpod.errors import FinpodError
from finpod.tournament.params import ParamSpec, integer_fields, parse_param, sequence_fields

#: Env fields ``[search.env]`` refuses: the cost model and capital every pod must share, so
#: that scores are comparable, and fields that change the observation's size (a child must
#: load its parent's networks).
FIXED_ENV_FIELDS = {
    "cost_rate": "the cost model must be the same for every pod",
    "slippage": "the cost model must be the same for every pod",
    "cost_model": "the cost model must be the same for every pod",
    "impact_coefficient": "the cost model must be the same for every pod",
    "fill_price": "the cost model (the price orders fill at) must be the same for every pod",
    "initial_cash": "every pod is scored on the same capital",
    "calendar_features": "it changes the observation size, so children could not load "
    "their parent's networks",
    "user_features": "it changes the observation size, so children could not load "
    "their parent's networks",
}


@dataclass(frozen=True)
class AlgorithmSpace:
    """One algorithm of the search: its base hyperparameters and declared ranges."""

    algorithm: str
    """Registry name (``"ppo"``, ``"sac"``, …)."""
    base: dict[str, Any]
    """Hyperparameters every pod of this algorithm starts from (strategy ``[agent.hparams]``
    when the algorithms match, else the algorithm's defaults)."""
    params: tuple[ParamSpec, ...]
    """Declared ranges, choices and fixed values."""
    frozen: tuple[str, ...] = ()
    """Fields that fix network or storage shapes: drawn for fresh pods, never perturbed."""
    off_policy: bool = False
    """The agent keeps a replay buffer (its children may inherit it)."""

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """Hyperparameters of a fresh pod."""
        hp = dict(self.base)
        for spec in self.params:
            hp[spec.name] = spec.sample(rng)
        return hp

    def perturb(
        self, hparams: dict[str, Any], scale: float, rng: np.random.Generator
    ) -> dict[str, Any]:
        """A child's hyperparameters: each numeric ranged, non-frozen one times a random
        factor, clipped into its range; a non-frozen choice or fixed value the parent holds
        outside its declaration (the champion's own, e.g. one update epoch beside
        ``update_epochs = [2, 4]``) drawn from it, so every child lies in the declared
        space; other choices kept."""
        hp = dict(hparams)
        bound = math.log1p(scale)
        for spec in self.params:
            if spec.name in self.frozen or spec.name not in hp:
                continue
            if spec.kind in ("float", "int"):
                factor = math.exp(rng.uniform(-bound, bound)) if bound > 0 else 1.0
                hp[spec.name] = spec.perturb(hp[spec.name], factor)
            elif not spec.declares(hp[spec.name]):
                hp[spec.name] = spec.sample(rng)
        return hp


@dataclass(frozen=True)
class SearchSpace:
    """All algorithms a tournament may try, each with its hyperparameter declarations."""

    algorithms: dict[str, AlgorithmSpace]
    """Algorithm name → its space, in declaration order."""
    env: tuple[ParamSpec, ...] = ()
    """``[search.env]``: declared ranges, choices and fixed values of env fields."""
    base_algorithm: str | None = None
    """The strategy's own ``[agent]`` algorithm (its base hyperparameters are that
    algorithm's :attr:`AlgorithmSpace.base`)."""
    base_env: tuple[tuple[str, Any], ...] = ()
    """The strategy's own ``[env]`` value of each ``[search.env]`` field."""

    def base_pod(self) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        """(algorithm, hyperparameters, execution controls) of the strategy's own agent,
        unperturbed (None when its algorithm is not searched)."""
        if self.base_algorithm not in self.algorithms:
            return None
        algo = self.algorithms[self.base_algorithm]
        return self.base_algorithm, dict(algo.base), dict(self.base_env)

    def sample(self, rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        """(algorithm, hyperparameters) of a fresh pod: algorithm drawn uniformly."""
        names = list(self.algorithms)
        algo = names[int(rng.integers(len(names)))]
        return algo, self.algorithms[algo].sample(rng)

    def sample_env(self, rng: np.random.Generator) -> dict[str, Any]:
        """A fresh pod's execution controls: ``{field: value}`` for every ``[search.env]``
        declaration, to apply over the strategy's ``[env]`` table (``{}`` without one)."""
        return {spec.name: spec.sample(rng) for spec in self.env}

    def perturb_env(
        self, env: dict[str, Any], scale: float, rng: np.random.Generator
    ) -> dict[str, Any]:
        """A child's execution controls from its parent's ``env`` (same keys).

        - a range with ``log = true``: times a log-uniform factor in
          [1 / (1 + scale), 1 + scale], like hyperparameters;
        - a linear range: plus a uniform step in ±scale/2 × (high − low), so a control that
          starts at 0 (a band, a penalty) can move;
        - both clipped to the range; integer ranges stay integers;
        - a choice among numbers: kept, or re-drawn with probability scale / (1 + scale);
          other choices (text, true/false, lists) are kept;
        - a fixed value: kept;
        - a choice or fixed value the parent holds outside the declaration (the champion
          trades the strategy's own ``[env]``, e.g. every 63 sessions beside
          ``decision_interval = [5, 10, 21]``): drawn from it, so every child lies in the
          declared space (a range already clips its value into it).

        A declared field missing from ``env`` (a parent from before it was declared) is
        drawn fresh.
        """
        out = dict(env)
        for spec in self.env:
            if spec.name in out:
                out[spec.name] = spec.perturb_env(out[spec.name], scale, rng)
            else:
                out[spec.name] = spec.sample(rng)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``[search]`` table this space was built from, resolved."""
        out: dict[str, Any] = {"algorithms": list(self.algorithms)}
        for name, space in self.algorithms.items():
            out[name] = {spec.name: spec.to_dict() for spec in space.params}
        if self.env:
            out["env"] = {spec.name: spec.to_dict() for spec in self.env}
        return out


def parse_search(
    raw: dict[str, Any] | None,
    agent_algorithm: str,
    agent_hparams: dict[str, Any] | None = None,
    registry: dict[str, tuple[type, type]] | None = None,
    env_base: EnvConfig | Mapping[str, Any] | None = None,
) -> SearchSpace:
    """Validate a strategy's raw ``[search]`` table into a :class:`SearchSpace`.

    ``agent_algorithm``/``agent_hparams`` come from the strategy's ``[agent]`` table: they
    are the whole space when ``[search]`` is absent, and the base of that algorithm's pods
    otherwise. ``registry`` maps algorithm → (hyperparameter dataclass, agent class)
    (default :data:`finpod.agents.ALGORITHMS`); names and values are checked against it.
    ``env_base`` is the strategy's ``EnvConfig`` (or its raw ``[env]`` table):
    ``[search.env]`` values are checked by applying them to it at every range end and
    choice.
    """
    if registry is None:
        registry = ALGORITHMS
    raw = dict(raw or {})
    listed = raw.pop("algorithms", None)
    env_specs = parse_search_env(raw.pop("env", None), env_base)
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise FinpodError(
                f"search.{key} must be a table of hyperparameter ranges, got {value!r}",
                f"write [search.{key}] with lines like learning_rate = {{ low = 1e-4, high = 1e-3 }}",
            )
    if listed is None:
        listed = list(raw) or [agent_algorithm]
    if isinstance(listed, str):
        listed = [listed]
    if not isinstance(listed, list) or not listed or not all(isinstance(a, str) for a in listed):
        raise FinpodError(
            f"search.algorithms must be a list of algorithm names, got {listed!r}",
            'e.g. algorithms = ["ppo", "sac"]',
        )
    for name in [*listed, *raw]:
        if name not in registry:
            raise FinpodError(
                f"unknown algorithm {name!r} in [search]",
                f"choose among {', '.join(sorted(registry))}",
            )
    extra = sorted(set(raw) - set(listed))
    if extra:
        raise FinpodError(
            f"[search.{extra[0]}] is declared but {extra[0]!r} is not in search.algorithms",
            "add it to the list or remove the table",
        )
    spaces: dict[str, AlgorithmSpace] = {}
    for name in dict.fromkeys(listed):
        params_cls, agent_cls = registry[name]
        fields = {f.name for f in dataclasses.fields(params_cls)}
        base = dict(agent_hparams or {}) if name == agent_algorithm else {}
        sequences = sequence_fields(params_cls)
        specs = tuple(
            parse_param(name, key, value, fields, key in sequences, integer_fields(params_cls))
            for key, value in raw.get(name, {}).items()
        )
        space = AlgorithmSpace(
            algorithm=name,
            base=base,
            params=specs,
            frozen=tuple(getattr(agent_cls, "frozen_fields", ())),
            off_policy=is_off_policy(agent_cls),
        )
        _check_buildable(space, params_cls, name)
        spaces[name] = space
    base_env: tuple[tuple[str, Any], ...] = ()
    if env_base is not None and env_specs:
        values = env_base if isinstance(env_base, Mapping) else dataclasses.asdict(env_base)
        base_env = tuple(
            (spec.name, values[spec.name]) for spec in env_specs if spec.name in values
        )
    return SearchSpace(spaces, env=env_specs, base_algorithm=agent_algorithm, base_env=base_env)


def is_off_policy(agent_cls: type) -> bool:
    """Whether ``agent_cls`` is a replay-buffer agent."""

    return isinstance(agent_cls, type) and issubclass(agent_cls, OffPolicyAgent)


def pod_env_config(base: EnvConfig, controls: Mapping[str, Any] | None) -> EnvConfig:
    """The ``EnvConfig`` one pod trains and is scored with: the run's ``base`` with the
    pod's searched execution controls ``controls`` (``PodSpec.env``, ``Entry.env``) set,
    as a new config (``base`` itself when there are none).

    Raises :class:`FinpodError` if ``controls`` touches :data:`FIXED_ENV_FIELDS` with a
    value other than ``base``'s: every pod shares one cost model.
    """
    controls = dict(controls or {})
    _check_cost_model({k: getattr(base, k) for k in FIXED_ENV_FIELDS}, controls)
    return base.with_options(**controls)


def pod_env(base: Mapping[str, Any], controls: Mapping[str, Any] | None) -> dict[str, Any]:
    """:func:`pod_env_config` on the plain-data form: the run's recorded ``[env]`` table
    ``base`` with ``controls`` over it (same cost-model check)."""
    controls = dict(controls or {})
    _check_cost_model(base, controls)
    return {**base, **controls}


def _check_cost_model(base: Mapping[str, Any], controls: dict[str, Any]) -> None:
    for key, value in controls.items():
        if key in FIXED_ENV_FIELDS and base.get(key, value) != value:
            raise FinpodError(
                f"a pod's env sets {key} = {value!r} but the run's is {base.get(key)!r}: "
                f"{FIXED_ENV_FIELDS[key]}",
                "remove it from the pod's execution controls",
            )


def parse_search_env(
    raw: Any, env_base: EnvConfig | Mapping[str, Any] | None = None
) -> tuple[ParamSpec, ...]:
    """Validate ``[search.env]``: each key an execution control (read from
    :data:`~finpod.env.config.EXECUTION_CONTROLS`, so a new control is searchable as soon as
    it is listed there), each value a ``{low, high, log}`` range, a list of choices or a
    fixed value that gives a valid ``EnvConfig`` when applied to ``env_base``."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise FinpodError(
            f"search.env must be a table of env ranges, got {raw!r}",
            "write [search.env] with lines like no_trade_band = { low = 0.0, high = 0.05 }",
        )

    fields = {f.name for f in dataclasses.fields(EnvConfig)}
    controls = {name for name, _ in EXECUTION_CONTROLS}
    for key in raw:
        if key in FIXED_ENV_FIELDS:
            raise FinpodError(
                f"search.env.{key} cannot be searched: {FIXED_ENV_FIELDS[key]}",
                f"set {key} once in the strategy's [env] table",
            )
        if key in fields and key not in controls:
            raise FinpodError(
                f"search.env.{key} cannot be searched: it is not an execution control",
                f"set {key} once in the strategy's [env] table; [search.env] searches "
                f"{', '.join(sorted(controls))}",
            )
    sequences = sequence_fields(EnvConfig)
    # Drawn in name order, so the draws do not depend on how a TOML writer ordered the
    # table (a resumed run regenerates the same pods).
    specs = tuple(
        parse_param(
            "env",
            key,
            value,
            controls,
            key in sequences,
            integer_fields(EnvConfig),
        )
        for key, value in sorted(raw.items())
    )
    if not specs:
        return specs
    base = (
        env_base if isinstance(env_base, EnvConfig) else EnvConfig.from_dict(dict(env_base or {}))
    )
    for spec in specs:
        options = (
            [spec.value]
            if spec.kind == "fixed"
            else list(spec.choices)
            if spec.kind == "choice"
            else [spec._clip(spec.low), spec._clip(spec.high)]
        )
        for option in options:
            try:
                base.with_options(**{spec.name: option})
            except (TypeError, ValueError) as err:
                raise FinpodError(
                    f"search.env.{spec.name} = {option!r} is not a valid env setting: {err}",
                    "fix the range or choices",
                ) from err
    return specs


def _check_buildable(space: AlgorithmSpace, params_cls: type, algo: str) -> None:
    """Build the hyperparameter dataclass at the range ends so bad values fail now, not in a pod."""

    probes = [dict(space.base)]
    for spec in space.params:
        options: list[Any]
        if spec.kind == "fixed":
            options = [spec.value]
        elif spec.kind == "choice":
            options = list(spec.choices)
        else:
            options = [spec._clip(spec.low), spec._clip(spec.high)]
        for option in options:
            probes.append({**space.base, spec.name: option})
    for probe in probes:
        build_hparams(params_cls, probe, where=f"search.{algo}")
