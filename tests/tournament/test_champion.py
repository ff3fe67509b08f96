"""The champion line and its challengers (finpod.tournament.champion, schedulers.base)."""

from __future__ import annotations

import numpy as np
import pytest

from finpod.runs.candidates import candidate_set, load_candidates
from finpod.runs.leaderboard import Entry, Leaderboard
from finpod.tournament.champion import holm_passes, paired_test, select
from finpod.tournament.ensemble_candidate import ensemble_members
from finpod.tournament.generator import Generator
from finpod.tournament.modes import MODES
from finpod.tournament.schedulers import make_scheduler
from finpod.tournament.schedulers.base import Context
from finpod.tournament.search import parse_search
from finpod.tournament.settings import TournamentConfig
from tests.tournament.test_halving import SEARCH, _report
from tests.tournament.test_search import REGISTRY

# ----------------------------------------------------------------------------- scheduler


def _scheduler(tmp_path, mode="asha", **over):
    space = parse_search(SEARCH, "slow", {}, registry=REGISTRY)
    settings = dict(
        mode=mode,
        eta=2.0,
        patience=1,
        grace=1,
        fresh_pods=1,
        epsilon=0.0,
        pod_steps=100,
        epochs=1,
        base_pod=True,
    )
    cfg = TournamentConfig(**(settings | over))
    board = Leaderboard(tmp_path, 3, "sharpe")
    gen = Generator(space, cfg, seed=0, num_envs=4)
    context = Context(cfg, gen, board, log=lambda _: None, state_path=tmp_path / "scheduler.json")
    return make_scheduler(context), board


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_champion_line_is_never_cut(tmp_path, mode):
    """The champion scores worst and stalls segment after segment: ASHA would stop it at
    once, yet its next segment is the first thing every free slot gets once it reported,
    and never two of its segments run at once."""
    sched, board = _scheduler(tmp_path, mode=mode)
    champ = sched.next_specs(1, busy=False)[0]
    assert champ.champion and champ.parent is None
    others = [sched.next_specs(1, busy=True) for _ in range(3)]
    assert not any(s.champion for group in others for s in group)  # one segment at a time
    for group in others:
        for spec in group:
            _report(sched, board, spec, 5.0)
    score = 1.0
    for _ in range(4):
        _report(sched, board, champ, score)
        score -= 0.5  # worse every segment: stalled and trailing
        nxt = sched.next_specs(1, busy=True)[0]
        assert nxt.champion and nxt.parent == champ.pod_id and nxt.continued
        assert nxt.hparams == champ.hparams and nxt.env == champ.env
        champ = nxt
    # The board keeps the line's checkpoints it needs though they rank last (top_k = 3).
    assert board.get(champ.lineage[-1]) is not None


def test_a_resumed_run_continues_the_champion_line(tmp_path):
    sched, board = _scheduler(tmp_path)
    champ = sched.next_specs(1, busy=False)[0]
    _report(sched, board, champ, 1.0)
    resumed, _ = _scheduler(tmp_path)
    resumed.board = Leaderboard.load(tmp_path)
    nxt = resumed.next_specs(1, busy=False)[0]
    assert nxt.champion and nxt.parent == champ.pod_id


def test_a_champion_segment_that_failed_runs_again(tmp_path):
    sched, board = _scheduler(tmp_path)
    champ = sched.next_specs(1, busy=False)[0]
    _report(sched, board, champ, 1.0)
    lost = sched.next_specs(1, busy=False)[0]
    sched.failed([lost])
    again = sched.next_specs(1, busy=False)[0]
    assert again.champion and again.parent == champ.pod_id and again.pod_id != lost.pod_id


def test_the_champion_share_of_a_step_budget_is_kept_for_it(tmp_path):
    """Explorers whose env steps are cheaper must not spend the champion's share: once
    only the champion's share is left, a free slot gets the champion's next segment or
    nothing, and the share counts what the line trained and what it runs now."""
    sched, board = _scheduler(tmp_path)
    champ = sched.next_specs(1, busy=False)[0]
    assert sched.champion_reserve(share=250, planned=100) == 150
    assert sched.next_specs(1, busy=True, explore=False) == []  # the champion runs
    assert sched.next_specs(1, busy=True)[0].champion is False  # with budget: explores
    _report(sched, board, champ, 1.0)  # 100 steps trained
    assert sched.champion_reserve(share=250, planned=0) == 150
    nxt = sched.next_specs(1, busy=True, explore=False)
    assert len(nxt) == 1 and nxt[0].champion and nxt[0].parent == champ.pod_id
    _report(sched, board, nxt[0], 1.0)
    _report(sched, board, sched.next_specs(1, busy=True)[0], 1.0)
    assert sched.champion_reserve(share=250, planned=0) == 0  # 300 trained: share spent
    sched.champion.stopped = "2 segments failed in a row"
    assert sched.champion_reserve(share=1000, planned=0) == 0  # a stopped line keeps none


# ----------------------------------------------------------------------------- selection


def _entry(pod, score, champion=False, partial=False, steps=100):
    return Entry(
        pod_id=pod,
        algorithm="ppo",
        hparams={},
        score=score,
        checkpoint=f"checkpoints/{pod}.safetensors",
        champion=champion,
        partial=partial,
        env_steps=steps,
    )


def _board(tmp_path, entries):
    board = Leaderboard(tmp_path, 10, "information_ratio")
    board.entries = sorted(entries, key=lambda e: -e.score)
    return board


def _series(rng, mean, n=252, noise=None):
    common = rng.normal(0.0, 0.003, n) if noise is None else noise
    return common + rng.normal(mean, 0.002, n)


def _candidates(series):
    return candidate_set((cid, 0.0, "pod", r) for cid, r in series.items())


def test_a_challenger_ahead_by_less_than_the_noise_does_not_replace_the_champion(tmp_path):
    rng = np.random.default_rng(3)
    champion = rng.normal(0.0004, 0.003, 252)
    # The same agent with extra noise: +0.55 IR on validation, by luck alone.
    challenger = champion + rng.normal(0.0, 0.002, 252)
    board = _board(tmp_path, [_entry("p00000", 1.9, champion=True), _entry("p00001", 2.1)])
    record = select(
        board,
        _candidates({"p00000": champion, "p00001": challenger}),
        alpha=0.05,
        bars_per_year=252,
    )
    assert record["selected"] == "p00000"
    assert record["decision"].startswith("champion kept")
    test = record["challengers"][0]
    assert test["challenger"] == "p00001" and test["p_value"] > 0.05 and test["delta"] > 0


def test_a_challenger_far_ahead_replaces_the_champion(tmp_path):
    rng = np.random.default_rng(4)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0.0, 0.001, 252)
    challenger = market + rng.normal(0.0006, 0.001, 252)
    board = _board(tmp_path, [_entry("p00000", 0.1, champion=True), _entry("p00007", 9.0)])
    record = select(
        board,
        _candidates({"p00000": champion, "p00007": challenger}),
        alpha=0.05,
        bars_per_year=252,
    )
    assert record["selected"] == "p00007"
    assert record["decision"].startswith("challenger p00007 replaced the champion")
    assert record["best_challenger"]["p_value"] <= 0.05


def test_a_partial_segment_is_never_selected_on_one_score(tmp_path):
    rng = np.random.default_rng(5)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0.0, 0.001, 252)
    cut = market + rng.normal(0.001, 0.001, 252)  # far ahead, but its segment was cut short
    board = _board(
        tmp_path,
        [_entry("p00000", 0.1, champion=True), _entry("p00009", 12.0, partial=True)],
    )
    record = select(
        board, _candidates({"p00000": champion, "p00009": cut}), alpha=0.05, bars_per_year=252
    )
    assert record["selected"] == "p00000"
    assert record["skipped"] == {"p00009": "segment cut short"}
    # The champion's own best checkpoint is its best complete one.
    line = [
        _entry("p00000", 1.0, champion=True),
        _entry("p00004", 3.0, champion=True, partial=True, steps=300),
        _entry("p00002", 2.0, champion=True, steps=200),
    ]
    series = {e.pod_id: champion for e in line}
    record = select(_board(tmp_path, line), _candidates(series), alpha=0.05, bars_per_year=252)
    assert record["incumbent"] == "p00002"


def _line(pod, scores, champion=False, lineage=()):
    """An entry at the end of a line that scored ``scores``, segment by segment."""
    entry = _entry(pod, scores[-1], champion=champion, steps=100 * len(scores))
    entry.history = [{"env_steps": 100 * (i + 1), "score": v} for i, v in enumerate(scores)]
    entry.lineage = list(lineage)
    return entry


def test_a_line_that_scored_one_segment_is_never_selected_on_one_score(tmp_path):
    """A fresh pod's first segment is the noisiest score a run has (a 131k-step pod once
    replaced a champion on its one score and tested below it): it is neither a challenger
    nor an ensemble member until its line has scored again, continued or copied."""
    rng = np.random.default_rng(7)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0.0, 0.001, 252)
    lucky = market + rng.normal(0.0006, 0.001, 252)  # far ahead on validation
    line = [_line("p00000", [0.1], True), _line("p00002", [0.1, 0.2], True, ["p00000"])]
    fresh = _line("p00005", [9.0])
    series = {"p00000": champion, "p00002": champion, "p00005": lucky}
    board = _board(tmp_path, [*line, fresh])
    record = select(board, _candidates(series), alpha=0.05, bars_per_year=252, min_scores=2)
    assert record["selected"] == "p00002"
    assert record["skipped"] == {"p00005": "one score: its line scored one segment"}
    assert [e.pod_id for e in ensemble_members(board, 3, 2)] == ["p00002", "p00000"]
    # Outside "asha" (min_scores = 1) a pod of one epoch has one score by design.
    assert select(board, _candidates(series), alpha=0.05, bars_per_year=252)["selected"] == (
        "p00005"
    )
    # Continued once, its level is two scores (9.0 beside its continuation's 8.5): now
    # its line is a challenger like any other, and its best checkpoint replaces the champion.
    again = _line("p00007", [9.0, 8.5], lineage=["p00005"])
    series["p00007"] = lucky
    board = _board(tmp_path, [*line, fresh, again])
    record = select(board, _candidates(series), alpha=0.05, bars_per_year=252, min_scores=2)
    assert record["selected"] == "p00005" and not record["skipped"]
    assert {"p00005", "p00007"} <= {e.pod_id for e in ensemble_members(board, 3, 2)}


def test_the_ensemble_goes_through_the_same_test(tmp_path):
    rng = np.random.default_rng(6)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0.0003, 0.001, 252)
    blend_close = champion + rng.normal(0.00003, 0.0003, 252)  # higher score, same agent
    blend_far = market + rng.normal(0.0012, 0.001, 252)
    board = _board(tmp_path, [_entry("p00000", 3.0, champion=True), _entry("p00001", 1.0)])
    other = market + rng.normal(0.0, 0.001, 252)
    for blend, won in ((blend_close, False), (blend_far, True)):
        record = select(
            board,
            _candidates({"p00000": champion, "p00001": other, "ensemble[x]": blend}),
            alpha=0.05,
            bars_per_year=252,
            ensemble_id="ensemble[x]",
            ensemble_name="ensemble-2",
        )
        assert record["ensemble"]["selected"] is won
        assert record["selected"] == ("ensemble-2" if won else "p00000")
        # Its tracking error is reported beside the single agent's.
        assert set(record["tracking_error"]) == {"p00000", "ensemble[x]"}


def test_holm_keeps_the_chance_of_any_false_replacement_at_alpha():
    rng = np.random.default_rng(7)
    false = 0
    for trial in range(60):
        base = rng.normal(0.0003, 0.003, 252)
        tests = [
            # 800 draws resolve p to 1/801, below the strictest Holm level 0.05 / 8.
            paired_test(
                base, base + rng.normal(0, 0.002, 252), bars_per_year=252, seed=trial, draws=800
            )
            for _ in range(8)
        ]
        false += bool(holm_passes(tests, 0.05))
    assert false <= 9  # 5 % of 60 is 3; binomial 99.9 % bound


def test_the_paired_test_refuses_non_finite_returns():
    with pytest.raises(ValueError, match="finite"):
        paired_test(np.array([0.1, np.nan, 0.2, 0.1]), np.zeros(4), bars_per_year=252)


def test_without_a_champion_the_incumbent_is_the_best_complete_entry(tmp_path):
    rng = np.random.default_rng(8)
    a, b = rng.normal(0, 0.003, 252), rng.normal(0, 0.003, 252)
    board = _board(tmp_path, [_entry("p00003", 5.0, partial=True), _entry("p00001", 1.0)])
    record = select(board, _candidates({"p00003": a, "p00001": b}), alpha=0.05, bars_per_year=252)
    assert record["selected"] == "p00001" and record["incumbent_role"] == "best complete entry"


def test_a_perturbed_copy_keeps_the_observation_width_of_its_parent(tmp_path):
    """Deciding every bar (decision_interval = 1) drops the schedule column of the
    observation: a copy of a parent deciding weekly never decides every bar, and back,
    so it always loads its parent's weights."""
    raw = {**SEARCH, "env": {"decision_interval": [1, 5, 10]}}
    space = parse_search(raw, "slow", {}, registry=REGISTRY, env_base={"decision_interval": 5})
    cfg = TournamentConfig(perturb=10.0, epsilon=0.0)
    gen = Generator(space, cfg, seed=0, num_envs=4)
    for interval in (1, 5):
        parent = _entry("p00000", 1.0)
        parent.hparams, parent.env = {"tau": 0.01, "lr": 1e-3}, {"decision_interval": interval}
        parent.algorithm = "slow"
        kids = [gen.child(parent, i).env["decision_interval"] for i in range(1, 60)]
        assert all((k > 1) == (interval > 1) for k in kids)
        if interval > 1:
            assert set(kids) == {5, 10}  # still searched within the same layout


def test_each_line_sends_one_challenger_its_best_complete_checkpoint(tmp_path):
    """A line's checkpoints are near copies: one test per line, so Holm's correction
    counts lines, not checkpoints. A fork off the champion is a line of its own."""
    rng = np.random.default_rng(9)
    market = rng.normal(0.0, 0.003, 252)
    series = {p: market + rng.normal(0.0, 0.001, 252) for p in ("p00000", "p00003")}
    series |= {p: market + rng.normal(0.0002, 0.001, 252) for p in ("p00001", "p00002", "p00004")}
    entries = [
        _entry("p00000", 1.0, champion=True),
        _entry("p00003", 2.0, champion=True),
        _entry("p00001", 2.5),
        _entry("p00002", 3.0),  # continues p00001: the same line, its best
        _entry("p00004", 2.2),  # a fork off the champion's p00003
    ]
    entries[1].lineage = ["p00000"]
    entries[3].lineage = ["p00001"]
    entries[4].lineage = ["p00000", "p00003"]
    record = select(_board(tmp_path, entries), _candidates(series), alpha=0.05, bars_per_year=252)
    assert sorted(t["challenger"] for t in record["challengers"]) == ["p00002", "p00004"]


def test_the_champion_hands_over_a_checkpoint_in_a_run_of_high_scores_not_a_lucky_one(
    tmp_path,
):
    """Its first segment scored 2.2 by luck, then 1.0 and 1.1; later segments hold 1.8 to
    2.0. The single maximum is the lucky one; the smoothed score picks the line's level."""
    scores = [2.2, 1.0, 1.1, 1.8, 1.9, 2.0]
    entries = []
    for i, score in enumerate(scores):
        e = _entry(f"p{i:05d}", score, champion=True, steps=100 * (i + 1))
        e.lineage = [f"p{j:05d}" for j in range(i)]
        e.history = [
            {"env_steps": 100 * (j + 1), "score": s} for j, s in enumerate(scores[: i + 1])
        ]
        entries.append(e)
    rng = np.random.default_rng(10)
    series = {e.pod_id: rng.normal(0.0, 0.003, 252) for e in entries}
    record = select(_board(tmp_path, entries), _candidates(series), alpha=0.1, bars_per_year=252)
    assert record["incumbent"] == "p00005"


# ----------------------------------------------------------------------------- yield


def _scored(sched, board, spec, score, returns, steps=100, epochs_done=1):
    """A pod's result with its validation returns: board first, then the scheduler."""
    _report(sched, board, spec, score, epochs_done, steps_done=steps, returns=returns)


def _champion_segments(sched, board, returns, count, scores=None):
    """The champion's first ``count`` segments, each scored on ``returns`` (at
    ``scores``, else 1.0 each); the explorer dispatched beside the first one is
    returned."""
    champ = sched.next_specs(1, busy=False)[0]
    explorer = sched.next_specs(1, busy=True)[0]
    for k in range(count):
        assert champ.champion
        _scored(sched, board, champ, 1.0 if scores is None else scores[k], returns)
        champ = sched.next_specs(1, busy=True)[0]
    return explorer, champ


def test_a_challenger_far_ahead_mid_run_makes_the_champion_yield_its_slot(tmp_path):
    """Once the champion trained its grace segments, one complete challenger segment far
    ahead on the paired test stops the line: no more champion segments, no reserve, and
    the test is in the state a resumed run reads."""
    rng = np.random.default_rng(4)
    market = rng.normal(0.0, 0.003, 252)
    sched, board = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    explorer, _ = _champion_segments(sched, board, market + rng.normal(0, 0.001, 252), 2)
    assert not sched.champion.stopped
    _scored(sched, board, explorer, 9.0, market + rng.normal(0.0008, 0.001, 252))
    assert sched.champion.stopped.startswith(f"yielded its slot to {explorer.pod_id}")
    assert sched.champion.yielded["p_value"] <= 0.01 and sched.champion.yielded["segments"] == 2
    assert sched.champion_reserve(share=10_000, planned=0) == 0
    assert not any(s.champion for _ in range(3) for s in sched.next_specs(1, busy=True))
    resumed, _ = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    assert resumed.champion.yielded == sched.champion.yielded


def test_a_challenger_ahead_by_less_than_the_level_does_not_stop_the_champion(tmp_path):
    """The same agent with extra noise (ahead by luck) never makes the champion yield,
    nor does a challenger far ahead before the champion trained its grace segments, nor
    a segment cut short, nor any challenger when yield_alpha = 0."""
    rng = np.random.default_rng(3)
    base = rng.normal(0.0004, 0.003, 252)
    sched, board = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    explorer, _ = _champion_segments(sched, board, base, 2)
    _scored(sched, board, explorer, 2.0, base + rng.normal(0.0, 0.002, 252))
    assert not sched.champion.stopped

    far = base + 0.002
    early, board_early = _scheduler(tmp_path / "early", grace=2, yield_alpha=0.01)
    explorer, _ = _champion_segments(early, board_early, base, 1)
    _scored(early, board_early, explorer, 9.0, far)
    assert not early.champion.stopped  # one champion segment: still in its grace

    cut, board_cut = _scheduler(tmp_path / "cut", grace=2, yield_alpha=0.01)
    explorer, _ = _champion_segments(cut, board_cut, base, 2)
    _scored(cut, board_cut, explorer, 9.0, far, steps=40)
    assert not cut.champion.stopped  # the budget's end cut the segment short
    fitted = cut.next_specs(1, busy=True)[0]
    fitted.steps = 40  # fitted to what was left of the budget: short from its start
    _scored(cut, board_cut, fitted, 9.0, far, steps=40)
    assert not cut.champion.stopped

    never, board_never = _scheduler(tmp_path / "never", grace=2, yield_alpha=0.0)
    explorer, _ = _champion_segments(never, board_never, base, 2)
    _scored(never, board_never, explorer, 9.0, far)
    assert not never.champion.stopped


def test_a_champion_still_raising_its_best_does_not_yield_until_it_stalls(tmp_path):
    """A challenger far ahead on the paired test does not stop a champion whose last
    ``patience`` segments raised its best (smoothed) score: it may still catch up. Once
    ``patience`` segments go by without a new best, the same challenger stops it."""
    rng = np.random.default_rng(5)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0, 0.001, 252)
    far = market + rng.normal(0.0008, 0.001, 252)
    runs = {
        "climbing": ([1.0, 2.0, 3.0], False),  # each segment a new best
        "one flat": ([1.0, 2.0, 3.0, 1.0], False),  # its best is one segment old
        "stalled": ([1.0, 2.0, 3.0, 1.0, 1.0], True),  # two segments without a new best
    }
    for name, (scores, stops) in runs.items():
        sched, board = _scheduler(tmp_path / name, grace=2, patience=2, yield_alpha=0.01)
        explorer, _ = _champion_segments(sched, board, champion, len(scores), scores)
        _scored(sched, board, explorer, 9.0, far)
        assert bool(sched.champion.stopped) is stops, name
    assert sched.champion.yielded["segments"] == 5


def test_a_resumed_run_compares_challengers_with_the_champion_it_recorded(tmp_path):
    """The champion's returns come back from the candidates record: a resumed run yields
    to the same challenger the stopped one would have."""
    from finpod.runs.candidates import record_candidate

    rng = np.random.default_rng(4)
    market = rng.normal(0.0, 0.003, 252)
    champion = market + rng.normal(0, 0.001, 252)
    sched, board = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    explorer, _ = _champion_segments(sched, board, champion, 2)
    for pod in sched.champion.pods[:2]:
        record_candidate(tmp_path, pod, champion, score=1.0)
    resumed, _ = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    resumed.board = Leaderboard.load(tmp_path)
    resumed.remember(load_candidates(tmp_path))
    assert [pod for pod, _ in resumed.champion_scores] == sched.champion.pods[:2]
    _scored(resumed, resumed.board, explorer, 9.0, market + rng.normal(0.0008, 0.001, 252))
    assert resumed.champion.stopped.startswith("yielded its slot")


def test_a_mid_run_look_compares_with_the_champion_level_not_its_lucky_segment(tmp_path):
    """The champion scored 3.0 once between 0.1 and 0.2 (luck): a challenger clearly
    better than the line's level, but no better than that lucky segment's returns, makes
    it yield; compared with the lucky segment it would not have."""
    rng = np.random.default_rng(7)
    market = rng.normal(0.0, 0.003, 252)
    level = market + rng.normal(0.0, 0.001, 252)
    lucky = market + rng.normal(0.0008, 0.001, 252)
    sched, board = _scheduler(tmp_path, grace=3, yield_alpha=0.01)
    champ = sched.next_specs(1, busy=False)[0]
    explorer = sched.next_specs(1, busy=True)[0]
    for score, returns in ((0.1, level), (3.0, lucky), (0.2, level), (0.3, level)):
        _scored(sched, board, champ, score, returns)
        champ = sched.next_specs(1, busy=True)[0]
    _scored(sched, board, explorer, 2.9, market + rng.normal(0.0008, 0.001, 252))
    assert sched.champion.stopped.startswith(f"yielded its slot to {explorer.pod_id}")


def test_a_long_champion_line_keeps_only_the_returns_it_may_still_be_compared_on(tmp_path):
    """Whatever the scores, the checkpoint a challenger would be compared with has its
    returns at hand, and no more than three series are held."""
    rng = np.random.default_rng(11)
    sched, board = _scheduler(tmp_path, grace=2, yield_alpha=0.01)
    champ = sched.next_specs(1, busy=False)[0]
    for _ in range(40):
        _scored(sched, board, champ, float(rng.normal(0, 2)), rng.normal(0, 0.003, 252))
        assert sched._champion_best() in sched.champion_returns
        assert len(sched.champion_returns) <= 3
        champ = sched.next_specs(1, busy=True)[0]


def test_yield_alpha_is_off_by_default_and_a_bad_level_is_one_line():
    from finpod.errors import FinpodError
    from finpod.tournament.settings import parse_tournament

    assert parse_tournament({}).yield_alpha == 0.0
    assert parse_tournament({"yield_alpha": 0.01}).yield_alpha == 0.01
    for bad in (1.0, -0.1, "0.01"):
        with pytest.raises(FinpodError) as err:
            parse_tournament({"yield_alpha": bad})
        assert "yield_alpha" in str(err.value) and "\n" not in str(err.value)


def test_explorers_fill_only_while_the_champion_has_half_a_segment_or_more_to_train(tmp_path):
    """How long an explorer may train beyond a step budget (``fill``): until the champion
    has trained its share, at the pace of its scored segments; nothing before its first
    score, with less than half of one of its segments left, or once the line stopped."""
    sched, _ = _scheduler(tmp_path)
    assert sched.champion_seconds_left(500.0) is None  # no pace yet
    line = sched.champion
    line.pods, line.steps, line.seconds = ["p00000", "p00002"], 200, 4.0  # 2 s a segment
    assert sched.champion_seconds_left(500.0) == pytest.approx(6.0)  # 300 steps at 50 a second
    assert sched.champion_seconds_left(500.0, running_s=4.5) == pytest.approx(1.5)
    assert sched.champion_seconds_left(500.0, running_s=5.5) is None  # 0.5 s: under 1 s
    line.stopped = "yielded its slot"
    assert sched.champion_seconds_left(500.0) is None


def test_fill_is_on_by_default_and_must_be_true_or_false():
    from finpod.errors import FinpodError
    from finpod.tournament.settings import parse_tournament

    assert parse_tournament({}).fill is True
    assert parse_tournament({"fill": False}).fill is False
    for bad in (1, "yes"):
        with pytest.raises(FinpodError, match="tournament.fill must be true or false"):
            parse_tournament({"fill": bad})
