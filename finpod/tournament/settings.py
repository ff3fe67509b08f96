"""Tournament knobs, validated from a strategy's raw ``[tournament]`` table::

    [tournament]
    pods = "auto"            # concurrent pods: "auto" (as many as the cluster fits) or N
    budget = "30min"         # "90s" / "30min" / "2h", "2e6 steps", or "40 pods" (docs/grammar.md)
    mode = "asha"            # "asha" (leaders continue), "async" or "generational"
    pod_steps = 50_000       # env steps one pod trains for (all its learners together)
    epochs = 4               # validation checkpoints (and learner fusions) per pod
    num_learners = 1         # L: learners per pod, fused (averaged) after every epoch
    cpus_per_pod = 1.0       # ≥ num_learners: each learner is a thread with ≥ 1 core
    gpus_per_pod = 0.25      # fractional GPUs share one device between pods (L = 1);
                             # with L > 1, gpus_per_pod = L puts each learner on its own GPU
    inherit_buffer = "auto"  # off-policy children start from their parent's replay buffer:
                             # true, false, or "auto" (when top_k buffers fit in memory)

The ``[search]`` table (hyperparameters and execution controls pods draw and perturb) is
validated in :mod:`finpod.tournament.search`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import psutil

from finpod.errors import FinpodError
from finpod.grammar import (  # noqa: F401  (Budget, parse_budget re-exported for their callers)
    Budget,
    parse_budget,
    parse_duration,
    parse_pods,
)
from finpod.scores import DEFAULT_SCORE, SCORES
from finpod.tournament.modes import MODES

INHERIT_BUFFER = (True, False, "auto")
#: ``inherit_buffer = "auto"``: share of a node's memory that ``top_k`` replay buffers (the
#: leaderboard's, kept in the object store for children) may take.
INHERIT_BUFFER_MEMORY_SHARE = 0.25


@dataclass
class TournamentConfig:
    """Everything that shapes a tournament run (the strategy's ``[tournament]`` table)."""

    pods: int | None = None
    """Most pods training at once; ``None`` ("auto") = as many as the cluster's resources fit,
    re-checked as pods finish and nodes come and go."""
    budget: Budget = field(default_factory=lambda: Budget("time", 600.0))
    """When the run stops (wall time, env steps or pods trained)."""
    time_cap: float | None = None
    """Optional wall-time cap of the whole run in seconds, beside a step or pod budget
    (written as a duration, e.g. ``"6min"``): no pod starts after it and running pods stop at
    their next epoch end, so a busy machine ends the run on time with fewer steps."""
    mode: str = "async"
    """``"async"``: the pool refills as each pod finishes; ``"generational"``: synchronous
    generations, the top ``keep_fraction`` continues and the rest are perturbed copies;
    ``"asha"``: asynchronous successive halving with continuation: ``pod_steps`` is a
    segment, pods that lead their rung and still improve are continued, the others stop
    (:mod:`finpod.tournament.schedulers.asha`)."""
    eta: float = 3.0
    """``"asha"``: reduction factor; the top ``ceil(n / eta)`` of the pods that reached a
    rung may be continued."""
    base_pod: bool = False
    """The run's first pod trains the strategy's own ``[agent]`` hyperparameters and
    ``[env]`` execution controls unperturbed (the rest are drawn from ``[search]``), so the
    search starts from what one learner of the strategy would train. That line is the
    run's *champion*: it trains without being cut, holding one slot, and the final agent
    is its best checkpoint unless a challenger beats it on a paired test
    (:mod:`finpod.tournament.champion`)."""
    challenge_alpha: float = 0.30
    """Significance level a challenger (a fork, other controls, the ensemble) must reach
    on the paired test over the validation sessions to replace the champion (Holm's
    correction over the lines tested: the chance that any line replaces an equally good
    champion). 0.30, because the two errors do not cost alike: replacing a champion by an
    equally good challenger costs nothing on average, and the chance of taking a clearly
    worse one is far below the level; keeping a timid champion 3 IR behind costs all the
    search found. On one validation year of daily bars a challenger that trades unlike the
    champion needs about +1 IR at 0.30 and +2 IR at 0.10 (:mod:`finpod.tournament.champion`;
    ``bench/selection_audit.py`` measures the rule on finished runs)."""
    fill: bool = True
    """With a champion line (``base_pod``) and a step budget: once the explorers have
    spent their part of the budget (all of it but the champion's share), they keep
    exploring while the champion trains the rest of its share, each segment stopping by
    the time the champion is expected to finish, instead of leaving their slots idle.
    These steps are counted apart (``run.json``'s ``budget.fill``), beyond the budget: the
    budget still fixes the champion's env steps and so the run's wall time (one learner's
    on its share of the machine), and every slot searches for all of it. ``false``: the
    explorers stop at their part, and the run trains exactly the budget."""
    yield_alpha: float = 0.0
    """Mid-run, the champion line *yields its slot* to the search when one complete
    challenger segment beats the champion's best checkpoint so far on the same paired test
    at this level, once the champion trained ``grace`` segments and went ``patience``
    segments without raising its best (smoothed) score (0, the default: never;
    the champion trains to the budget's end, as one learner of the file would). Where the
    base settings are wrong the learner's half of a 2-CPU machine then goes to the search
    instead of a line already beaten on evidence; the final selection is unchanged (the
    champion's best checkpoint stays the incumbent every challenger must beat). The looks
    are many (one per scored segment), so a level that asks for it is strict: 0.01.
    Off by default: the stall condition keeps well-set champions from yielding (without
    it, a held-out momentum champion still climbing yielded after 3 segments and tested
    0.74 IR lower), but mis-set champions stall late, and their yields after 6–11 of
    13–17 segments bought nothing measurable (``docs/tournaments.md``)."""
    patience: int = 2
    """``"asha"``: segments a lineage may go without raising its best validation score
    and still be continued (1: every segment must raise it). In every mode, the segments
    the champion line must go without raising its best (smoothed) score before it may
    yield its slot (``yield_alpha``)."""
    grace: int = 1
    """``"asha"``: segments every line trains before it can be stopped (Ray Tune's
    ``grace_period``): a pod below this rung is continued whatever its rank or curve, so
    an agent that starts slowly is not cut by its first, noisiest scores (1: none)."""
    top_k: int = 10
    """Leaderboard size."""
    ensemble: int = 3
    """Size of the leaderboard ensemble (the mean target weights of the top ``ensemble``
    entries) scored on validation at the end of the run: a candidate like any pod, counted
    in N for the Deflated Sharpe and PBO, and selected when it beats the best entry
    (:mod:`finpod.tournament.ensemble_candidate`). 0 = no ensemble; otherwise ≥ 2 (at most the
    ``top_k`` entries on the board are used)."""
    score: str = DEFAULT_SCORE
    """Validation score ranking the leaderboard: one of :data:`finpod.scores.SCORES` (sharpe,
    sortino, calmar, return, information_ratio)."""
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
    """New pods start from scratch until the leaderboard holds this many entries; with
    ``mode = "asha"``, whose board fills with one line's segments, until this many lines
    (pods trained from scratch, the champion's first segment included) have scored."""
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
            "patience",
            "grace",
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
        if not 0.0 < self.challenge_alpha < 1.0:
            raise bad(
                "challenge_alpha",
                f"must be in (0, 1), got {self.challenge_alpha}",
                "e.g. challenge_alpha = 0.05",
            )
        if not 0.0 <= self.yield_alpha < 1.0:
            raise bad(
                "yield_alpha",
                f"must be in [0, 1), got {self.yield_alpha}",
                "e.g. yield_alpha = 0.01 (0: the champion never yields its slot)",
            )
        if not self.eta >= 1.0:
            raise bad("eta", f"must be ≥ 1, got {self.eta}", "e.g. eta = 3")
        if not 0.0 <= self.perturb <= 10.0:
            raise bad("perturb", f"must be in [0, 10], got {self.perturb}", "e.g. 0.25")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain TOML/JSON-ready values (``None`` fields left out, budget as text)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        out["budget"] = str(self.budget)
        if self.time_cap is not None:
            out["time_cap"] = str(Budget("time", self.time_cap))
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
            values[key] = parse_budget(value, "tournament.budget")
        elif key == "time_cap":
            values[key] = float(parse_duration(value, "tournament.time_cap"))
        elif key == "pods":
            values[key] = parse_pods(value).count
        elif key in (
            "cpus_per_pod",
            "gpus_per_pod",
            "epsilon",
            "perturb",
            "keep_fraction",
            "pod_seconds",
            "eta",
            "challenge_alpha",
            "yield_alpha",
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FinpodError(
                    f"tournament.{key} must be a number, got {value!r}", _example(key)
                )
            values[key] = float(value)
        elif key in ("inherit_buffer", "base_pod", "fill"):
            if key != "inherit_buffer" and not isinstance(value, bool):
                raise FinpodError(
                    f"tournament.{key} must be true or false, got {value!r}",
                    f"e.g. {key} = true",
                )
            values[key] = value
        elif key in ("mode", "score"):
            if not isinstance(value, str):
                raise FinpodError(
                    f"tournament.{key} must be a string, got {value!r}", 'e.g. "async"'
                )
            values[key] = value
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise FinpodError(
                    f"tournament.{key} must be an integer, got {value!r}", _example(key)
                )
            values[key] = value
    return TournamentConfig(**values).validate()


#: Examples for the hint of a field whose default (``None``) is no example.
_EXAMPLES = {"num_envs": 16, "generation_size": 8, "pod_seconds": 600.0, "gpus_per_pod": 0.25}


def _example(key: str) -> str:
    """Hint with a valid value of ``[tournament]`` key ``key``, of its type (an integer
    field's example is an integer): its default, or an example where the default is None."""
    field_ = next(f for f in dataclasses.fields(TournamentConfig) if f.name == key)
    value = _EXAMPLES.get(key, field_.default)
    return f"e.g. {key} = {value}"


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
        memory_bytes = int(psutil.virtual_memory().total)
    return top_k * int(buffer_bytes) <= INHERIT_BUFFER_MEMORY_SHARE * memory_bytes
