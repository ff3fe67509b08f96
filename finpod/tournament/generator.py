"""The generator: what the next pod trains (from scratch, or a perturbed copy of a good one).

Every draw for pod ``i`` uses ``numpy.random.default_rng([seed, i])``, so a run and its
resumed continuation generate the same pods for the same leaderboard.

A pod is "which agent with which settings": its algorithm, hyperparameters and, with a
``[search.env]`` table, its execution controls (``PodSpec.env``), drawn for a fresh pod,
inherited and perturbed by a child. A child of an off-policy parent may also start from
the parent's replay buffer (``tournament.inherit_buffer``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from finpod.agents import ALGORITHMS
from finpod.agents.hparams import build_hparams
from finpod.agents.registry import population_class
from finpod.errors import FinpodError
from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.scores import DEFAULT_SCORE
from finpod.tournament.search import SearchSpace, is_off_policy
from finpod.tournament.settings import TournamentConfig


@dataclass
class PodSpec:
    """What one pod trains: sent to the pod actor as is."""

    pod_id: str
    """Unique id within the run."""
    algorithm: str
    """Registry name of the agent's algorithm."""
    hparams: dict[str, Any]
    """Hyperparameters the pod trains with."""
    seed: int
    """Seed of the agent and (offset per learner) of its envs."""
    steps: int
    """Env steps to train, summed over learners."""
    epochs: int
    """Fusion and validation points, evenly spaced over ``steps``."""
    num_envs: int
    """W: vectorized envs per learner."""
    num_learners: int
    """L: learners, each on its own shard of seeds and start windows."""
    score_name: str = DEFAULT_SCORE
    """Validation score of the evaluator."""
    max_seconds: float | None = None
    """Wall-time cap: the pod stops at the last epoch end before it (see :meth:`out_of_time`)."""
    parent: str | None = None
    """Pod id whose weights and optimizer state the pod starts from (``None`` = scratch)."""
    lineage: list[str] = field(default_factory=list)
    """Ancestors' pod ids, oldest first."""
    base_history: list[dict[str, float]] = field(default_factory=list)
    """The parent's validation history, continued by this pod."""
    env: dict[str, Any] = field(default_factory=dict)
    """Env settings of this pod over the run's ``[env]`` table: its searched execution
    controls (``[search.env]``), used for training *and* validation scoring (and recorded
    for the backtest). ``{}`` = the run's env as is. Never holds cost-model fields."""
    champion: bool = False
    """A segment of the run's champion line (``base_pod = true``: the strategy's own
    settings, continued unchanged, never cut; :mod:`finpod.tournament.schedulers.base`)."""
    fill: bool = False
    """An explorer segment beyond the step budget, trained while the champion finishes
    its share (``tournament.fill``): its env steps are counted apart, and its wall-time
    cap (:attr:`max_seconds`) ends it when the champion is expected to finish."""
    continued: bool = False
    """A promotion (``mode = "asha"``): the parent continued with its hyperparameters and
    execution controls unchanged."""
    inherit_buffer: bool = False
    """Start from the parent's replay buffer (``OffPolicyAgent.import_buffer``) when the
    orchestrator has it; set for children of off-policy parents unless
    ``tournament.inherit_buffer = false``."""
    export_buffer: bool | str = False
    """Send the replay buffer back with the result (``OffPolicyAgent.export_buffer``), for
    this pod's children: ``True``, ``False`` or ``"auto"`` (only when
    :func:`~finpod.tournament.settings.inherit_buffer_fits` for the agent's
    ``buffer_nbytes()`` and the run's ``top_k``). Set for off-policy pods."""

    def out_of_time(self, wall_s: float, epochs_done: int) -> bool:
        """Whether the pod stops after ``epochs_done`` epochs at ``wall_s`` seconds: its cap
        is reached, or one more epoch as long as the mean one so far would end past it (so a
        capped run ends on time, not an epoch late)."""
        if self.max_seconds is None:
            return False
        return wall_s + wall_s / max(1, epochs_done) > self.max_seconds


def keep_layout(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child``'s execution controls with those that would change the observation's
    width put back to ``parent``'s: a decision schedule adds a column (deciding every bar,
    ``decision_interval = 1``, has none), and a copy must load its parent's weights."""
    out = dict(child)
    before, after = parent.get("decision_interval"), child.get("decision_interval")
    if before is not None and after is not None and (int(before) > 1) != (int(after) > 1):
        out["decision_interval"] = before
    for key in ("decision_times", "flat_at_close"):
        if key in parent:
            out[key] = parent[key]
    return out


def pod_id(index: int) -> str:
    """Pod id of the ``index``-th pod of a run."""
    return f"p{index:05d}"


class Generator:
    """Turns the leaderboard into the next pod to train."""

    def __init__(
        self, space: SearchSpace, config: TournamentConfig, seed: int, num_envs: int
    ) -> None:
        self.space = space
        self.config = config
        self.seed = int(seed)
        self.num_envs = int(num_envs)

    def rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, index])

    def next(
        self,
        board: Leaderboard,
        index: int,
        steps: int | None = None,
        parents: list[Entry] | None = None,
        lines: int | None = None,
    ) -> PodSpec:
        """Pod ``index``: from scratch early or with probability ε, else a child of an entry
        drawn by rank-weighted sampling: from ``parents`` (best first) when given and not
        empty, else from the whole board. Early: until the board holds ``fresh_pods``
        entries, or, given ``lines`` (the pods scored so far that trained from scratch),
        until there are that many lines."""
        rng = self.rng(index)
        warm = (len(board) if lines is None else lines) >= max(1, self.config.fresh_pods)
        if not warm or rng.random() < self.config.epsilon:
            return self.fresh(index, rng, steps)
        if parents:
            weights = np.arange(len(parents), 0, -1, dtype=float)
            parent = parents[int(rng.choice(len(parents), p=weights / weights.sum()))]
            return self.child(parent, index, rng, steps)
        return self.child(board.sample_parent(rng), index, rng, steps)

    def next_group(self, board: Leaderboard, index: int, size: int) -> list[PodSpec]:
        """Pods ``index … index + size − 1`` for one population: the first drawn as by
        :meth:`next`, the others sharing its algorithm, network architecture (the
        algorithm's frozen fields) and execution controls, each from scratch or a child of a
        compatible leaderboard entry (same rules: early or with probability ε from scratch,
        else rank-weighted). Every pod keeps its own seed and hyperparameters."""
        leader = self.next(board, index)
        if leader.parent is None and len(board) < max(1, self.config.fresh_pods):
            # Before the board is warm, populations take the listed algorithms in turn,
            # so every algorithm of the search is tried, whatever the draws.
            leader = self.fresh(index, forced=self.algorithm_in_turn(index // size))
        group = [leader]
        frozen = self.frozen_of(leader.algorithm, leader.hparams)
        for i in range(1, size):
            group.append(self.member_like(leader, frozen, board, index + i))
        return group

    def algorithm_in_turn(self, turn: int) -> str:
        """The ``turn``-th algorithm of the search, cycling in declaration order."""
        names = list(self.space.algorithms)
        return names[turn % len(names)]

    def frozen_of(self, algorithm: str, hparams: dict[str, Any]) -> dict[str, Any]:
        """The hyperparameters that members of one population must share: with a batched
        engine for ``algorithm``, every field but its per-member ones
        (``Population.member_fields``); otherwise those that fix network or storage
        shapes (the algorithm's frozen fields)."""
        engine = population_class(algorithm)
        if engine is None or algorithm not in ALGORITHMS:
            space = self.space.algorithms.get(algorithm)
            names = space.frozen if space is not None else ()
            return {k: hparams[k] for k in names if k in hparams}
        full = dataclasses.asdict(build_hparams(ALGORITHMS[algorithm][0], hparams, where=algorithm))
        return {k: v for k, v in full.items() if k not in engine.member_fields}

    def member_like(
        self, leader: PodSpec, frozen: dict[str, Any], board: Leaderboard, index: int
    ) -> PodSpec:
        """Pod ``index`` fit to train beside ``leader`` in one population."""
        rng = self.rng(index)
        compatible = [
            e
            for e in board.entries
            if e.algorithm == leader.algorithm and self.frozen_of(e.algorithm, e.hparams) == frozen
        ]
        warm = len(board) >= max(1, self.config.fresh_pods)
        if warm and compatible and rng.random() >= self.config.epsilon:
            weights = np.arange(len(compatible), 0, -1, dtype=float)
            parent = compatible[int(rng.choice(len(compatible), p=weights / weights.sum()))]
            spec = self.child(parent, index, rng)
        else:
            space = self.space.algorithms.get(leader.algorithm)
            hparams = space.sample(rng) if space is not None else dict(leader.hparams)
            spec = self._spec(index, leader.algorithm, {**hparams, **frozen}, rng, None)
        spec.hparams = {**spec.hparams, **frozen}
        spec.env = dict(leader.env)
        spec.steps, spec.max_seconds = leader.steps, leader.max_seconds
        return spec

    def fresh(
        self,
        index: int,
        rng: np.random.Generator | None = None,
        steps: int | None = None,
        forced: str | None = None,
    ) -> PodSpec:
        """A pod whose algorithm, hyperparameters and execution controls (``[search.env]``)
        are drawn from the search space (``forced``: this algorithm instead of a draw)."""
        rng = rng if rng is not None else self.rng(index)
        algorithm, hparams = self.space.sample(rng)
        if forced is not None and forced != algorithm:
            algorithm, hparams = forced, self.space.algorithms[forced].sample(rng)
        env = self.space.sample_env(rng)
        return self._spec(index, algorithm, hparams, rng, steps, env)

    def base(self, index: int) -> PodSpec:
        """Pod ``index`` training the strategy's own ``[agent]`` hyperparameters and
        ``[env]`` execution controls, unperturbed: what one learner of the strategy
        would train (the champion line's first segment)."""
        base = self.space.base_pod()
        if base is None:
            raise FinpodError(
                f"the [agent] algorithm {self.space.base_algorithm!r} is not searched",
                "add it to [search] algorithms or set base_pod = false",
            )
        rng = self.rng(index)
        algorithm, hparams, controls = base
        env = {**self.space.sample_env(rng), **controls}
        return self._spec(index, algorithm, hparams, rng, None, env)

    def child(
        self,
        parent: Entry,
        index: int,
        rng: np.random.Generator | None = None,
        steps: int | None = None,
        perturb: bool = True,
    ) -> PodSpec:
        """A pod continuing ``parent``: same algorithm, weights and optimizer state (and
        replay buffer, see :attr:`PodSpec.inherit_buffer`), its hyperparameters and
        execution controls perturbed within their declared ranges (unless ``perturb`` is
        False). The parent's execution controls are read from ``parent.env`` (absent on
        entries from before ``[search.env]``: drawn fresh)."""
        rng = rng if rng is not None else self.rng(index)
        hparams = dict(parent.hparams)
        space = self.space.algorithms.get(parent.algorithm)
        if perturb and space is not None:
            hparams = space.perturb(hparams, self.config.perturb, rng)
        env = dict(getattr(parent, "env", None) or {})
        if perturb:
            env = keep_layout(env, self.space.perturb_env(env, self.config.perturb, rng))
        else:
            env = {**self.space.sample_env(rng), **env} if self.space.env else env
        spec = self._spec(index, parent.algorithm, hparams, rng, steps, env)
        spec.parent = parent.pod_id
        spec.lineage = [*parent.lineage, parent.pod_id]
        spec.base_history = [dict(h) for h in parent.history]
        spec.inherit_buffer = self.config.inherit_buffer is not False and self._off_policy(
            parent.algorithm
        )
        spec.continued = not perturb
        return spec

    def _off_policy(self, algorithm: str) -> bool:
        """Whether pods of ``algorithm`` keep a replay buffer."""
        space = self.space.algorithms.get(algorithm)
        if space is not None:
            return space.off_policy
        return algorithm in ALGORITHMS and is_off_policy(ALGORITHMS[algorithm][1])

    def _spec(
        self,
        index: int,
        algorithm: str,
        hparams: dict[str, Any],
        rng: np.random.Generator,
        steps: int | None,
        env: dict[str, Any] | None = None,
    ) -> PodSpec:
        export = self.config.inherit_buffer if self._off_policy(algorithm) else False
        return PodSpec(
            pod_id=pod_id(index),
            algorithm=algorithm,
            hparams=hparams,
            seed=int(rng.integers(2**31 - 1)),
            steps=int(steps if steps is not None else self.config.pod_steps),
            epochs=self.config.epochs,
            num_envs=self.num_envs,
            num_learners=self.config.num_learners,
            score_name=self.config.score,
            max_seconds=self.config.pod_seconds,
            env=dict(env or {}),
            export_buffer=export,
        )
