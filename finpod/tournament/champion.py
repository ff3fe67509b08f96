"""The final selection of a tournament: the champion, and challengers that must beat it on
evidence.

The maximum of many noisy validation scores is mostly luck: a fork that scored 7.79
against its sibling's 7.64 on one validation year is not better, and a segment cut short
by the budget's end is one more draw. So a tournament does not hand over its top entry.
It hands over its **champion** (``base_pod = true``: the best checkpoint of the line that
trained the strategy's own settings without being cut, as one learner of the file would
have picked it) unless a **challenger** beats it by more than the noise:

- **The test is paired.** Both agents' scored validation series (per-bar active returns
  for an active score) are compared on the *same* bars, so the market's common moves
  cancel. The statistic is the difference of their annualized mean/std (the information
  ratio for ``information_ratio``, the Sharpe otherwise); its null distribution comes from
  a moving-block bootstrap of the bar indices (blocks keep the serial dependence that
  decision intervals and trends put in daily returns), drawn jointly for both series and
  centred on the observed difference. ``p`` is one-sided: the chance of a difference at
  least this large if the two agents were equally good.
- **One challenger per line, one level for all.** A line is what grew from one fresh pod
  or from one fork off the champion; its checkpoints are near copies of each other, so
  each line sends its best complete checkpoint. Holm's step-down correction over the lines
  keeps the chance that *any* of them replaces an equally good champion at
  ``tournament.challenge_alpha``. Of those that pass, the largest difference wins.
- **What one validation year can tell.** On T validation bars the IR of one agent is
  known to about ±√(bars per year / T); two agents whose active returns are uncorrelated
  differ by chance by √2 times that. On 220 daily bars a challenger uncorrelated with the
  champion needs about +1 IR to pass at 0.30 (the default) and +2 IR at 0.10, a fork that
  trades like it much less. A challenger that does not pass may still be better: the
  champion is kept because it is not shown to be worse, never because it is shown to be
  best.
- **Never on one score.** An entry whose segment was cut short (the budget's end, the
  wall-time cap) is not a challenger, and neither its score nor its test decides; nor,
  under ``mode = "asha"``, is a line that has scored one segment (:func:`one_score`: a
  fresh pod neither continued nor copied, whose level would be its first and noisiest
  score).
- **The ensemble is a challenger too.** The mean target weights of the top complete
  entries replace the selected single agent only when they pass the same test against it;
  their tracking error is reported beside the single agent's (averaging targets shrinks
  the bets).
- **Without a champion** (``base_pod = false``) the incumbent is the best complete entry,
  and the same test decides whether the ensemble replaces it.

Everything here reads the validation split's recorded returns only (``candidates.bin``).
The decision, each test and its p-value go to ``leaderboard.json`` (``"selection"``) and
``run.json``, and the tearsheet says it in one line ("champion kept: challenger p00012
+0.21 IR, p = 0.31").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from finpod.runs.candidates import CandidateSet, per_bar_sharpes
from finpod.runs.leaderboard import Entry, Leaderboard

#: Bootstrap draws of a paired test.
DRAWS = 2000


@dataclass(frozen=True)
class PairedTest:
    """A challenger against the incumbent on the same validation bars."""

    challenger: str
    incumbent: str
    delta: float
    """Challenger's annualized mean/std minus the incumbent's (same bars)."""
    p_value: float
    """One-sided: P(a difference ≥ ``delta`` | equally good), moving-block bootstrap."""
    bars: int
    block: int
    """Bars per bootstrap block."""
    draws: int

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["delta"] = round(self.delta, 6)
        out["p_value"] = round(self.p_value, 6)
        return out


def annualized_ratio(returns: np.ndarray, bars_per_year: float) -> np.ndarray:
    """Annualized mean/std along axis 0 of ``returns`` ((T, ...) per-bar): the candidate
    record's per-bar Sharpe (0 for a series with no spread) times √(bars per year)."""
    return per_bar_sharpes(returns) * math.sqrt(bars_per_year)


def block_length(bars: int) -> int:
    """Bars per bootstrap block: about T^(1/3), at least 5 (a trading week)."""
    return int(max(5, min(bars, round(bars ** (1.0 / 3.0)))))


def paired_test(
    incumbent: np.ndarray,
    challenger: np.ndarray,
    *,
    bars_per_year: float,
    names: tuple[str, str] = ("incumbent", "challenger"),
    draws: int = DRAWS,
    seed: int = 0,
) -> PairedTest:
    """The paired test of ``challenger`` against ``incumbent`` (both (T,) per-bar scored
    validation returns on the same bars; module docstring)."""
    a = np.asarray(incumbent, dtype=np.float64)
    b = np.asarray(challenger, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired series must have one shape, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired series must be finite")
    t = len(a)
    pair = np.stack([a, b], axis=1)
    delta = float(np.diff(annualized_ratio(pair, bars_per_year))[0])
    if t < 4:
        return PairedTest(names[1], names[0], delta, 1.0, t, t, 0)
    block = block_length(t)
    rng = np.random.default_rng(seed)
    blocks = math.ceil(t / block)
    starts = rng.integers(0, t - block + 1, size=(draws, blocks))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(draws, -1)[:, :t]
    sample = pair[index]  # (draws, T, 2)
    ratios = annualized_ratio(np.moveaxis(sample, 1, 0), bars_per_year)  # (draws, 2)
    boot = ratios[:, 1] - ratios[:, 0]
    # Centred on the observed difference: the spread of the difference under the null.
    p_value = float((1 + np.sum(boot - delta >= delta)) / (draws + 1))
    return PairedTest(names[1], names[0], delta, p_value, t, block, draws)


def holm_passes(tests: list[PairedTest], alpha: float) -> list[PairedTest]:
    """The tests that reject "no better" under Holm's step-down correction at ``alpha``
    (and whose difference is positive)."""
    passed = []
    m = len(tests)
    for i, test in enumerate(sorted(tests, key=lambda t: t.p_value)):
        if test.p_value > alpha / (m - i):
            break
        if test.delta > 0:
            passed.append(test)
    return passed


def smoothed_scores(entries: list[Entry]) -> dict[str, float]:
    """Entry id → the mean validation score of its segment and the segments on either side
    along its line (the longest history on the board that runs through it: a later
    checkpoint of the same line knows what came after). A checkpoint that scored high once
    between two low scores is luck; one in a run of high scores is the line's level."""
    out: dict[str, float] = {}
    for e in entries:
        window = _windows(e, entries)
        if window is None:
            out[e.pod_id] = e.score if math.isfinite(e.score) else -math.inf
        else:
            out[e.pod_id] = float(sum(window) / len(window)) if window else e.score
    return out


def _windows(e: Entry, entries: list[Entry]) -> list[float] | None:
    """The finite scores :func:`smoothed_scores` averages for ``e``: its segment's and its
    neighbours' along the longest history on the board that runs through it (None: ``e``
    has no history or no finite score)."""
    own = [h["score"] for h in e.history]
    if not own or not math.isfinite(e.score):
        return None
    seq = own
    for d in entries:
        later = [h["score"] for h in d.history]
        if e.pod_id in d.lineage and len(later) > len(seq) and later[: len(own)] == own:
            seq = later
    i = len(own) - 1
    return [v for v in seq[max(0, i - 1) : i + 2] if math.isfinite(v)]


def one_score(e: Entry, entries: list[Entry]) -> bool:
    """Is ``e``'s level a single score: a line that scored one segment, neither continued
    nor copied (a fresh pod's first segment, the noisiest score a run has)? Entries
    recorded without a history are not judged."""
    window = _windows(e, entries)
    return window is not None and len(window) < 2


def window_mean(scores: list[float], i: int, default: float = -math.inf) -> float:
    """The mean of the finite scores of segment ``i`` of a line and its neighbours on
    either side (``default`` when none is finite): the line's level at ``i``."""
    window = [v for v in scores[max(0, i - 1) : i + 2] if math.isfinite(v)]
    return float(sum(window) / len(window)) if window else default


def smoothed_best(scores: list[float], settled: bool = False) -> int:
    """Index of the best of a line's segment ``scores`` (in line order, not empty) by the
    mean of its score and its neighbours' (its own score breaks ties), as
    :func:`smoothed_scores` ranks the board; ``settled``: among the segments whose
    neighbours have both scored (the last one's mean may still change), or the first
    when none has."""

    last = len(scores) - 1 if settled else len(scores)
    return max(range(max(1, last)), key=lambda i: (window_mean(scores, i), scores[i]))


def _by_smoothed(entries: list[Entry], board: Leaderboard) -> list[Entry]:
    """``entries`` best first by :func:`smoothed_scores` over the whole board (their own
    score breaks ties)."""
    smooth = smoothed_scores(list(board.entries))
    return sorted(entries, key=lambda e: (-smooth.get(e.pod_id, e.score), -e.score))


def incumbent_of(board: Leaderboard) -> tuple[Entry | None, str]:
    """The incumbent a challenger must beat, and what it is: the champion line's complete
    checkpoint with the best :func:`smoothed_scores` (any of its checkpoints when none is
    complete), else the best complete entry by the same rule."""
    champions = [e for e in board.entries if e.champion]
    if champions:
        complete = [e for e in champions if not e.partial]
        return _by_smoothed(complete or champions, board)[0], "champion"
    complete = [e for e in board.entries if not e.partial]
    if complete:
        return _by_smoothed(complete, board)[0], "best complete entry"
    return (board.entries[0] if board.entries else None), "best entry"


def select(
    board: Leaderboard,
    candidates: CandidateSet,
    *,
    alpha: float,
    bars_per_year: float,
    ensemble_id: str | None = None,
    ensemble_name: str | None = None,
    seed: int = 0,
    min_scores: int = 1,
) -> dict[str, Any] | None:
    """The run's final selection (module docstring) as a JSON-ready record, or None for
    an empty board. ``min_scores``: the fewest validation scores a challenger's level
    must average (:func:`line_challengers`). ``candidates``: the run's candidate record (validation returns);
    ``ensemble_id`` / ``ensemble_name``: the scored ensemble's candidate id and agent name
    (``"ensemble-3"``), when there is one."""
    incumbent, role = incumbent_of(board)
    if incumbent is None:
        return None
    returns = _returns_by_id(candidates)
    record: dict[str, Any] = {
        "incumbent": incumbent.pod_id,
        "incumbent_role": role,
        "incumbent_score": incumbent.score,
        "test": "paired moving-block bootstrap of the difference in annualized mean/std "
        "of the scored validation series, one-sided, Holm-corrected over the challengers",
        "alpha": alpha,
        "challengers": [],
        "skipped": {},
    }
    base = returns.get(incumbent.pod_id)
    selected, selected_returns, decision = incumbent.pod_id, base, None
    if base is None:
        record["skipped"][incumbent.pod_id] = "no recorded validation returns"
        record["decision"] = f"{role} {incumbent.pod_id}: no recorded validation returns to test"
    elif role == "champion":
        tests = []
        challengers, cut_short = line_challengers(board, min_scores)
        record["skipped"].update(cut_short)
        for entry in challengers:
            other = returns.get(entry.pod_id)
            if other is None or other.shape != base.shape:
                record["skipped"][entry.pod_id] = "no validation returns on the same bars"
                continue
            tests.append(
                paired_test(
                    base,
                    other,
                    bars_per_year=bars_per_year,
                    names=(incumbent.pod_id, entry.pod_id),
                    seed=seed,
                )
            )
        passed = holm_passes(tests, alpha)
        record["challengers"] = [t.to_json() for t in sorted(tests, key=lambda t: t.p_value)]
        best = max(tests, key=lambda t: t.delta, default=None)
        if passed:
            winner = max(passed, key=lambda t: t.delta)
            selected, selected_returns = winner.challenger, returns[winner.challenger]
            decision = winner
            record["decision"] = (
                f"challenger {winner.challenger} replaced the champion: "
                f"{winner.delta:+.2f} {_unit(board)}, p = {winner.p_value:.3f}"
            )
        elif best is not None:
            record["decision"] = (
                f"champion kept: best challenger {best.challenger} {best.delta:+.2f} "
                f"{_unit(board)}, p = {best.p_value:.2f}"
            )
            decision = best
        else:
            record["decision"] = "champion kept: no complete challenger"
    else:
        record["decision"] = f"{role} {incumbent.pod_id} (no champion line: base_pod = false)"
    if decision is not None:
        record["best_challenger"] = decision.to_json()
    record["selected"] = selected
    record["selected_single"] = selected  # the single agent, whether or not the ensemble wins
    record["tracking_error"] = {selected: _tracking_error(selected_returns, bars_per_year)}
    if ensemble_id is not None and ensemble_name is not None and selected_returns is not None:
        blend = returns.get(ensemble_id)
        if blend is not None and blend.shape == selected_returns.shape:
            test = paired_test(
                selected_returns,
                blend,
                bars_per_year=bars_per_year,
                names=(selected, ensemble_id),
                seed=seed,
            )
            won = test.delta > 0 and test.p_value <= alpha
            record["ensemble"] = {**test.to_json(), "selected": won}
            record["tracking_error"][ensemble_id] = _tracking_error(blend, bars_per_year)
            te = _te_text(
                "tracking error" if board.score_name == "information_ratio" else "volatility",
                record["tracking_error"][ensemble_id],
                record["tracking_error"][selected],
            )
            if won:
                record["selected"] = ensemble_name
                record["decision"] += (
                    f"; ensemble {ensemble_name} selected: {test.delta:+.2f} {_unit(board)} "
                    f"over {selected}, p = {test.p_value:.3f}{te}"
                )
            else:
                record["decision"] += (
                    f"; ensemble not selected ({test.delta:+.2f}, p = {test.p_value:.2f}{te})"
                )
        else:
            record["skipped"][ensemble_id] = "no validation returns on the same bars"
    return record


def line_challengers(board: Leaderboard, min_scores: int = 1) -> tuple[list[Entry], dict[str, str]]:
    """The challengers of the champion, best first: each line's complete checkpoint with
    the best smoothed score; and the entries passed over (id → reason) because their
    segment was cut short, or, with ``min_scores`` = 2, because their level is one score
    (:func:`one_score`). A run of ``mode = "asha"`` passes 2: its lines go on segment by
    segment, so a line with one score is one that stopped after its first; in the other
    modes a pod of ``epochs = 1`` has one score by design."""
    line = _line_of(board)
    entries = list(board.entries)
    seen: set[str] = set()
    out: list[Entry] = []
    skipped: dict[str, str] = {}
    for entry in _by_smoothed(entries, board):
        if entry.champion:
            continue
        if entry.partial:
            skipped[entry.pod_id] = "segment cut short"
            continue
        if min_scores > 1 and one_score(entry, entries):
            skipped[entry.pod_id] = "one score: its line scored one segment"
            continue
        if line(entry) in seen:
            continue
        seen.add(line(entry))
        out.append(entry)
    return out, skipped


def _line_of(board: Leaderboard) -> Callable[[Entry], str]:
    """Entry → its line: the first pod of its lineage that is not on the champion line
    (the fresh pod it grew from, or the fork off the champion)."""
    champion: set[str] = set()
    for e in board.entries:
        if e.champion:
            champion |= {*e.lineage, e.pod_id}

    def line(entry: Entry) -> str:
        return next((p for p in [*entry.lineage, entry.pod_id] if p not in champion), entry.pod_id)

    return line


def _te_text(label: str, ensemble: float | None, single: float | None) -> str:
    """The two tracking errors (or volatilities, for a score of plain returns) side by
    side: averaging targets shrinks the bets."""
    if ensemble is None or single is None:
        return ""
    return f"; {label} {ensemble:.2%} against {single:.2%} for the single agent"


def _tracking_error(returns: np.ndarray | None, bars_per_year: float) -> float | None:
    """Annualized standard deviation of the scored series: the tracking error of an
    active series, the volatility of plain returns (``record["tracking_error"]`` holds
    the former for an active score)."""
    if returns is None or len(returns) < 2:
        return None
    return float(np.std(returns, ddof=1) * math.sqrt(bars_per_year))


def _returns_by_id(candidates: CandidateSet) -> dict[str, np.ndarray]:
    """Candidate id → its validation returns, on the bars every candidate shares (the
    record aligns them on their last common bars)."""
    return {
        cid: np.asarray(candidates.returns[:, k], dtype=np.float64)
        for k, cid in enumerate(candidates.ids)
    }


def _unit(board: Leaderboard) -> str:
    return "IR" if board.score_name == "information_ratio" else board.score_name
