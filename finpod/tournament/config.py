"""Tournament knobs and the hyperparameter search space, validated from a strategy's raw tables.

A strategy file hands the tournament two raw TOML tables::

    [tournament]
    pods = "auto"            # concurrent pods: "auto" (as many as the cluster fits) or N
    budget = "30m"           # "90s" / "30m" / "2h", "2e6 steps", or "40 pods"
    mode = "async"           # "async" or "generational"
    pod_steps = 50_000       # env steps one pod trains for (all its learners together)
    epochs = 4               # validation checkpoints (and learner fusions) per pod
    num_learners = 1         # L: learners per pod, fused (averaged) after every epoch
    cpus_per_pod = 1.0       # ≥ num_learners: each learner is a thread with ≥ 1 core
    gpus_per_pod = 0.25      # fractional GPUs share one device between pods (L = 1);
                             # with L > 1, gpus_per_pod = L puts each learner on its own GPU
    inherit_buffer = "auto"  # off-policy children start from their parent's replay buffer:
                             # true, false, or "auto" (when top_k buffers fit in memory)

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

``[search.env]`` ranges over fields of :class:`finpod.env.EnvConfig` (the execution
controls: decision interval, no-trade band, partial adjustment, turnover penalty, …) with
the same syntax, on top of the strategy's ``[env]`` table. A fresh pod draws them; a child
inherits its parent's and perturbs them (:meth:`SearchSpace.perturb_env`). The cost model
(:data:`FIXED_ENV_FIELDS`: cost rate, slippage, fill price, capital) and fields that change
the observation's size cannot be searched: every pod is scored under the same costs.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from finpod.errors import FinpodError
from finpod.scores import SCORES

MODES = ("async", "generational")
INHERIT_BUFFER = (True, False, "auto")
#: Env fields ``[search.env]`` refuses: the cost model and capital every pod must share, so
#: that scores are comparable, and fields that change the observation's size (a child must
#: load its parent's networks).
FIXED_ENV_FIELDS = {
    "cost_rate": "the cost model must be the same for every pod",
    "slippage": "the cost model must be the same for every pod",
    "fill_price": "the cost model (the price orders fill at) must be the same for every pod",
    "initial_cash": "every pod is scored on the same capital",
    "calendar_features": "it changes the observation size, so children could not load "
    "their parent's networks",
}
#: ``inherit_buffer = "auto"``: share of a node's memory that ``top_k`` replay buffers (the
#: leaderboard's, kept in the object store for children) may take.
INHERIT_BUFFER_MEMORY_SHARE = 0.25
BUDGET_KINDS = ("time", "steps", "pods")

_TIME_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_BUDGET_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?:([kMG])\s+)?([a-zA-Z]*)\s*$"
)
#: Multipliers of a count budget ("16M steps", "500k steps"); "m" alone means minutes.
_COUNT_SCALE = {"k": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Budget:
    """How long the whole tournament runs."""

    kind: str
    """``"time"`` (wall seconds), ``"steps"`` (env steps summed over pods) or ``"pods"``
    (pods trained and evaluated)."""
    amount: float
    """Seconds, env steps or pods, by ``kind``."""

    def __str__(self) -> str:
        if self.kind == "time":
            return f"{self.amount:g}s"
        return f"{int(self.amount)} {self.kind}"


def parse_budget(text: str | int | float) -> Budget:
    """``"90s"``, ``"30m"``, ``"2h"`` → wall time; ``"2e6 steps"``, ``"16M steps"``,
    ``"500k steps"`` → env steps; ``"40 pods"``.

    A bare number is seconds.
    """
    if isinstance(text, bool):
        raise FinpodError(f"budget {text!r} is not a duration or count", 'use e.g. "30m"')
    if isinstance(text, (int, float)):
        text = f"{text}s"
    match = _BUDGET_RE.match(str(text))
    if match is None:
        raise FinpodError(
            f"budget {text!r} is not understood", 'use e.g. "30m", "2h", "1e6 steps" or "40 pods"'
        )
    amount, scale, unit = float(match.group(1)), match.group(2), match.group(3).lower()
    if scale is not None:
        if unit not in ("step", "steps", "pod", "pods"):
            raise FinpodError(
                f"budget {text!r}: {scale} scales counts only", 'use e.g. "16M steps" or "30m"'
            )
        amount *= _COUNT_SCALE[scale]
    if unit in ("", *_TIME_UNITS):
        budget = Budget("time", amount * _TIME_UNITS.get(unit, 1.0))
    elif unit in ("step", "steps"):
        budget = Budget("steps", float(int(amount)))
    elif unit in ("pod", "pods"):
        budget = Budget("pods", float(int(amount)))
    else:
        raise FinpodError(
            f"budget unit {unit!r} in {text!r} is not known",
            "use s, m, h (wall time), steps or pods",
        )
    if budget.amount <= 0:
        raise FinpodError(f"budget {text!r} must be positive", 'use e.g. "30m"')
    return budget


@dataclass
class TournamentConfig:
    """Everything that shapes a tournament run (the strategy's ``[tournament]`` table)."""

    pods: int | None = None
    """Most pods training at once; ``None`` ("auto") = as many as the cluster's resources fit,
    re-checked as pods finish and nodes come and go."""
    budget: Budget = field(default_factory=lambda: Budget("time", 600.0))
    """When the run stops (wall time, env steps or pods trained)."""
    mode: str = "async"
    """``"async"``: the pool refills as each pod finishes; ``"generational"``: synchronous
    generations, the top ``keep_fraction`` continues and the rest are perturbed copies."""
    top_k: int = 10
    """Leaderboard size."""
    ensemble: int = 3
    """Size of the leaderboard ensemble (the mean target weights of the top ``ensemble``
    entries) scored on validation at the end of the run: a candidate like any pod, counted
    in N for the Deflated Sharpe and PBO, and selected when it beats the best entry
    (:mod:`finpod.tournament.ensemble`). 0 = no ensemble; otherwise ≥ 2 (at most the
    ``top_k`` entries on the board are used)."""
    score: str = "sharpe"
    """Validation score ranking the leaderboard: sharpe | sortino | calmar | return."""
    pod_steps: int = 50_000
    """Env steps one pod trains for, summed over its learners."""
    pod_seconds: float | None = None
    """Optional wall-time cap of one pod in seconds (checked at epoch ends)."""
    epochs: int = 4
    """Epochs per pod: after each, learners are fused and the pod scored on validation."""
    num_envs: int | None = None
    """W: vectorized envs per learner; ``None`` = the strategy's ``[train] num_envs``."""
    num_learners: int = 1
    """L: learners per pod, each on its own shard of env seeds and start windows."""
    population: int = 1
    """K: pods (members) one pod actor trains at once as one batched model: their networks
    stacked on a member axis, one env of K × W envs, per-member hyperparameters and Adam.
    The K members of a population share the algorithm, the network architecture and the
    execution controls; each is still a pod (own id, score, checkpoint, leaderboard entry).
    1 = one pod per actor."""
    cpus_per_pod: float = 1.0
    """Ray CPUs reserved by one pod (fractional allowed)."""
    gpus_per_pod: float | None = None
    """Ray GPUs reserved by one pod (fractions share a GPU); ``None`` = 1 when training on
    CUDA, else 0."""
    epsilon: float = 0.2
    """Probability that a new pod starts from scratch once the leaderboard is warm."""
    fresh_pods: int = 4
    """New pods start from scratch until the leaderboard holds this many entries."""
    perturb: float = 0.25
    """Children multiply each numeric ranged hyperparameter by a log-uniform factor in
    [1 / (1 + perturb), 1 + perturb], clipped to its range."""
    keep_fraction: float = 0.25
    """Generational mode: share of a generation that survives into the next."""
    generation_size: int | None = None
    """Generational mode: pods per generation; ``None`` = the pool size."""
    max_failures: int = 8
    """Consecutive pod failures (crashes, errors) after which the run stops with an error."""
    inherit_buffer: bool | str = "auto"
    """Whether a child of an off-policy parent (SAC, TD3, DDPG) starts from a copy of its
    parent's replay buffer, passed through the Ray object store: ``true``, ``false``, or
    ``"auto"`` = only when :func:`inherit_buffer_fits` (``top_k`` buffers at capacity take
    at most :data:`INHERIT_BUFFER_MEMORY_SHARE` of a node's memory)."""

    def validate(self) -> TournamentConfig:
        """Raise :class:`FinpodError` naming the first bad field; return ``self``."""

        def bad(name: str, why: str, hint: str) -> FinpodError:
            return FinpodError(f"tournament.{name} {why}", hint)

        if self.pods is not None and self.pods < 1:
            raise bad("pods", f'must be ≥ 1 or "auto", got {self.pods}', 'e.g. pods = "auto"')
        if self.mode not in MODES:
            raise bad(
                "mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}", 'e.g. "async"'
            )
        if self.score not in SCORES:
            raise bad(
                "score", f"must be one of {', '.join(SCORES)}, got {self.score!r}", "e.g. sharpe"
            )
        for name in (
            "top_k",
            "pod_steps",
            "epochs",
            "num_learners",
            "population",
            "fresh_pods",
            "max_failures",
        ):
            value = getattr(self, name)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < (0 if name == "fresh_pods" else 1)
            ):
                raise bad(name, f"must be a positive integer, got {value!r}", "fix the value")
        if (
            not isinstance(self.ensemble, int)
            or isinstance(self.ensemble, bool)
            or self.ensemble == 1
            or self.ensemble < 0
        ):
            raise bad(
                "ensemble",
                f"must be 0 (none) or ≥ 2 members, got {self.ensemble!r}",
                "e.g. ensemble = 3",
            )
        if self.num_envs is not None and self.num_envs < 1:
            raise bad("num_envs", f"must be ≥ 1, got {self.num_envs}", "e.g. num_envs = 16")
        if self.generation_size is not None and self.generation_size < 1:
            raise bad("generation_size", f"must be ≥ 1, got {self.generation_size}", "e.g. 8")
        if not self.cpus_per_pod > 0:
            raise bad("cpus_per_pod", f"must be > 0, got {self.cpus_per_pod}", "e.g. 1.0")
        if self.gpus_per_pod is not None and self.gpus_per_pod < 0:
            raise bad("gpus_per_pod", f"must be ≥ 0, got {self.gpus_per_pod}", "e.g. 0.25")
        if self.gpus_per_pod is not None and self.gpus_per_pod > 1 and self.gpus_per_pod % 1:
            raise bad("gpus_per_pod", "above 1 must be a whole number", "e.g. 2 or 0.5")
        if self.population > 1 and self.num_learners > 1:
            raise bad(
                "population",
                f"({self.population}) > 1 needs num_learners = 1 (got {self.num_learners}): "
                "a population is one batched learner",
                "set num_learners = 1, or population = 1 for fused learners",
            )
        if self.cpus_per_pod < self.num_learners:
            raise bad(
                "cpus_per_pod",
                f"({self.cpus_per_pod:g}) must be ≥ num_learners ({self.num_learners}): "
                "each learner trains in its own thread",
                f"set cpus_per_pod = {self.num_learners} or lower num_learners",
            )
        gpus = self.gpus_per_pod
        if gpus is not None and self.num_learners > 1 and 1 < gpus < self.num_learners:
            raise bad(
                "gpus_per_pod",
                f"({gpus:g}) must be ≤ 1 (learners share one GPU) or ≥ num_learners "
                f"({self.num_learners}, one GPU per learner)",
                f"set gpus_per_pod = {self.num_learners}",
            )
        if self.inherit_buffer not in INHERIT_BUFFER or (
            isinstance(self.inherit_buffer, int) and not isinstance(self.inherit_buffer, bool)
        ):
            raise bad(
                "inherit_buffer",
                f'must be true, false or "auto", got {self.inherit_buffer!r}',
                'e.g. inherit_buffer = "auto"',
            )
        if self.pod_seconds is not None and not self.pod_seconds > 0:
            raise bad("pod_seconds", f"must be > 0, got {self.pod_seconds}", "e.g. 120")
        for name in ("epsilon", "keep_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise bad(name, f"must be in [0, 1], got {value}", "e.g. 0.2")
        if not 0.0 <= self.perturb <= 10.0:
            raise bad("perturb", f"must be in [0, 10], got {self.perturb}", "e.g. 0.25")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain TOML/JSON-ready values (``None`` fields left out, budget as text)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        out["budget"] = str(self.budget)
        out["pods"] = "auto" if self.pods is None else self.pods
        return out


def parse_tournament(raw: dict[str, Any] | None) -> TournamentConfig:
    """Validate a strategy's raw ``[tournament]`` table (unknown key → FinpodError)."""
    raw = dict(raw or {})
    names = {f.name for f in dataclasses.fields(TournamentConfig)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise FinpodError(
            f"unknown key tournament.{unknown[0]!r} in the strategy",
            f"valid keys: {', '.join(sorted(names))}",
        )
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "budget":
            values[key] = parse_budget(value)
        elif key == "pods":
            values[key] = parse_pods(value)
        elif key in (
            "cpus_per_pod",
            "gpus_per_pod",
            "epsilon",
            "perturb",
            "keep_fraction",
            "pod_seconds",
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FinpodError(f"tournament.{key} must be a number, got {value!r}", "e.g. 0.5")
            values[key] = float(value)
        elif key == "inherit_buffer":
            values[key] = value
        elif key in ("mode", "score"):
            if not isinstance(value, str):
                raise FinpodError(
                    f"tournament.{key} must be a string, got {value!r}", 'e.g. "async"'
                )
            values[key] = value
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise FinpodError(f"tournament.{key} must be an integer, got {value!r}", "e.g. 4")
            values[key] = value
    return TournamentConfig(**values).validate()


def inherit_buffer_fits(
    setting: bool | str, buffer_bytes: int, top_k: int, memory_bytes: int | None = None
) -> bool:
    """Whether pods pass their replay buffers to their children under ``setting``.

    ``True``/``False`` decide; ``"auto"`` inherits when the leaderboard's ``top_k`` buffers
    of ``buffer_bytes`` each (what the driver keeps in the object store for children)
    take at most :data:`INHERIT_BUFFER_MEMORY_SHARE` of ``memory_bytes`` (default: this
    node's total RAM).
    """
    if isinstance(setting, bool):
        return setting
    if memory_bytes is None:
        import psutil

        memory_bytes = int(psutil.virtual_memory().total)
    return top_k * int(buffer_bytes) <= INHERIT_BUFFER_MEMORY_SHARE * memory_bytes


def parse_pods(value: str | int | None) -> int | None:
    """``"auto"``/``None`` → ``None``; a positive integer (or its text) → that integer."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        pods = int(value)
    except (TypeError, ValueError) as err:
        raise FinpodError(
            f'pods must be "auto" or a positive integer, got {value!r}', "e.g. --pods 4"
        ) from err
    if isinstance(value, bool) or pods < 1 or (isinstance(value, float) and value != pods):
        raise FinpodError(
            f'pods must be "auto" or a positive integer, got {value!r}', "e.g. --pods 4"
        )
    return pods


# ----- search space ------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamSpec:
    """How one hyperparameter is drawn for a fresh pod and perturbed in a child."""

    name: str
    """Hyperparameter field name."""
    kind: str
    """``"float"`` or ``"int"`` (a range), ``"choice"`` (a list) or ``"fixed"`` (one value)."""
    low: float | None = None
    """Lower bound of a range (inclusive)."""
    high: float | None = None
    """Upper bound of a range (inclusive)."""
    log: bool = False
    """Draw a range log-uniformly (for scale parameters such as learning rates)."""
    choices: tuple[Any, ...] = ()
    """Options of a ``"choice"`` parameter."""
    value: Any = None
    """The value of a ``"fixed"`` parameter."""

    def sample(self, rng: np.random.Generator) -> Any:
        """A value for a fresh pod."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "choice":
            return self.choices[int(rng.integers(len(self.choices)))]
        assert self.low is not None and self.high is not None
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        return self._clip(x)

    def perturb(self, value: Any, factor: float) -> Any:
        """``value · factor`` clipped into the range (ints rounded); other kinds unchanged."""
        if self.kind not in ("float", "int"):
            return value
        return self._clip(float(value) * factor)

    def perturb_env(self, value: Any, scale: float, rng: np.random.Generator) -> Any:
        """A child's value of an execution control (see :meth:`SearchSpace.perturb_env`)."""
        if self.kind in ("float", "int"):
            assert self.low is not None and self.high is not None
            if self.log:
                bound = math.log1p(scale)
                factor = math.exp(rng.uniform(-bound, bound)) if bound > 0 else 1.0
                return self._clip(float(value) * factor)
            step = 0.5 * scale * (self.high - self.low)
            return self._clip(float(value) + rng.uniform(-step, step))
        if (
            self.kind == "choice"
            and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices)
            and rng.random() < scale / (1.0 + scale)
        ):
            return self.sample(rng)
        return value

    def to_dict(self) -> Any:
        """The declaration as written in a strategy table."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "choice":
            return list(self.choices)
        return {"low": self.low, "high": self.high, "log": self.log}

    def _clip(self, x: float) -> Any:
        assert self.low is not None and self.high is not None
        x = min(max(x, self.low), self.high)
        return int(round(x)) if self.kind == "int" else float(x)


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
        """A child's hyperparameters: each numeric ranged, non-frozen one times a random factor."""
        hp = dict(hparams)
        bound = math.log1p(scale)
        for spec in self.params:
            if spec.kind in ("float", "int") and spec.name not in self.frozen and spec.name in hp:
                factor = math.exp(rng.uniform(-bound, bound)) if bound > 0 else 1.0
                hp[spec.name] = spec.perturb(hp[spec.name], factor)
        return hp


@dataclass(frozen=True)
class SearchSpace:
    """All algorithms a tournament may try, each with its hyperparameter declarations."""

    algorithms: dict[str, AlgorithmSpace]
    """Algorithm name → its space, in declaration order."""
    env: tuple[ParamSpec, ...] = ()
    """``[search.env]``: declared ranges, choices and fixed values of env fields."""

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
        - a fixed value: kept.

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
    env_base: dict[str, Any] | None = None,
) -> SearchSpace:
    """Validate a strategy's raw ``[search]`` table into a :class:`SearchSpace`.

    ``agent_algorithm``/``agent_hparams`` come from the strategy's ``[agent]`` table: they
    are the whole space when ``[search]`` is absent, and the base of that algorithm's pods
    otherwise. ``registry`` maps algorithm → (hyperparameter dataclass, agent class)
    (default :data:`finpod.agents.ALGORITHMS`); names and values are checked against it.
    ``env_base`` is the strategy's ``[env]`` table: ``[search.env]`` values are checked by
    building an ``EnvConfig`` over it at every range end and choice.
    """
    if registry is None:
        from finpod.agents import ALGORITHMS as registry  # noqa: N811
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
        sequences = _sequence_fields(params_cls)
        specs = tuple(
            _parse_param(name, key, value, fields, key in sequences, _int_fields(params_cls))
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
    return SearchSpace(spaces, env=env_specs)


def is_off_policy(agent_cls: type) -> bool:
    """Whether ``agent_cls`` is a replay-buffer agent."""
    from finpod.agents.offpolicy import OffPolicyAgent

    return isinstance(agent_cls, type) and issubclass(agent_cls, OffPolicyAgent)


def pod_env(base: dict[str, Any], controls: dict[str, Any] | None) -> dict[str, Any]:
    """The env settings one pod trains and is scored with: the run's ``[env]`` table
    ``base`` with the pod's searched execution controls ``controls`` (``PodSpec.env``,
    ``Entry.env``) over it, ready for ``EnvConfig.from_dict``.

    Raises :class:`FinpodError` if ``controls`` touches :data:`FIXED_ENV_FIELDS` with a
    value other than ``base``'s: every pod shares one cost model.
    """
    controls = dict(controls or {})
    for key, value in controls.items():
        if key in FIXED_ENV_FIELDS and base.get(key, value) != value:
            raise FinpodError(
                f"a pod's env sets {key} = {value!r} but the run's is {base.get(key)!r}: "
                f"{FIXED_ENV_FIELDS[key]}",
                "remove it from the pod's execution controls",
            )
    return {**base, **controls}


def parse_search_env(raw: Any, env_base: dict[str, Any] | None = None) -> tuple[ParamSpec, ...]:
    """Validate ``[search.env]``: each key a field of ``EnvConfig`` (read from the class,
    so new execution controls are searchable as soon as they exist), none of
    :data:`FIXED_ENV_FIELDS`, each value a ``{low, high, log}`` range, a list of choices or
    a fixed value that builds a valid ``EnvConfig`` over ``env_base``."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise FinpodError(
            f"search.env must be a table of env ranges, got {raw!r}",
            "write [search.env] with lines like no_trade_band = { low = 0.0, high = 0.05 }",
        )
    from finpod.env import EnvConfig

    fields = {f.name for f in dataclasses.fields(EnvConfig)}
    for key in raw:
        if key in FIXED_ENV_FIELDS:
            raise FinpodError(
                f"search.env.{key} cannot be searched: {FIXED_ENV_FIELDS[key]}",
                f"set {key} once in the strategy's [env] table",
            )
    sequences = _sequence_fields(EnvConfig)
    # Drawn in name order, so the draws do not depend on how a TOML writer ordered the
    # table (a resumed run regenerates the same pods).
    specs = tuple(
        _parse_param(
            "env",
            key,
            value,
            fields - set(FIXED_ENV_FIELDS),
            key in sequences,
            _int_fields(EnvConfig),
        )
        for key, value in sorted(raw.items())
    )
    base = dict(env_base or {})
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
                EnvConfig.from_dict({**base, spec.name: option})
            except (TypeError, ValueError) as err:
                raise FinpodError(
                    f"search.env.{spec.name} = {option!r} is not a valid env setting: {err}",
                    "fix the range or choices",
                ) from err
    return specs


def _int_fields(params_cls: type) -> set[str] | None:
    """Fields typed ``int`` (or ``int | None``): their ranges draw integers, whatever the
    bounds are written as; ``None`` when the class has no type hints to read."""
    import typing

    try:
        hints = typing.get_type_hints(params_cls)
    except Exception:  # noqa: BLE001 - unresolvable hints: fall back to the bounds' types
        return None
    import types

    def is_int(hint: Any) -> bool:
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            return {a for a in typing.get_args(hint) if a is not type(None)} == {int}
        return hint is int

    return {name for name, hint in hints.items() if is_int(hint)}


def _sequence_fields(params_cls: type) -> set[str]:
    """Fields whose value is itself a list (e.g. hidden widths): ``[64, 64]`` is one value."""
    import typing

    hints = typing.get_type_hints(params_cls)
    out = set()
    for name, hint in hints.items():
        options = [hint, *typing.get_args(hint)]
        if any(typing.get_origin(h) in (tuple, list) or h in (tuple, list) for h in options):
            out.add(name)
    return out


def _parse_param(
    algo: str,
    key: str,
    value: Any,
    fields: set[str],
    sequence: bool = False,
    int_fields: set[str] | None = None,
) -> ParamSpec:
    """One declaration: ``{low, high, log}`` range, list of choices, or a fixed value.

    For a field whose value is a list (``sequence``), ``[64, 64]`` is one fixed value and a
    list of lists (``[[64], [64, 64]]``) is a choice.
    """
    where = f"search.{algo}.{key}"
    if key not in fields:
        what = "env setting" if algo == "env" else "hyperparameter"
        raise FinpodError(f"unknown {what} {where!r}", f"valid keys: {', '.join(sorted(fields))}")
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"low", "high", "log"})
        if unknown:
            raise FinpodError(f"unknown key {unknown[0]!r} in {where}", "use low, high and log")
        if "low" not in value or "high" not in value:
            raise FinpodError(
                f"{where} needs both low and high", "e.g. { low = 1e-4, high = 1e-3 }"
            )
        low, high, log = value["low"], value["high"], value.get("log", False)
        for bound in (low, high):
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise FinpodError(
                    f"{where} bounds must be numbers, got {bound!r}", "e.g. low = 0.9"
                )
        if not isinstance(log, bool):
            raise FinpodError(f"{where}.log must be true or false", "e.g. log = true")
        if not low <= high:
            raise FinpodError(f"{where} has low {low} > high {high}", "swap the bounds")
        if log and low <= 0:
            raise FinpodError(
                f"{where} is log-scaled but low {low} ≤ 0", "use a positive low bound"
            )
        if int_fields is not None:
            # The field's declared type decides: {low = 0, high = 1} of a float is a float.
            kind = "int" if key in int_fields else "float"
        else:
            kind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
        return ParamSpec(key, kind, low=float(low), high=float(high), log=log)
    if sequence and isinstance(value, list) and not any(isinstance(v, list) for v in value):
        return ParamSpec(key, "fixed", value=value)
    if isinstance(value, list):
        if not value:
            raise FinpodError(f"{where} is an empty list of choices", "list at least one value")
        return ParamSpec(key, "choice", choices=tuple(value))
    return ParamSpec(key, "fixed", value=value)


def _check_buildable(space: AlgorithmSpace, params_cls: type, algo: str) -> None:
    """Build the hyperparameter dataclass at the range ends so bad values fail now, not in a pod."""
    from finpod.agents.base import build_hparams

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
