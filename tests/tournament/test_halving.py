"""``mode = "asha"``: leaders that still improve are continued, the rest stop; the
allocation is deterministic under a seed, survives a resume and is reported."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from finpod.runs.leaderboard import Leaderboard
from finpod.tournament.generator import Generator, PodSpec
from finpod.tournament.pod_results import PodResult
from finpod.tournament.schedulers.asha import (
    STALLED,
    TRAILED,
    Allocation,
    HalvingScheduler,
    PodRecord,
)
from finpod.tournament.schedulers.base import Context
from finpod.tournament.search import parse_search
from finpod.tournament.settings import TournamentConfig
from finpod.tournament.updater import entry_of
from tests.tournament.test_search import REGISTRY

SEARCH = {"algorithms": ["slow"], "slow": {"tau": {"low": 0.001, "high": 0.02}, "lr": 1e-3}}


def _scheduler(tmp_path, seed=0, eta=2.0, board=None, patience=1, grace=1, fresh_pods=2):
    space = parse_search(SEARCH, "slow", {}, registry=REGISTRY)
    cfg = TournamentConfig(
        mode="asha",
        eta=eta,
        patience=patience,
        grace=grace,
        fresh_pods=fresh_pods,
        epsilon=0.0,
        pod_steps=100,
        epochs=1,
    )
    board = board if board is not None else Leaderboard(tmp_path, 10, "sharpe")
    gen = Generator(space, cfg, seed=seed, num_envs=4)
    context = Context(cfg, gen, board, log=lambda _: None, state_path=tmp_path / "scheduler.json")
    return HalvingScheduler(context), board


def _report(
    sched,
    board,
    spec: PodSpec,
    score: float,
    epochs_done: int = 1,
    *,
    steps_done: int = 100,
    returns=None,
) -> None:
    """What the orchestrator does with a pod's result: board first, then the scheduler;
    ``returns``: its per-bar validation returns, when a test needs them."""
    history = [*spec.base_history, {"env_steps": 100 * (len(spec.lineage) + 1), "score": score}]
    result = PodResult(
        pod_id=spec.pod_id,
        algorithm=spec.algorithm,
        hparams=dict(spec.hparams),
        score=score,
        history=history,
        env_steps=100 * (len(spec.lineage) + 1),
        steps_done=steps_done,
        checkpoint=b"weights",
        epochs_done=epochs_done,
        env=dict(spec.env),
        returns=None if returns is None else np.asarray(returns, dtype=np.float64),
    )
    board.record(entry_of(result, spec), result.checkpoint)
    sched.scored(result, spec)


def _start(sched, board, scores):
    """Fresh pods with these scores, reported in order."""
    specs = [sched.next_specs(1, busy=False)[0] for _ in scores]
    assert all(s.parent is None for s in specs)
    for spec, score in zip(specs, scores, strict=True):
        _report(sched, board, spec, score)
    return specs


def test_a_pod_that_leads_its_rung_and_improves_is_continued_unchanged(tmp_path):
    sched, board = _scheduler(tmp_path)
    first, second = _start(sched, board, [1.0, 3.0])
    nxt = sched.next_specs(1, busy=False)
    assert len(nxt) == 1
    cont = nxt[0]
    assert cont.parent == second.pod_id and cont.continued
    assert cont.hparams == second.hparams and cont.env == second.env
    assert cont.lineage == [second.pod_id]
    # It keeps going while it improves: its continuation is promoted again.
    _report(sched, board, cont, 4.0)
    again = sched.next_specs(1, busy=False)[0]
    assert again.parent == cont.pod_id and again.continued and len(again.lineage) == 2


def test_a_pod_that_stalls_is_not_continued_even_at_the_top(tmp_path):
    sched, board = _scheduler(tmp_path)
    _, lead = _start(sched, board, [1.0, 3.0])
    cont = sched.next_specs(1, busy=False)[0]
    _report(sched, board, cont, 2.5)  # worse than its own 3.0: stalled
    nxt = sched.next_specs(1, busy=False)[0]
    assert nxt.parent != cont.pod_id
    record = next(p for p in sched.allocation.pods() if p.pod == cont.pod_id)
    assert sched.allocation.stop_reason(record) == STALLED


def test_with_patience_a_lineage_may_dip_once_but_not_twice(tmp_path):
    sched, board = _scheduler(tmp_path, patience=2)
    _start(sched, board, [1.0, 3.0])
    dip = sched.next_specs(1, busy=False)[0]
    _report(sched, board, dip, 2.5)  # below its best 3.0, one segment ago
    again = sched.next_specs(1, busy=False)[0]
    assert again.parent == dip.pod_id and again.continued
    _report(sched, board, again, 2.9)  # two segments without a new best: stalled
    assert sched.next_specs(1, busy=False)[0].parent != again.pod_id


def test_a_pod_that_trails_its_rung_is_not_continued(tmp_path):
    sched, board = _scheduler(tmp_path, eta=2.0)
    specs = _start(sched, board, [1.0, 2.0, 3.0, 4.0])
    promoted = [sched.next_specs(1, busy=False)[0].parent for _ in range(3)]
    # The top ceil(4 / 2) = 2 of rung 1 go on (best first); the others never.
    assert promoted[:2] == [specs[3].pod_id, specs[2].pod_id]
    assert promoted[2] not in {specs[0].pod_id, specs[1].pod_id}
    record = next(p for p in sched.allocation.pods() if p.pod == specs[0].pod_id)
    assert sched.allocation.stop_reason(record) == TRAILED


def test_nothing_promotable_means_exploring_perturbed_copies_of_leaders(tmp_path):
    sched, board = _scheduler(tmp_path)
    _, lead = _start(sched, board, [1.0, 3.0])
    cont = sched.next_specs(1, busy=False)[0]  # the lead goes on ...
    explore = sched.next_specs(1, busy=False)[0]  # ... and the next slot explores
    assert not explore.continued
    assert explore.parent in {s.pod_id for s in board.entries}
    assert cont.pod_id != explore.pod_id


def test_the_allocation_is_deterministic_under_a_seed(tmp_path):
    def run(path, seed):
        sched, board = _scheduler(path, seed=seed)
        out = []
        scores = iter([1.0, 3.0, 2.0, 3.5, 0.5, 4.0, 3.9, 4.5, 2.0, 5.0])
        for _ in range(10):
            spec = sched.next_specs(1, busy=False)[0]
            out.append((spec.pod_id, spec.parent, spec.continued, spec.seed, spec.hparams))
            _report(sched, board, spec, next(scores))
        return out, sched.report()

    a, report_a = run(tmp_path / "a", 7)
    b, report_b = run(tmp_path / "b", 7)
    c, _ = run(tmp_path / "c", 8)
    assert a == b and report_a == report_b
    assert a != c


def test_a_resumed_run_promotes_the_same_pods(tmp_path):
    sched, board = _scheduler(tmp_path)
    _start(sched, board, [1.0, 3.0])
    cont = sched.next_specs(1, busy=False)[0]
    resumed, _ = _scheduler(tmp_path, board=Leaderboard.load(tmp_path))
    # The promotion already dispatched is not repeated after a resume.
    assert resumed.allocation.promoted == [cont.parent]
    nxt = resumed.next_specs(1, busy=False)[0]
    assert not (nxt.continued and nxt.parent == cont.parent)


def test_the_budget_report_gives_the_selected_lineage_and_its_share(tmp_path):
    sched, board = _scheduler(tmp_path)
    _start(sched, board, [1.0, 3.0])
    a = sched.next_specs(1, busy=False)[0]
    _report(sched, board, a, 4.0)
    b = sched.next_specs(1, busy=False)[0]
    _report(sched, board, b, 5.0)
    report = sched.report()
    assert report["scheme"] == "asha"
    assert report["selected"]["pod"] == b.pod_id
    assert report["selected"]["lineage"] == [a.parent, a.pod_id, b.pod_id]
    assert report["selected"]["env_steps"] == 300
    assert report["selected"]["share"] == pytest.approx(300 / 400)
    assert report["promotions"] == 2 and report["fresh"] == 2
    assert sum(p["env_steps"] for p in report["per_pod"]) == 400


def test_a_segment_cut_by_the_time_cap_is_reported_as_such():
    alloc = Allocation(eta=3.0)
    alloc.record(PodRecord("p1", None, "fresh", 1, 50, 1.0, -math.inf, epochs_done=0, epochs=1))
    assert alloc.stop_reason(alloc.pods()[0]) == "time_cap"


def _quickstart(base_pod: bool):
    from finpod.strategy import load_strategy
    from finpod.tournament.launch import resolve

    strategy = load_strategy(Path(__file__).resolve().parents[2] / "strategies/quickstart.toml")
    strategy = dataclasses.replace(
        strategy, tournament={**strategy.tournament, "base_pod": base_pod}
    )
    config, space, seed = resolve(strategy)
    return strategy, Generator(space, config, seed, num_envs=4)


def test_the_base_pod_trains_the_strategys_own_agent_and_controls(tmp_path):
    strategy, gen = _quickstart(base_pod=True)
    env = strategy.config
    lead = gen.base(0)
    assert lead.algorithm == strategy.algorithm and lead.parent is None
    assert {k: lead.hparams[k] for k in strategy.hparams} == strategy.hparams
    assert lead.env and all(getattr(env, k) == v for k, v in lead.env.items())
    # Fresh pods draw their own hyperparameters and controls.
    drawn = gen.next_group(Leaderboard(tmp_path / "b", 10, "sharpe"), 1, 4)
    assert all(m.hparams["learning_rate"] != strategy.hparams["learning_rate"] for m in drawn)


def test_a_line_that_trails_another_line_with_fewer_steps_stops():
    alloc = Allocation(eta=2.0, patience=3)

    def add(pod, parent, rung, score, since_best=0):
        kind = "fresh" if parent is None else "continued"
        alloc.record(PodRecord(pod, parent, kind, rung, 100, score, -math.inf, since_best, 1, 1))

    # Line A always reaches the next rung first, so it leads every rung alone ...
    add("a1", None, 1, 1.0)
    add("a2", "a1", 2, 1.5)
    add("a3", "a2", 3, 2.0)
    # ... while line B, one rung behind, scores far higher with fewer env steps.
    add("b1", None, 1, 3.0)
    add("b2", "b1", 2, 4.0)
    ready = [p.pod for p in alloc.promotable({"a3", "b2"})]
    assert ready == ["b2"]
    a3 = next(p for p in alloc.pods() if p.pod == "a3")
    assert alloc.stop_reason(a3) == TRAILED


def test_an_explorer_copies_the_best_pod_of_a_leading_line_not_a_trailing_line(tmp_path):
    sched, board = _scheduler(tmp_path, patience=1)
    weak, strong = _start(sched, board, [1.0, 3.0])
    # The weak line piles up checkpoints on the board (a perturbed copy and its own
    # continuation), the strong one stalls: nothing is promotable, so the slot explores.
    cont = sched.next_specs(1, busy=False)[0]
    assert cont.parent == strong.pod_id
    _report(sched, board, cont, 2.0)  # the strong line stalls below its 3.0
    for score in (1.2, 1.4, 1.6):
        spec = dataclasses.replace(
            sched.generator.child(board.get(weak.pod_id), sched.take_ids(1), perturb=False),
        )
        _report(sched, board, spec, score)
        sched.allocation.promote(spec.pod_id)  # never continued: only its board entry counts
    parents = [sched.next_specs(1, busy=False)[0] for _ in range(20)]
    assert all(not p.continued for p in parents)
    # Every explorer copies the strong line's best pod (3.0), never the weak line, though
    # the weak line holds four of the board's six entries.
    assert {p.parent for p in parents} == {strong.pod_id}


def test_explorers_start_from_scratch_until_there_are_fresh_pods_lines_not_entries(tmp_path):
    sched, board = _scheduler(tmp_path, fresh_pods=3)
    _, lead = _start(sched, board, [1.0, 3.0])
    for score in (3.5, 4.0):  # the lead line fills the board with its segments
        cont = sched.next_specs(1, busy=False)[0]
        assert cont.continued
        _report(sched, board, cont, score)
    for entry in board.entries:
        sched.allocation.promote(entry.pod_id)  # nothing is promotable: the slot explores
    assert len(board) >= 3
    # Four entries, two lines: the explorer draws the third line from scratch.
    third = sched.next_specs(1, busy=False)[0]
    assert third.parent is None
    _report(sched, board, third, 0.5)
    assert sched.next_specs(1, busy=False)[0].parent is not None  # three lines: it copies


def test_an_explorer_copies_a_line_at_its_level_not_a_lucky_segment_that_fell_back(tmp_path):
    sched, board = _scheduler(tmp_path, patience=1)
    spiky, steady = _start(sched, board, [0.5, 1.6])

    def go_on(parent, score):
        spec = sched.generator.child(board.get(parent.pod_id), sched.take_ids(1), perturb=False)
        _report(sched, board, spec, score)
        return spec

    # One line scores 2.5 once between −0.2 and −0.2; the other holds 1.6, 2.4, 2.0.
    lucky = go_on(go_on(spiky, -0.2), 2.5)
    go_on(lucky, -0.2)
    line = [steady, go_on(steady, 2.4)]
    line.append(go_on(line[-1], 2.0))
    for entry in board.entries:
        sched.allocation.promote(entry.pod_id)  # nothing is promotable: every slot explores
    parents = {sched.next_specs(1, busy=False)[0].parent for _ in range(20)}
    # The lucky 2.5 (level 0.7) is the board's best score, yet only the steady line
    # (level 2.0 to 2.2) is copied.
    assert board.best().pod_id == lucky.pod_id
    assert parents and parents <= {s.pod_id for s in line}


@pytest.mark.parametrize("grace", [1, 3])
def test_a_line_in_its_grace_period_is_continued_though_it_trails(tmp_path, grace):
    sched, board = _scheduler(tmp_path, grace=grace)
    slow, fast = _start(sched, board, [-0.5, 2.0])
    # Both lines go on while below rung `grace`: the slow starter too, though it trails the
    # other line by 2.5 and fell (its first score is its best so far).
    cont = [sched.next_specs(1, busy=False)[0] for _ in range(2)]
    continued = {c.parent for c in cont if c.continued}
    if grace == 1:
        assert continued == {fast.pod_id}
        record = next(p for p in sched.allocation.pods() if p.pod == slow.pod_id)
        assert sched.allocation.stop_reason(record) == TRAILED
    else:
        assert continued == {fast.pod_id, slow.pod_id}
        for c, score in zip(cont, [2.1, -0.6], strict=True):
            _report(sched, board, c, score)
        # At rung 2 < 3 the slow line is continued again, though it fell: still in grace.
        again = {s.parent for s in (sched.next_specs(1, busy=False)[0] for _ in range(2))}
        assert cont[1].pod_id in again


def test_a_line_behind_by_less_than_the_noise_goes_on_and_one_further_behind_stops():
    def alloc_with(b_score: float) -> tuple[Allocation, PodRecord]:
        alloc = Allocation(eta=2.0, patience=3)

        def add(pod, parent, rung, score):
            kind = "fresh" if parent is None else "continued"
            alloc.record(PodRecord(pod, parent, kind, rung, 100, score, -math.inf, 0, 1, 1))

        # Line A's segment-to-segment changes +0.5, −0.3, +0.1, +0.3: noise 0.21.
        for i, score in enumerate([1.0, 1.5, 1.2, 1.3, 1.6]):
            add(f"a{i + 1}", f"a{i}" if i else None, i + 1, score)
        add("b1", None, 5, b_score)  # line B (a perturbed copy's line would do the same)
        b = next(p for p in alloc.pods() if p.pod == "b1")
        return alloc, b

    alloc, b = alloc_with(1.5)
    assert round(alloc.noise(), 2) == 0.21
    assert alloc.stop_reason(b) is not TRAILED  # behind a5 (1.6) by 0.1 < 0.21
    assert "b1" in {p.pod for p in alloc.promotable({"a5", "b1"})}
    alloc, b = alloc_with(1.3)  # behind by 0.3 > 0.21
    assert alloc.stop_reason(b) == TRAILED
    assert "b1" not in {p.pod for p in alloc.promotable({"a5", "b1"})}


def test_a_line_waiting_for_a_slot_goes_before_a_second_fork_of_a_running_line():
    def alloc_with(grace: int, line_b: list[float]) -> Allocation:
        alloc = Allocation(eta=2.0, patience=3, grace=grace)

        def add(pod, parent, rung, score, kind="continued"):
            kind = "fresh" if parent is None else kind
            alloc.record(PodRecord(pod, parent, kind, rung, 100, score, -math.inf, 0, 1, 1))

        # Line A is deep and forked: a continuation a5 (itself continued, running) and a
        # perturbed copy c5, both scoring well.
        for i, score in enumerate([1.0, 1.8, 3.0, 3.9]):
            add(f"a{i + 1}", f"a{i}" if i else None, i + 1, score)
        add("c5", "a4", 5, 4.3, kind="child")
        add("a5", "a4", 5, 4.2)
        for i, score in enumerate(line_b):
            add(f"b{i + 1}", f"b{i}" if i else None, i + 1, score)
        for pod in ("a1", "a2", "a3", "a4", "a5", *[f"b{i}" for i in range(1, len(line_b))]):
            alloc.promote(pod)
        return alloc

    # Line B in its grace period (rung 2 < 3), far behind: its pod goes first.
    ready = [p.pod for p in alloc_with(3, [0.5, 0.9]).promotable({"a5", "c5", "b2"})]
    assert ready == ["b2", "c5"]
    # Out of grace, line B level with line A at rung 5 (within the noise, 0.26): its pod
    # goes before line A's second fork, though c5 scored higher (deepest-first, then
    # best-first, would pick c5).
    alloc = alloc_with(1, [1.1, 2.0, 3.3, 4.0, 4.25])
    assert round(alloc.noise(), 2) == 0.26
    ready = [p.pod for p in alloc.promotable({"c5", "b5"})]
    assert ready == ["b5", "c5"]


def test_a_line_with_no_continuation_running_is_served_before_a_deeper_rung():
    """Line A has a continuation running and a fork at rung 3; line B waits at rung 1.
    B goes first: deepest-first alone would hand every slot to A's forks."""
    alloc = Allocation(eta=2.0, patience=1, grace=1)
    for pod, parent, kind, rung, score in (
        ("a0", None, "fresh", 1, 3.0),
        ("b0", None, "fresh", 1, 3.5),
        ("a1", "a0", "continued", 2, 4.0),
        ("a2", "a1", "child", 3, 5.0),
    ):
        alloc.record(PodRecord(pod, parent, kind, rung, 100, score, -math.inf))
    alloc.promote("a0")
    alloc.promote("a1")  # a1's continuation is running: not scored yet
    order = [p.pod for p in alloc.promotable({"a0", "b0", "a1", "a2"})]
    assert order == ["b0", "a2"]
