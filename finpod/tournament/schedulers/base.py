"""What every scheduler answers, and the champion line every mode keeps.

A scheduler is one class (one module per mode, named in :mod:`finpod.tournament.modes`)
that owns its state, as a Ray Tune scheduler does. The orchestrator drives any of them
with the same calls, without knowing the mode's name:

- :meth:`Scheduler.next_specs`: what runs next in a free slot (Tune's
  ``choose_trial_to_run``);
- :meth:`Scheduler.scored` / :meth:`Scheduler.failed`: a pod was scored, or failed
  (Tune's ``on_trial_result`` / ``on_trial_error``);
- :meth:`Scheduler.state` / :meth:`Scheduler.restore`: the scheduler's whole state as
  JSON, saved atomically to the run's ``scheduler.json`` after every change, so a
  resumed run schedules as the stopped one would have;
- :meth:`Scheduler.report`: how the run's budget was spent (``run.json``'s ``budget``).

**The champion.** With ``base_pod = true`` the strategy's own ``[agent]`` and ``[env]``
settings train as the run's *champion line*: pod after pod, each continuing the last one's
weights and optimizer state unchanged, never cut, in one slot of the pool. At any wall
time the tournament has therefore trained one learner of the strategy file as far as that
learner would have got on its share of the machine; the other slots explore, and a
challenger replaces the champion at the end only on evidence
(:mod:`finpod.tournament.champion`). The champion is served before anything else whenever
its last segment has reported, and never more than one segment at a time.

**The champion may yield its slot on evidence** (``yield_alpha`` > 0; off by default).
Every complete segment of a challenger is
compared with the champion's best checkpoint so far (by its score averaged with its
neighbours', as the final selection picks the incumbent) on the final selection's paired
test (:func:`finpod.tournament.champion.paired_test`, the same validation bars). Once the
champion has trained ``grace`` segments and has *stalled* (its last ``patience``
segments did not raise its best score, averaged with its neighbours'), a challenger ahead
at ``yield_alpha`` (0.01, say) stops the line: its slot goes to the search, and the budget
it kept for the champion is released. A champion still climbing is never stopped by a line
ahead of it now that it may catch. The line's checkpoints stay on the board, and the final selection is
unchanged: its best checkpoint remains the incumbent every challenger must beat. Where
the strategy's settings are wrong (a learning rate twenty times too small, decisions
every quarter for a weekly signal) the learner's share of the machine stops going to a
line already beaten and no longer improving (``docs/tournaments.md`` measures what it
buys and costs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from finpod.atomic import atomic_write_json
from finpod.errors import FinpodError
from finpod.runs.candidates import CandidateSet
from finpod.runs.leaderboard import Leaderboard
from finpod.tournament.champion import paired_test, smoothed_best
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.pod_results import PodResult
from finpod.tournament.settings import TournamentConfig

#: The file a scheduler saves its state to, in the run directory.
SCHEDULER_FILE = "scheduler.json"

#: Consecutive failures of the champion's segments after which the line stops (a line
#: whose numbers went non-finite would fail for ever).
CHAMPION_MAX_FAILURES = 2

#: Bootstrap draws of a mid-run look (:meth:`Scheduler.look`): one per scored segment.
LOOK_DRAWS = 1000


def group_key(generator: Generator, spec: PodSpec) -> str:
    """Pods with equal keys can train in one population."""
    frozen = generator.frozen_of(spec.algorithm, spec.hparams)
    return repr(
        (spec.algorithm, sorted(frozen.items()), sorted(spec.env.items()), spec.num_envs)
        + (spec.epochs, spec.score_name, spec.num_learners)
    )


@dataclass
class Context:
    """What a scheduler is built with."""

    config: TournamentConfig
    generator: Generator
    board: Leaderboard
    log: Callable[[str], None]
    pool_size: Callable[[], int] = lambda: 1
    """Pod slots the pool has now (generational mode sizes its generations with it)."""
    state_path: Path | None = None
    """Where :meth:`Scheduler.save` writes (``None``: kept in memory only)."""
    bars_per_year: Callable[[], float] = lambda: 252.0
    """Bars per year of the validation split (annualizes the mid-run looks' differences;
    their p-values do not depend on it)."""


@dataclass
class ChampionLine:
    """The champion line's state (see the module docstring)."""

    pods: list[str] = field(default_factory=list)
    """Its pods, oldest first (each continues the one before)."""
    running: bool = False
    """A segment of the line is dispatched and has not reported."""
    failures: int = 0
    """Consecutive failed segments."""
    stopped: str = ""
    """Why the line stopped ("": it goes on until the budget ends)."""
    steps: int = 0
    """Env steps its scored segments trained."""
    seconds: float = 0.0
    """Seconds its scored segments took in their pods: its pace
    (:meth:`Scheduler.champion_seconds_left`)."""
    yielded: dict[str, Any] | None = None
    """The paired test that made the line yield its slot (module docstring), with the
    segments it had trained; ``None``: it did not."""


class Scheduler:
    """Base of every mode: the champion line, ids, parents' bytes and saving.

    Subclasses answer :meth:`choose` (what the exploring slots run next) and may extend
    :meth:`on_scored`, :meth:`on_failed`, :meth:`own_state`, :meth:`restore_own` and
    :meth:`report`."""

    name = "base"

    def __init__(self, context: Context) -> None:
        self.context = context
        self.config = context.config
        self.generator = context.generator
        self.board = context.board
        self.log = context.log
        self.champion = ChampionLine()
        self.champion_scores: list[tuple[str, float]] = []
        """The champion's scored segments in line order: (pod id, validation score)."""
        self.champion_returns: dict[str, np.ndarray] = {}
        """Per-bar validation returns of the champion's segments that may be the one a
        challenger is compared with (:meth:`look`): the best of those whose neighbours
        have all scored, and the last two. Kept in memory; a resumed run reads them back
        from its candidates record (:meth:`remember`)."""
        if self.config.base_pod and self.generator.space.base_pod() is None:
            raise FinpodError(
                f"tournament.base_pod = true, but the [agent] algorithm "
                f"{self.generator.space.base_algorithm!r} is not searched",
                f"add it to [search] algorithms ({', '.join(self.generator.space.algorithms)})"
                " or set base_pod = false",
            )
        path = context.state_path
        if path is not None and path.is_file():
            self.restore(_read_state(path))
        else:
            self.restore(self.legacy_state())

    # ----- the questions every mode answers ------------------------------------------------
    def next_specs(self, size: int, busy: bool, explore: bool = True) -> list[PodSpec]:
        """Up to ``size`` pods for one free slot (``[]``: nothing to start now); ``busy``:
        pods are still running or waiting to be retried. The champion's next segment comes
        first; then the mode's :meth:`choose`, unless ``explore`` is False (what is left
        of the budget is the champion's: :meth:`champion_reserve`)."""
        spec = self._champion_next()
        if spec is not None:
            self.save()
            return [spec]
        if not explore:
            return []
        specs = self.choose(size, busy)
        self.save()
        return specs

    def scored(self, result: PodResult, spec: PodSpec) -> None:
        """A pod reported a finite score (already recorded on the board)."""
        if spec.champion:
            self.champion.running = False
            self.champion.failures = 0
            self.champion.steps += int(result.steps_done)
            self.champion.seconds += float(result.train_s)
            looks = self.config.yield_alpha > 0
            if looks and result.returns is not None and math.isfinite(result.score):
                self._keep_champion(result.pod_id, float(result.score), result.returns)
        else:
            self.look(result, spec)
        self.on_scored(result, spec)
        self.save()

    def look(self, result: PodResult, spec: PodSpec) -> None:
        """Does this challenger segment make the champion yield its slot (module
        docstring)? Only a complete segment with recorded returns counts, only once
        the champion has scored ``grace`` segments (its first scores are its noisiest,
        and it is still learning), and only once it has stalled: its last ``patience``
        segments did not raise its best (smoothed) score. A champion still climbing is
        never stopped by a line ahead of it now that it might catch."""
        line, alpha = self.champion, self.config.yield_alpha
        if not self.config.base_pod or line.stopped or alpha <= 0 or result.returns is None:
            return
        if len(self.champion_scores) < max(1, self.config.grace):
            return
        # Cut short: fewer steps than a full segment (the budget's end, or the share kept
        # for the champion, fitted the spec to what was left), or the wall-time cap.
        short_steps = result.steps_done < 0.95 * max(spec.steps, self.config.pod_steps)
        if short_steps or 0 < result.epochs_done < spec.epochs or not math.isfinite(result.score):
            return
        scores = [score for _, score in self.champion_scores]
        at = smoothed_best(scores)
        if len(scores) - 1 - at < max(1, self.config.patience):
            return  # still raising its best: it raised it within its last `patience` segments
        best = self.champion_scores[at][0]
        base = self.champion_returns[best]
        if base.shape != result.returns.shape:
            return
        test = paired_test(
            base,
            result.returns,
            bars_per_year=self.context.bars_per_year(),
            names=(best, result.pod_id),
            draws=LOOK_DRAWS,
            seed=len(line.pods),
        )
        if test.delta <= 0 or test.p_value > alpha:
            return
        line.yielded = {**test.to_json(), "segments": len(self.champion_scores)}
        line.stopped = (
            f"yielded its slot to {result.pod_id} after {len(self.champion_scores)} "
            f"segments: {test.delta:+.2f} over {best}, p = {test.p_value:.3f} "
            f"(yield_alpha = {alpha:g})"
        )
        self.log(f"champion line stopped: {line.stopped}")

    def _champion_best(self, settled: bool = False) -> str:
        """The champion's checkpoint a challenger is compared with mid-run: the best by
        its score averaged with its neighbours' along the line (as the final selection's
        incumbent, :func:`finpod.tournament.champion.smoothed_scores`): a checkpoint
        that scored high once between two low scores is luck. ``settled``: among the
        segments whose neighbours have both scored (their average is final)."""
        scores = [score for _, score in self.champion_scores]
        return self.champion_scores[smoothed_best(scores, settled)][0]

    def _keep_champion(self, pod: str, score: float, returns: np.ndarray) -> None:
        """Record a champion segment; keep the returns only of the segments that may be
        the best one now or later (the settled best and the last two): a line of a
        thousand segments on minute bars would otherwise hold a thousand series."""
        self.champion_scores.append((pod, score))
        self.champion_returns[pod] = np.asarray(returns, dtype=np.float64)
        keep = {self._champion_best(settled=True), *(p for p, _ in self.champion_scores[-2:])}
        for gone in [p for p in self.champion_returns if p not in keep]:
            del self.champion_returns[gone]

    def remember(self, candidates: CandidateSet) -> None:
        """A resumed run's champion returns, from its candidates record (the orchestrator
        reads it only when the champion may yield: ``yield_alpha`` > 0)."""
        ours = set(self.champion.pods)
        for k, pod in enumerate(candidates.ids):
            score = float(candidates.scores[k])
            if (
                pod in ours
                and math.isfinite(score)
                and candidates.lengths[k] == len(candidates.returns)
            ):
                self._keep_champion(pod, score, candidates.returns[:, k])

    def failed(self, specs: list[PodSpec], retry: bool = True) -> None:
        """Pods failed and will not report a score: crashed or raised (``retry``: the
        mode may run them again), or went non-finite (``retry=False``: never again)."""
        for spec in specs:
            if spec.champion:
                self.champion.running = False
                self.champion.failures += 1
                if spec.pod_id in self.champion.pods:
                    self.champion.pods.remove(spec.pod_id)
                if self.champion.failures >= CHAMPION_MAX_FAILURES:
                    self.champion.stopped = f"{self.champion.failures} segments failed in a row"
                    self.log(f"champion line stopped: {self.champion.stopped}")
        if retry:
            self.on_failed(specs)
        self.save()

    def parent_bytes(self, parent_id: str | None) -> bytes | None:
        """The checkpoint file bytes of ``parent_id`` (``None``: gone, or no parent)."""
        if not parent_id:
            return None
        entry = self.board.get(parent_id)
        return None if entry is None else self.board.checkpoint_path(entry).read_bytes()

    def report(self) -> dict[str, Any] | None:
        """How the run's budget was spent (``run.json``'s ``budget``; None: not tracked)."""
        return None

    # ----- state -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The scheduler's whole state, JSON-ready."""
        return {"mode": self.name, "champion": asdict(self.champion), **self.own_state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state` (a resumed run)."""
        champion = state.get("champion") or {}
        self.champion = ChampionLine(**{k: champion[k] for k in champion if k != "running"})
        # A segment running when the run stopped never reported: it runs again.
        self.restore_own(state)

    def save(self) -> None:
        """Write :meth:`state` to the run's ``scheduler.json`` (atomically)."""
        if self.context.state_path is not None:
            atomic_write_json(self.context.state_path, self.state())

    # ----- hooks -------------------------------------------------------------------------------
    def choose(self, size: int, busy: bool) -> list[PodSpec]:
        """What an exploring slot runs next (``[]``: nothing now)."""
        raise NotImplementedError

    def on_scored(self, result: PodResult, spec: PodSpec) -> None:
        """The mode's own bookkeeping of a scored pod."""

    def on_failed(self, specs: list[PodSpec]) -> None:
        """The mode's own bookkeeping of failed pods."""

    def own_state(self) -> dict[str, Any]:
        """The mode's own part of :meth:`state`."""
        return {}

    def restore_own(self, state: dict[str, Any]) -> None:
        """Continue the mode's own part of :meth:`state`."""

    def legacy_state(self) -> dict[str, Any]:
        """The state of a run saved before ``scheduler.json`` existed (its leaderboard's
        ``progress``), or ``{}``."""
        return {}

    # ----- helpers -----------------------------------------------------------------------------
    def take_ids(self, count: int) -> int:
        """Reserve ``count`` pod ids; returns the first index."""
        index = self.board.progress.next_pod
        self.board.progress.next_pod = index + count
        return index

    def champion_reserve(self, share: float, planned: float) -> float:
        """Env steps of a step budget that only the champion may spend: its ``share`` (the
        budget over the pool's slots, what one learner of the file gets on its share of
        the machine) less what its segments trained and the ``planned`` steps of its
        segment now running. Without it, explorers whose env steps are cheaper (an A2C
        pod beside the PPO champion) would spend the budget first and end the run with the
        champion short of its share. 0 when no champion line trains."""
        line = self.champion
        if not self.config.base_pod or line.stopped:
            return 0.0
        return max(0.0, float(share) - line.steps - float(planned))

    def champion_seconds_left(self, share: float, running_s: float = 0.0) -> float | None:
        """Seconds until the champion line has trained its ``share`` of a step budget, at
        the pace of its scored segments; ``running_s``: how long its segment now running
        has been training. None when no champion line trains, before its first score, or
        when less than half of one of its segments is left (too little for an explorer to
        fill: :attr:`~finpod.tournament.settings.TournamentConfig.fill`)."""
        line = self.champion
        if not self.config.base_pod or line.stopped or line.steps <= 0 or line.seconds <= 0:
            return None
        scored = len(line.pods) - int(line.running)
        left = (float(share) - line.steps) * line.seconds / line.steps - running_s
        return left if scored > 0 and left >= 0.5 * line.seconds / scored else None

    def yield_note(self) -> str | None:
        """Why the champion line yielded its slot (:meth:`look`), or ``None``."""
        return self.champion.stopped if self.champion.yielded else None

    def champion_ids(self) -> set[str]:
        """Pod ids of the champion line."""
        return set(self.champion.pods)

    def _champion_next(self) -> PodSpec | None:
        """The champion's next segment, when it is due (module docstring)."""
        line = self.champion
        if not self.config.base_pod or line.running or line.stopped:
            return None
        latest = next((e for e in map(self.board.get, reversed(line.pods)) if e is not None), None)
        if line.pods and latest is None:
            line.stopped = "its checkpoints are gone"
            self.log(f"champion line stopped: {line.stopped}")
            return None
        index = self.take_ids(1)
        if latest is None:
            spec = self.generator.base(index)
        else:
            spec = self.generator.child(latest, index, perturb=False)
        spec.champion = True
        line.pods.append(spec.pod_id)
        line.running = True
        origin = f"continues {latest.pod_id}" if latest else "starts"
        self.log(f"champion line {origin}: {spec.pod_id} (segment {len(line.pods)})")
        return spec


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FinpodError(f"{path} is unreadable: {err}", "restore it or start a new run") from err
    if not isinstance(state, dict):
        raise FinpodError(
            f"{path} does not hold a scheduler state", "restore it or start a new run"
        )
    return state


def score_key(score: float) -> float:
    """A score for sorting: NaN ranks last."""
    return score if math.isfinite(score) else -math.inf
