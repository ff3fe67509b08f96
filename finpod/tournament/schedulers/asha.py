"""Budgets that follow the leaders: asynchronous successive halving with continuation.

``mode = "asha"`` spends a tournament's env steps the way ASHA does (Li et al., "A System
for Massively Parallel Hyperparameter Tuning", MLSys 2020): training is cut into
*segments* of ``pod_steps`` env steps (the rung size), every segment ends with a
validation score, and whenever a slot is free the scheduler first looks for a pod to
*promote*: one whose score at its rung is in the top ``1/eta`` of every score recorded at
that rung. A promoted pod is continued as a new pod id with its weights, optimizer state
and hyperparameters unchanged (:meth:`Generator.child` with ``perturb=False``), so an agent
that keeps winning keeps training; one that trails its rung, or whose last segment did not
raise its best validation score (it *stalls*), is not continued. When nothing can be
promoted the slot *explores*: a fresh pod, or a perturbed copy of the best pod of one of
the leading lines (PBT's exploit-and-explore with truncation selection, Jaderberg et al.
2017), drawn by the generator as soon as the first scores are in.

Where it departs from the paper:

- **ceil, not floor.** ASHA promotes the top ``floor(n / eta)`` of a rung, so nothing is
  promoted before ``eta`` pods reached it. Here the top ``ceil(n / eta)`` qualify: the
  first pod to reach a rung may go on at once, which is what lets one strong agent train
  for most of a short budget instead of waiting for rivals to catch up.
- **Lines, not only rungs.** A pod must also be in the top ``1/eta`` of the lines (pods
  grouped by the fresh pod they descend from) by their best score at its rung or below:
  with few slots, a line that always reaches the next rung first would otherwise never be
  compared with a better line one rung behind it.
- **Grace, then lines.** As Ray Tune's ASHA (``grace_period``), a pod below rung
  ``grace`` is continued whatever its rank: first scores are the noisiest, and an agent
  that starts slowly (PPO beside A2C, say) is often the one that ends highest.
- **Behind by more than the noise.** A pod trails its rung, or its line trails another,
  only when it is behind by more than the validation score's own noise from one segment
  to the next (:meth:`Allocation.noise`, estimated from the run's continuations): two
  agents 0.01 apart are a tie, not a ranking.
- **Still improving.** ASHA promotes on rank alone; here a promoted pod must also have
  raised its lineage's best validation score within its last ``patience`` segments (a
  stalled agent stops, even at the top of its rung; its perturbed copies may still carry
  its weights on).
- **No maximum rung.** There is no final resource R: a pod goes on while it wins, until
  the run's budget (or wall-time cap) ends.
- **Promotion resumes.** A promoted pod continues from its checkpoint, as Ray Tune's ASHA
  does with checkpointing, rather than training from scratch to the next rung.

**The champion.** With ``base_pod = true`` the champion line (:mod:`.base`) trains
beside the rungs, never cut; its pods are recorded like any other, so every challenger is
ranked against it at its rung and the noise margin is measured on its continuations too,
but only the champion's own slot continues it.

Rungs count segments: a pod whose lineage holds ``d`` ancestors has trained ``d + 1``
segments and sits at rung ``d + 1``. Every scored pod is recorded in :class:`Allocation`
(persisted with the leaderboard, so a resumed run promotes the same pods), which also
gives the run's *budget report*: env steps per pod and per lineage, promotions, stops and
children, and the selected agent's share of the run's env steps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from finpod.tournament.champion import window_mean
from finpod.tournament.generator import PodSpec
from finpod.tournament.pod_results import PodResult
from finpod.tournament.schedulers.asynchronous import AsyncScheduler
from finpod.tournament.schedulers.base import Context, group_key

#: Why a scored pod was not continued (see :meth:`Allocation.stop_reason`).
STALLED, TRAILED, TIME_CAP, RUNNING_OUT = "stalled", "trailed", "time_cap", "budget_end"


@dataclass
class PodRecord:
    """One scored pod (one segment of a lineage)."""

    pod: str
    """Pod id."""
    parent: str | None
    """Pod it started from (``None``: from scratch)."""
    kind: str
    """``"fresh"``, ``"continued"`` (a promotion: the parent unchanged) or ``"child"``
    (a perturbed copy of the parent)."""
    rung: int
    """Segments trained along its lineage (its own included)."""
    steps: int
    """Env steps this pod trained."""
    score: float
    """Its validation score (NaN: not scored)."""
    prev_best: float
    """Best validation score along its lineage before this segment (−inf: none)."""
    since_best: int = 0
    """Segments along its lineage since the lineage's best score (0: this one is it)."""
    epochs_done: int = 0
    """Validation points reached (fewer than asked: the time cap stopped it)."""
    epochs: int = 0
    """Validation points asked for."""

    def improving(self, patience: int = 1) -> bool:
        """Has the lineage raised its best validation score within its last ``patience``
        segments (this one included)?"""
        return math.isfinite(self.score) and self.since_best < patience


@dataclass
class Allocation:
    """Every scored pod of an ``asha`` run and the pods already promoted."""

    eta: float = 3.0
    """Reduction factor: the top ``ceil(n / eta)`` of a rung may be promoted."""
    patience: int = 2
    """Segments a lineage may go without a new best validation score and still be
    promoted (1: every segment must raise it)."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """:class:`PodRecord` of every scored pod, as dicts (JSON-ready)."""
    promoted: list[str] = field(default_factory=list)
    """Pods whose continuation was dispatched (each is promoted once)."""
    grace: int = 1
    """Segments every line trains before it can be stopped: a pod below this rung is
    continued whatever its rank or curve (Ray Tune's ``grace_period``)."""

    # ----- recording --------------------------------------------------------------------
    def record(self, rec: PodRecord) -> None:
        """Add a scored pod (once per pod id)."""
        if any(r["pod"] == rec.pod for r in self.records):
            return
        out = asdict(rec)
        out["score"] = rec.score if math.isfinite(rec.score) else None
        out["prev_best"] = rec.prev_best if math.isfinite(rec.prev_best) else None
        self.records.append(out)

    def pods(self) -> list[PodRecord]:
        """The records as :class:`PodRecord` (None scores read as NaN / −inf)."""
        out = []
        for r in self.records:
            r = dict(r)
            r["score"] = math.nan if r.get("score") is None else float(r["score"])
            r["prev_best"] = -math.inf if r.get("prev_best") is None else float(r["prev_best"])
            out.append(PodRecord(**r))
        return out

    def promote(self, pod: str) -> None:
        """``pod``'s continuation was dispatched."""
        if pod not in self.promoted:
            self.promoted.append(pod)

    # ----- deciding ---------------------------------------------------------------------
    def noise(self, pods: list[PodRecord] | None = None) -> float:
        """How much a validation score moves from one segment to the next by chance: a
        robust standard deviation (1.4826 · MAD / √2) of the changes between a pod and its
        unchanged continuation, over every such pair scored so far (0 before 3 pairs).
        A pod *trails* only when it is behind by more than this."""
        pods = self.pods() if pods is None else pods
        by_id = {p.pod: p for p in pods}
        diffs = [
            p.score - by_id[p.parent].score
            for p in pods
            if p.kind == "continued"
            and p.parent in by_id
            and math.isfinite(p.score)
            and math.isfinite(by_id[p.parent].score)
        ]
        if len(diffs) < 3:
            return 0.0
        med = statistics.median(diffs)
        return 1.4826 * statistics.median(abs(d - med) for d in diffs) / math.sqrt(2)

    def rung_cut(self, rung: int, pods: list[PodRecord] | None = None) -> float:
        """The lowest score that is in the top ``ceil(n / eta)`` of ``rung`` (+inf when no
        finite score reached it); ``pods``: :meth:`pods`, when the caller has them."""
        pods = self.pods() if pods is None else pods
        scores = sorted(
            (p.score for p in pods if p.rung == rung and math.isfinite(p.score)),
            reverse=True,
        )
        if not scores:
            return math.inf
        keep = max(1, math.ceil(len(scores) / self.eta))
        return scores[keep - 1]

    def leads_lines(
        self, p: PodRecord, pods: list[PodRecord] | None = None, margin: float = 0.0
    ) -> bool:
        """Is ``p`` in the top ``ceil(m / eta)`` of the ``m`` lines (pods grouped by the
        fresh pod they descend from) by their best score at rung ≤ ``p.rung``? A line that
        keeps reaching new rungs first is never compared at its own rung; this compares it
        with what the other lines scored with as many env steps or fewer, so a line that
        trails them stops and its slot explores (a perturbed copy of a leader). A line
        counts as ahead only when its best is above ``p``'s score by more than ``margin``."""
        pods = self.pods() if pods is None else pods
        best = _best_of_lines(pods, lambda q: q.rung <= p.rung)
        best.pop(_roots(pods)[p.pod], None)
        ahead = sum(q.score > p.score + margin for q in best.values())
        return ahead < max(1, math.ceil((len(best) + 1) / self.eta))

    def promotable(self, available: set[str]) -> list[PodRecord]:
        """Pods that may be continued now, best first: not promoted yet, their checkpoint
        ``available``, still improving, in the top ``1/eta`` of their rung and of the lines
        at their rung or below (:meth:`leads_lines`). Pods in their grace period come
        first, then pods of lines with fewer continuations running, then deeper rungs
        (ASHA looks for promotions from the top rung down), then higher scores: without a
        maximum rung, deepest-first alone lets one line's forks take every slot while a
        pod of another line waits for ever."""
        cuts: dict[int, float] = {}
        pods = self.pods()
        margin = self.noise(pods)
        out = []
        for p in pods:
            if p.pod in self.promoted or p.pod not in available:
                continue
            if p.rung < self.grace and math.isfinite(p.score):
                out.append(p)  # still in its grace period
                continue
            if not p.improving(self.patience):
                continue
            if p.rung not in cuts:
                cuts[p.rung] = self.rung_cut(p.rung, pods)
            if p.score >= cuts[p.rung] - margin and self.leads_lines(p, pods, margin):
                out.append(p)
        # A line's pods whose continuation is running (promoted, not scored yet): with few
        # slots, deepest-first alone would give every slot to one line's forks for ever.
        root = _roots(pods)
        scored_from = {p.parent for p in pods if p.kind == "continued"}
        running: dict[str, int] = {}
        for pod in self.promoted:
            if pod in root and pod not in scored_from:
                running[root[pod]] = running.get(root[pod], 0) + 1
        out.sort(
            key=lambda p: (p.rung >= self.grace, running.get(root[p.pod], 0), -p.rung, -p.score)
        )
        return out

    def levels(self, pods: list[PodRecord] | None = None) -> dict[str, float]:
        """Pod id → its line's *level* there: the mean of its finite score and those of the
        segments on either side along its line (the segment it continued from, and its
        continuation, else its first copy), as the final selection smooths a line
        (:func:`finpod.tournament.champion.window_mean`). One score between two low ones is
        luck; a run of high scores is a level."""
        pods = self.pods() if pods is None else pods
        by_id = {p.pod: p for p in pods}
        after: dict[str, PodRecord] = {}
        for p in pods:
            cur = after.get(p.parent) if p.parent is not None else None
            if p.parent is not None and (
                cur is None or (p.kind, cur.kind) == ("continued", "child")
            ):
                after[p.parent] = p
        out: dict[str, float] = {}
        for p in pods:
            before = by_id.get(p.parent) if p.parent is not None else None
            line = [before.score if before else math.nan, p.score]
            line.append(after[p.pod].score if p.pod in after else math.nan)
            out[p.pod] = window_mean(line, 1, p.score) if math.isfinite(p.score) else -math.inf
        return out

    def exploit_parents(self, available: set[str]) -> list[str]:
        """Who an explorer copies (PBT's *exploit*, truncation selection over lines): the
        pod of each line with the best :meth:`levels` whose checkpoint is ``available``,
        for the top ``ceil(m / eta)`` of the ``m`` lines by that level, best first (own
        score breaks ties). Ranking by single scores sends copy after copy to a lucky
        segment whose continuation fell back; drawing parents from the whole leaderboard
        lets one line's many checkpoints crowd it and sends most copies to lines that
        already trail."""
        pods = self.pods()
        level = self.levels(pods)

        def rank(p: PodRecord) -> tuple[float, float]:
            return level[p.pod], p.score

        best = _best_of_lines(pods, lambda p: p.pod in available, rank)
        ranked = sorted(best.values(), key=rank, reverse=True)
        keep = max(1, math.ceil(len(ranked) / self.eta)) if ranked else 0
        return [p.pod for p in ranked[:keep]]

    def stop_reason(
        self, p: PodRecord, pods: list[PodRecord] | None = None, margin: float | None = None
    ) -> str | None:
        """Why a scored pod was not continued (``None``: it was, or could still be);
        ``pods``: :meth:`pods` and ``margin``: :meth:`noise`, when the caller has them."""
        pods = self.pods() if pods is None else pods
        if p.pod in self.promoted:
            return None
        if p.epochs and p.epochs_done < p.epochs:
            return TIME_CAP
        if p.rung < self.grace and math.isfinite(p.score):
            return RUNNING_OUT
        if not p.improving(self.patience):
            return STALLED
        margin = self.noise(pods) if margin is None else margin
        if p.score < self.rung_cut(p.rung, pods) - margin or not self.leads_lines(p, pods, margin):
            return TRAILED
        return RUNNING_OUT

    # ----- reporting --------------------------------------------------------------------
    def report(
        self, selected: str | None, total_env_steps: int, champion: set[str] | None = None
    ) -> dict[str, Any]:
        """The run's budget report: how its env steps were spent (``run.json``'s
        ``budget``); ``champion``: the champion line's pod ids (never stopped: its
        stop reason is ``"champion"``)."""
        champion = champion or set()
        pods = self.pods()
        by_id = {p.pod: p for p in pods}

        def root(p: PodRecord) -> str:
            while p.parent and p.parent in by_id:
                p = by_id[p.parent]
            return p.pod

        def line(pod: str) -> list[str]:
            chain = []
            cur: str | None = pod
            while cur is not None and cur in by_id:
                chain.append(cur)
                cur = by_id[cur].parent
            return chain[::-1]

        lineages: dict[str, dict[str, Any]] = {}
        for p in pods:
            r = lineages.setdefault(root(p), {"root": root(p), "pods": 0, "env_steps": 0})
            r["pods"] += 1
            r["env_steps"] += p.steps
            best = r.get("best_score")
            if math.isfinite(p.score) and (best is None or p.score > best):
                r["best_score"], r["best_pod"] = p.score, p.pod
        margin = self.noise(pods)
        stops: dict[str, int] = {}
        for p in pods:
            why = None if p.pod in champion else self.stop_reason(p, pods, margin)
            if why is not None:
                stops[why] = stops.get(why, 0) + 1
        total = int(total_env_steps) or sum(p.steps for p in pods)
        out: dict[str, Any] = {
            "scheme": "asha",
            "eta": self.eta,
            "env_steps": total,
            "pods": len(pods),
            "fresh": sum(p.kind == "fresh" for p in pods),
            "promotions": sum(p.kind == "continued" for p in pods),
            "children": sum(p.kind == "child" for p in pods),
            "stops": stops,
            "max_rung": max((p.rung for p in pods), default=0),
            "champion": {
                "pods": sum(p.pod in champion for p in pods),
                "env_steps": sum(p.steps for p in pods if p.pod in champion),
            },
            "per_pod": [
                {
                    "pod": p.pod,
                    "parent": p.parent,
                    "kind": p.kind,
                    "rung": p.rung,
                    "env_steps": p.steps,
                    "score": p.score if math.isfinite(p.score) else None,
                    "stop": "champion" if p.pod in champion else self.stop_reason(p, pods, margin),
                }
                for p in pods
            ],
            "lineages": sorted(lineages.values(), key=lambda r: -r["env_steps"]),
        }
        if selected is not None and selected in by_id:
            chain = line(selected)
            steps = sum(by_id[c].steps for c in chain)
            out["selected"] = {
                "pod": selected,
                "lineage": chain,
                "rung": by_id[selected].rung,
                "env_steps": steps,
                "share": round(steps / total, 4) if total else None,
            }
        return out


def _best_of_lines(
    pods: list[PodRecord],
    keep: Callable[[PodRecord], bool],
    rank: Callable[[PodRecord], Any] = lambda p: p.score,
) -> dict[str, PodRecord]:
    """Line (the id of the fresh pod it descends from) → its best pod by ``rank`` (its
    score unless given) among the finite-scored pods that ``keep`` accepts."""
    root = _roots(pods)
    best: dict[str, PodRecord] = {}
    for p in pods:
        if math.isfinite(p.score) and keep(p):
            cur = best.get(root[p.pod])
            if cur is None or rank(p) > rank(cur):
                best[root[p.pod]] = p
    return best


def _roots(pods: list[PodRecord]) -> dict[str, str]:
    """Pod id → the id of the fresh pod its line descends from."""
    parent = {p.pod: p.parent for p in pods}
    out: dict[str, str] = {}
    for p in pods:
        cur = p.pod
        while parent.get(cur) in parent:
            cur = parent[cur]  # type: ignore[assignment]
        out[p.pod] = cur
    return out


class HalvingScheduler(AsyncScheduler):
    """Asynchronous successive halving with continuation (``mode = "asha"``).

    A free slot gets, in this order: the champion's next segment (:mod:`.base`); the
    promotable pods (:meth:`Allocation.promotable`: pods in their grace period, then lines
    with fewer continuations running, then the deepest rung, then the best score),
    continued unchanged — up to ``size`` of them that can share a population, else one
    alone; or, when none can be promoted, the generator's next pod or population (from
    scratch, or perturbed copies of leaderboard entries), as the asynchronous scheduler
    draws them. With one pod per slot an explorer copies the best pod of a leading line
    (:meth:`Allocation.exploit_parents`); the champion's line is one of them."""

    name = "asha"

    def __init__(self, context: Context) -> None:
        self.allocation = Allocation(
            eta=context.config.eta, patience=context.config.patience, grace=context.config.grace
        )
        super().__init__(context)

    def choose(self, size: int, busy: bool) -> list[PodSpec]:
        available = {e.pod_id for e in self.board.entries}
        ready = self.allocation.promotable(available - self.champion_ids())
        if not ready and self.config.population == 1:
            ids = self.allocation.exploit_parents(available)
            parents = [e for e in map(self.board.get, ids) if e is not None]
            lines = sum(p.kind == "fresh" for p in self.allocation.pods())
            return [self.generator.next(self.board, self.take_ids(1), parents=parents, lines=lines)]
        if not ready:
            return super().choose(size, busy)
        lead = self.board.get(ready[0].pod)
        assert lead is not None
        specs = [self.generator.child(lead, self.take_ids(1), perturb=False)]
        key = group_key(self.generator, specs[0])
        for rec in ready[1:]:
            if len(specs) >= size:
                break
            entry = self.board.get(rec.pod)
            assert entry is not None
            spec = self.generator.child(entry, self.board.progress.next_pod, perturb=False)
            if group_key(self.generator, spec) == key:
                self.take_ids(1)
                specs.append(spec)
        for spec in specs:
            assert spec.parent is not None
            self.allocation.promote(spec.parent)
            self.log(f"promote {spec.parent} → {spec.pod_id} (rung {len(spec.lineage) + 1})")
        return specs

    def on_scored(self, result: PodResult, spec: PodSpec) -> None:
        prior = [h["score"] for h in spec.base_history if math.isfinite(h["score"])]
        scores = [h["score"] for h in result.history]
        finite = [(v, i) for i, v in enumerate(scores) if math.isfinite(v)]
        best_at = max(finite)[1] if finite else -1
        kind = "fresh" if spec.parent is None else ("continued" if spec.continued else "child")
        if spec.champion and spec.parent is not None:
            self.allocation.promote(spec.parent)  # the champion's own slot continued it
        self.allocation.record(
            PodRecord(
                pod=result.pod_id,
                parent=spec.parent,
                kind=kind,
                rung=len(spec.lineage) + 1,
                steps=int(result.steps_done),
                score=float(result.score),
                prev_best=max(prior, default=-math.inf),
                since_best=len(scores) - 1 - best_at if finite else len(scores),
                epochs_done=int(result.epochs_done),
                epochs=int(spec.epochs),
            )
        )

    def on_failed(self, specs: list[PodSpec]) -> None:
        # A promotion that failed may be tried again from the same parent.
        for spec in specs:
            if spec.continued and spec.parent in self.allocation.promoted:
                self.allocation.promoted.remove(spec.parent)

    def own_state(self) -> dict[str, Any]:
        return {"allocation": asdict(self.allocation)}

    def restore_own(self, state: dict[str, Any]) -> None:
        saved = dict(state.get("allocation") or {})
        saved.setdefault("eta", self.config.eta)
        saved.setdefault("patience", self.config.patience)
        saved.setdefault("grace", self.config.grace)
        self.allocation = Allocation(**saved)

    def legacy_state(self) -> dict[str, Any]:
        saved = self.board.progress.legacy.get("allocation")
        return {"allocation": saved} if isinstance(saved, dict) else {}

    def report(self) -> dict[str, Any]:
        """The budget report (:meth:`Allocation.report`) for the run's selected agent
        (the board's best entry until the final selection)."""
        chosen = str((self.board.selection or {}).get("selected") or "")
        if self.board.get(chosen) is None:
            best = self.board.best()
            chosen = best.pod_id if best else ""
        out = self.allocation.report(
            chosen or None, self.board.progress.env_steps, self.champion_ids()
        )
        if self.champion.yielded:
            out["champion"]["yielded"] = {**self.champion.yielded, "why": self.champion.stopped}
        return out
