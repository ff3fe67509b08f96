"""The verdict of a backtest in words and numbers: what a reader needs first.

Three questions, one line each (:class:`Verdict`):

- **edge**: did the agent beat its reference after costs? The active return per year, the
  information ratio and the t-statistic of the mean active return, the tracking error;
  significant when |t| ≥ :data:`T_CRITICAL_5PCT` (two-sided, 5 %).
- **luck**: is the selection's validation edge luck? The Deflated Sharpe against
  :data:`DSR_THRESHOLD` and the PBO against :data:`PBO_THRESHOLD`.
- **spend**: what the run spent to get there: env steps, gradient steps, wall time, and
  how a tournament spread its budget over its pods.

A one-word headline (:data:`HEADLINES`) sums the edge up, with a tone the pages colour. A
synthetic market with no planted signal (a null market) gets its own headline whatever the
agent did: nothing there can be an edge. Bars the run was trained or selected on
(``finpod backtest --allow-in-sample``, :mod:`finpod.backtest.in_sample`) get theirs,
IN-SAMPLE, before anything else: the line says which of the run's splits they overlap,
and the selection line says that the run's DSR and PBO do not apply to them. The
tearsheet, the walk-forward page, the console's last lines and ``finpod info RUN`` all
print these same lines.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from finpod.backtest.in_sample import InSample

#: |t| at or above which the mean active return is significant (two-sided 5 %, normal).
T_CRITICAL_5PCT = 1.96
#: The Deflated Sharpe below which the validation edge is consistent with luck.
DSR_THRESHOLD = 0.95
#: The PBO at or above which the selection is noise.
PBO_THRESHOLD = 0.5

#: Headline word and colour of each tone.
HEADLINES = {
    "edge": ("EDGE", "#1a7f37"),
    "none": ("NO EDGE", "#6e6e6e"),
    "loss": ("UNDERPERFORMS", "#b42318"),
    "null": ("NULL MARKET", "#1f5fbf"),
    "in_sample": ("IN-SAMPLE", "#8250df"),
}

#: The thresholds as the pages state them.
THRESHOLDS_TEXT = (
    f"Significant: |t| ≥ {T_CRITICAL_5PCT} (5 %, two-sided). "
    f"DSR < {DSR_THRESHOLD}: the validation edge is consistent with luck from the N "
    f"candidates selection chose among. PBO ≥ {PBO_THRESHOLD}: the selection is noise (the "
    "validation winner does no better than the median candidate on held-out validation bars)."
)
#: What the IN-SAMPLE box says in place of the thresholds.
IN_SAMPLE_TEXT = (
    "In-sample: the backtest bars lie inside the run's train or validation period. No "
    "threshold turns them into evidence: the t-statistic measures fit to bars the agent has "
    "seen, and the DSR and PBO measure the selection on validation, which these bars do not "
    "test."
)
#: The selection line of an IN-SAMPLE verdict.
IN_SAMPLE_LUCK = (
    "Selection statistics (DSR, PBO): not applicable: they measure the run's selection on its "
    "validation split, and these bars lie inside its train or validation period."
)


@dataclass(frozen=True)
class Verdict:
    """A headline and the lines under it."""

    tone: str
    """One of :data:`HEADLINES`: ``edge``, ``none``, ``loss``, ``null`` or ``in_sample``."""
    edge: str
    """Did the agent beat its reference after costs, in one sentence."""
    luck: str
    """Is the selection's validation edge luck (DSR, PBO), in one sentence."""
    spend: tuple[str, ...] = ()
    """What the run spent, one sentence per line (empty when not recorded)."""
    extra: tuple[str, ...] = ()
    """Further context (e.g. the planted signal's ceiling)."""
    lead: tuple[str, ...] = ()
    """What the reader must know before the edge (e.g. the bars are in-sample)."""

    @property
    def word(self) -> str:
        """The one-word (or two-word) headline: EDGE, NO EDGE, UNDERPERFORMS, NULL MARKET,
        IN-SAMPLE."""
        return HEADLINES[self.tone][0]

    @property
    def colour(self) -> str:
        """The headline's colour (CSS hex)."""
        return HEADLINES[self.tone][1]

    @property
    def lines(self) -> tuple[str, ...]:
        """Every line under the headline, in reading order."""
        return (*self.lead, self.edge, *self.extra, self.luck, *self.spend)


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _pct(value: float, digits: int = 2) -> str:
    return f"{value * 100:+.{digits}f} %/yr"


def edge_tone(t: float | None, active: float | None) -> str:
    """``edge`` for a significantly positive mean active return, ``loss`` for a
    significantly negative one, ``none`` otherwise (undefined t included)."""
    if t is None or active is None:
        return "none"
    if t >= T_CRITICAL_5PCT and active > 0:
        return "edge"
    if t <= -T_CRITICAL_5PCT and active < 0:
        return "loss"
    return "none"


def edge_sentence(
    active_return: float | None,
    information_ratio: float | None,
    t: float | None,
    tracking_error: float | None,
    against: str,
    *,
    t_name: str = "t",
) -> tuple[str, str]:
    """(tone, sentence) of the active return against ``against`` (e.g. "the equal-weight
    reference"). ``active_return`` and ``tracking_error`` are fractions per year."""
    active, ir = _finite(active_return), _finite(information_ratio)
    t, te = _finite(t), _finite(tracking_error)
    if active is None or t is None:
        if te is not None and te == 0.0:
            return "none", (
                f"No edge over {against}: the agent's returns equal the reference's bar for "
                "bar (no active return to test)."
            )
        return "none", f"No edge over {against} can be measured (the active return is undefined)."
    tone = edge_tone(t, active)
    significance = "significant" if abs(t) >= T_CRITICAL_5PCT else "not significant"
    numbers = (
        f"IR {ir:.2f} " if ir is not None else ""
    ) + f"({t_name} {t:.2f}, {significance} at 5 %)"
    te_text = f", tracking error {te * 100:.2f} %/yr" if te is not None else ""
    if tone == "edge":
        text = f"Beat {against} by {_pct(active)} after costs: {numbers}{te_text}."
    elif tone == "loss":
        text = f"Trailed {against} by {_pct(active)} after costs: {numbers}{te_text}."
    else:
        text = (
            f"No significant edge over {against} after costs: {_pct(active)}, {numbers}{te_text}."
        )
    return tone, text


def luck_sentence(
    dsr: float | None,
    pbo: float | None,
    num_trials: int | None,
    *,
    dsr_note: str | None = None,
    pbo_note: str | None = None,
) -> str:
    """The selection's DSR and PBO read against :data:`DSR_THRESHOLD` and
    :data:`PBO_THRESHOLD`, in one sentence."""
    n = "its candidates"
    if num_trials:
        n = f"{int(num_trials)} candidate{'' if int(num_trials) == 1 else 's'}"
    dsr, pbo = _finite(dsr), _finite(pbo)
    if dsr is None:
        first = "DSR undefined" + (f" ({dsr_note})" if dsr_note else "")
    elif dsr < DSR_THRESHOLD:
        first = (
            f"DSR {dsr:.3f} < {DSR_THRESHOLD}: the validation edge is consistent with luck from {n}"
        )
    else:
        first = (
            f"DSR {dsr:.3f} ≥ {DSR_THRESHOLD}: the validation edge is unlikely to be luck from {n}"
        )
    if pbo is None:
        second = "PBO undefined" + (f" ({pbo_note})" if pbo_note else "")
    elif pbo >= PBO_THRESHOLD:
        second = f"PBO {pbo:.3f} ≥ {PBO_THRESHOLD}: the selection is noise"
    else:
        second = (
            f"PBO {pbo:.3f} < {PBO_THRESHOLD}: the validation winner usually stays above the "
            "median candidate"
        )
    return f"Selection (validation split): {first}; {second}."


def folds_luck_sentence(dsrs: Sequence[Any], pbos: Sequence[Any]) -> str:
    """:func:`luck_sentence` over the selections of several folds: how many fall on each
    side of :data:`DSR_THRESHOLD` and :data:`PBO_THRESHOLD`, with the medians."""
    dsr = [v for v in (_finite(x) for x in dsrs) if v is not None]
    pbo = [v for v in (_finite(x) for x in pbos) if v is not None]
    folds = len(dsrs)
    if dsr:
        lucky = sum(v < DSR_THRESHOLD for v in dsr)
        first = (
            f"DSR < {DSR_THRESHOLD} (the validation edge consistent with luck) in {lucky} of "
            f"{len(dsr)} folds (median {sorted(dsr)[len(dsr) // 2]:.3f})"
        )
    else:
        first = "DSR undefined in every fold"
    if pbo:
        noisy = sum(v >= PBO_THRESHOLD for v in pbo)
        second = (
            f"PBO ≥ {PBO_THRESHOLD} (selection is noise) in {noisy} of {len(pbo)} folds "
            f"(median {sorted(pbo)[len(pbo) // 2]:.3f})"
        )
    else:
        second = "PBO undefined in every fold"
    return f"Selection (each of {folds} folds' validation window): {first}; {second}."


def _count(value: Any) -> int | None:
    """A number, or the length of a list / mapping (the budget record's counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return int(value)
    if isinstance(value, Sequence | Mapping) and not isinstance(value, str):
        return len(value)
    return None


def _pod_steps(budget: Mapping[str, Any]) -> list[int]:
    """Env steps per pod from a budget record: ``{"pods": {id: steps | {"env_steps"}}}`` or
    ``{"pods": [{"env_steps"}, ...]}`` or ``{"env_steps_per_pod": {...} | [...]}``."""
    for key in ("env_steps_per_pod", "pods", "per_pod"):
        pods = budget.get(key)
        values = pods.values() if isinstance(pods, Mapping) else pods
        if not isinstance(values, Sequence | type({}.values())) or isinstance(values, str):
            continue
        steps = []
        for v in values:
            if isinstance(v, Mapping):
                v = v.get("env_steps")
            f = _finite(v)
            if f is not None:
                steps.append(int(f))
        if steps:
            return steps
    return []


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def spend_lines(spend: Mapping[str, Any] | None) -> tuple[str, ...]:
    """What the run spent (``info["spend"]``, :func:`finpod.backtest.run_record.run_spend`),
    one sentence per line; empty when nothing was recorded."""
    if not spend:
        return ()
    parts = []
    steps, wall = _finite(spend.get("env_steps")), _finite(spend.get("wall_s"))
    if steps is not None:
        parts.append(f"{int(steps):,} env steps")
    if wall is not None:
        parts.append(f"{_duration(wall)} wall time")
    sel_steps = _finite(spend.get("selected_env_steps"))
    updates = _finite(spend.get("selected_updates"))
    ratio = _finite(spend.get("updates_per_env_step"))
    if updates is not None and updates > 0:
        text = f"the selected agent learned from {int(sel_steps or 0):,} env steps with {int(updates):,} gradient steps"
        if ratio is not None:
            text += f" ({ratio:.3g} per env step)"
        parts.append(text)
    elif sel_steps is not None:
        parts.append(
            f"the selected agent learned from {int(sel_steps):,} env steps "
            "(gradient steps not recorded)"
        )
    lines = [f"Spent: {', '.join(parts)}."] if parts else []
    tour = []
    pods = _finite(spend.get("pods"))
    if spend.get("kind") == "tournament" and pods is not None:
        tour.append(f"{int(pods)} pods scored")
    budget = spend.get("budget")
    if isinstance(budget, Mapping):
        per_pod = _pod_steps(budget)
        if per_pod:
            per_pod.sort()
            mid = per_pod[len(per_pod) // 2]
            tour.append(
                f"env steps per pod {per_pod[0]:,} / {mid:,} / {per_pod[-1]:,} "
                f"(min / median / max over {len(per_pod)} pods)"
            )
        for key, one in (("promotions", "promotion"), ("stops", "stop"), ("children", "child")):
            n = _count(budget.get(key))
            if n is not None:
                tour.append(f"{n} {one if n == 1 else key}")
    share = _finite(spend.get("winner_lineage_share"))
    if share is not None:
        tour.append(f"the winner's lineage used {share * 100:.0f} % of all env steps")
    if tour:
        lines.append(f"Tournament: {', '.join(tour)}.")
    return tuple(lines)


def reference_name(reference: str) -> str:
    """How the sentences name the reference portfolio."""
    if reference in ("equal_weight", "", None):
        return "the equal-weight reference"
    return f"the reference ({reference})"


def null_market_sentence(tone: str) -> str:
    """The line of a synthetic market with no planted signal, given the agent's edge tone."""
    if tone == "edge":
        return (
            "Null market (synthetic, no planted signal): no strategy has an edge here, so a "
            "significant one is luck (1 run in 20 at 5 %) or a leak of future data."
        )
    return (
        "Null market (synthetic, no planted signal): no strategy has an edge here; finding "
        "none is the expected answer."
    )


def backtest_verdict(result: Any) -> Verdict:
    """The verdict of a :class:`~finpod.backtest.BacktestResult`."""
    agent = result.metrics.get("agent", {})
    info = result.info or {}
    stats = result.statistics or {}
    config = result.env_config
    reference = reference_name(config.reference if config is not None else "equal_weight")
    tone, edge = edge_sentence(
        agent.get("active_return"),
        agent.get("information_ratio"),
        agent.get("ir_t_stat"),
        agent.get("tracking_error"),
        reference,
    )
    extra = []
    if info.get("market_regime") == "null":
        extra.append(null_market_sentence(tone))
        tone = "null"
    ceiling = info.get("ceiling")
    rule_ir = (
        _finite(ceiling.get("rule_information_ratio")) if isinstance(ceiling, Mapping) else None
    )
    if rule_ir is not None and tone == "null":
        extra.append(
            f"The scripted signal rule, on a feature that is noise here, reaches IR {rule_ir:.2f} "
            "(near 0 expected)."
        )
    elif rule_ir is not None:
        share = _finite(ceiling.get("ir_share_of_rule"))
        extra.append(
            f"Planted signal: the signal rule under the agent's bounds reaches IR {rule_ir:.2f}"
            + (f"; the agent {share * 100:.0f} % of it." if share is not None else ".")
        )
    if info.get("selection_decision"):
        # The tournament's final choice, as its paired test decided it.
        extra.append(f"Selection on validation: {info['selection_decision']}.")
    if info.get("selection_settings"):
        extra.append(
            f"{str(info['selection_settings'])[0].upper()}{info['selection_settings'][1:]}."
        )
    luck = luck_sentence(
        stats.get("dsr"),
        stats.get("pbo"),
        stats.get("num_trials"),
        dsr_note=stats.get("dsr_note"),
        pbo_note=stats.get("pbo_note"),
    )
    lead: tuple[str, ...] = ()
    if isinstance(info.get("in_sample"), Mapping):
        lead = (InSample.from_info(info["in_sample"]).sentence(),)
        tone, luck = "in_sample", IN_SAMPLE_LUCK
        edge = f"On these bars: {edge[0].lower()}{edge[1:]}"
    return Verdict(tone, edge, luck, spend_lines(info.get("spend")), tuple(extra), lead)


#: Style of the verdict box (added to every page's style sheet).
VERDICT_CSS = """
.verdict{border:2px solid var(--tone);border-left:14px solid var(--tone);padding:8px 14px;
margin:1em 0;max-width:1000px}
.verdict .word{font-size:1.9em;font-weight:700;color:var(--tone);letter-spacing:.04em}
.verdict p{margin:.35em 0}.verdict .thresholds{color:#555;font-size:.85em}
"""


def verdict_html(verdict: Verdict, subject: str = "") -> str:
    """The verdict box of a page: the coloured headline word, then its lines and the
    thresholds that make them a verdict."""
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in verdict.lines)
    subject = f" <span class='subject'>{html.escape(subject)}</span>" if subject else ""
    footnote = IN_SAMPLE_TEXT if verdict.tone == "in_sample" else THRESHOLDS_TEXT
    return (
        f"<div class='verdict verdict-{verdict.tone}' style='--tone:{verdict.colour}'>"
        f"<div class='word'>{html.escape(verdict.word)}{subject}</div>{lines}"
        f"<p class='thresholds'>{html.escape(footnote)}</p></div>"
    )
