"""The walk-forward page: one self-contained HTML file (every image a base64 PNG).

Built with the tearsheet's helpers (:mod:`finpod.backtest.plots`: figure to data URI;
:mod:`finpod.backtest.tearsheet`: table formatting, style sheet). Sections: the HAC t-test
of the active return, metrics of the stitched out-of-sample record, the stitched equity
curve against the index and equal weight (each seed's own record beside it), the cumulative
active return, the fold plan, per-fold results, the distribution over seeds, and the DSR/PBO
of every selection made.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest.labels import format_metric, metric_label
from finpod.backtest.page import frame_table, html_document, metrics_table, png_uri, warning_box
from finpod.backtest.selection import STATISTIC_MEANINGS
from finpod.backtest.verdict import VERDICT_CSS, verdict_html
from finpod.scores import DEFAULT_SCORE
from finpod.walkforward.results import SHARPE_CONVENTION
from finpod.walkforward.stats import T_CRITICAL_5PCT
from finpod.walkforward.verdict import plural, steps_text, walkforward_verdict

if TYPE_CHECKING:
    from finpod.walkforward.folds import Fold
    from finpod.walkforward.results import WalkForwardResult

AGENT, INDEX = "agent", "index"
#: Keeps dates and numbers on one line in the wide tables.
_EXTRA_CSS = "td{white-space:nowrap}"
_SPLIT_COLORS = {"train": "#9ecae1", "validation": "#fdae6b", "backtest": "#74c476"}


def _hac_html(result: WalkForwardResult) -> str:
    rows = []
    tests = [("equal weight (buy-and-hold)", result.hac["vs_equal_weight"])]
    if "vs_index" in result.hac:
        tests.append(("index (level, no costs)", result.hac["vs_index"]))
    for name, per_seed in result.hac["per_seed_vs_equal_weight"].items():
        tests.append((f"equal weight, {name}'s own agents", per_seed))
    for name, h in tests:
        if h.get("t") is None:
            rows.append(f"<tr><th>vs {html.escape(name)}</th><td colspan='6'>undefined</td></tr>")
            continue
        verdict = "significant" if abs(h["t"]) >= T_CRITICAL_5PCT else "not significant"
        rows.append(
            f"<tr><th>vs {html.escape(name)}</th><td>{h['mean'] * 1e4:.2f}</td>"
            f"<td>{h['annual_mean'] * 100:+.2f} %</td><td><b>{h['t']:.2f}</b></td>"
            f"<td>{h['p']:.3f}</td><td>{h['naive_t']:.2f}</td><td>{h['maxlags']}</td>"
            f"<td class='l'>{verdict} at 5 %</td></tr>"
        )
    head = (
        "<thead><tr><th>active return of the stitched agent</th><th>mean (bp / bar)</th>"
        "<th>annualized mean</th><th>HAC t</th><th>p (two-sided)</th><th>naive t</th>"
        "<th>lags</th><th></th></tr></thead>"
    )
    h0 = result.hac["vs_equal_weight"]
    return (
        f"<table>{head}<tbody>{''.join(rows)}</tbody></table>"
        "<p class='note'>Active return = the agent's per-bar return minus the benchmark's over "
        f"the same {h0['n']} out-of-sample bars. t-statistic of its mean from an OLS "
        "regression on a constant with a HAC (Newey–West) covariance (statsmodels, "
        f'cov_type="HAC"); {html.escape(str(h0["maxlags_rule"]))}. The naive t assumes '
        "independent bars; autocorrelated active returns make it overstate significance.</p>"
    )


def _metrics_table(result: WalkForwardResult) -> str:
    """Every stitched metric, named and written as in the backtest's tearsheet."""
    shown, absent = stitched_rows(result.metrics)
    table = result.metrics.loc[shown].rename(index=_STITCHED_LABELS)
    html_table = metrics_table(
        table, lambda name, value: format_metric(_STITCHED_NAMES.get(name, name), value)
    )
    if absent:
        why = "; ".join(f"{html.escape(name)}: {html.escape(reason)}" for name, reason in absent)
        html_table += f"<p class='note'>Rows not shown: {why}.</p>"
    return html_table


def stitched_rows(metrics: pd.DataFrame) -> tuple[list[str], list[tuple[str, str]]]:
    """The stitched metrics worth a row (some value defined), and (label, why) of those
    left out because no strategy has a value."""
    shown, absent = [], []
    for name, row in metrics.iterrows():
        if np.isfinite(row.to_numpy(dtype=float)).any():
            shown.append(name)
        else:
            absent.append((metric_label(str(name)), _ABSENT.get(str(name), "not measured")))
    return shown, absent


#: Why a stitched metric has no value for any strategy.
_ABSENT = {
    "alpha": "the dataset has no index benchmark",
    "beta": "the dataset has no index benchmark",
}


#: Row labels of the stitched table that differ from the backtest's: how they were stitched.
_STITCHED_LABELS = {
    "sharpe": "Sharpe ratio (annualized)",
    "annual_turnover": "Turnover (× capital / year, bar-weighted mean of the folds)",
    "annual_turnover_ex_initial": "Turnover ex initial purchases (× capital / year, "
    "bar-weighted mean of the folds)",
    "mean_exposure": "Mean exposure (stocks / account value, bar-weighted over the folds)",
    "costs_paid": "Costs paid ($, all folds)",
    "costs_pct_capital": "Costs / initial capital (all folds)",
    "fees_paid": "Fees paid ($, of the costs, all folds)",
    "impact_paid": "Market impact paid ($, of the costs, all folds)",
}
_STITCHED_NAMES = {v: k for k, v in _STITCHED_LABELS.items()}
#: Why a cell of the stitched table is "–".
_DASHES = (
    "– = not defined: the index is a price level and never trades (no turnover, costs, "
    "exposure or active statistics); mean exposure is measured for the agents only; the "
    "reference against itself has no tracking error, hence no information ratio or t."
)


def _fold_starts(result: WalkForwardResult) -> list[pd.Timestamp]:
    fold = result.stitched["fold"]
    return list(fold.index[fold.ne(fold.shift())])


def _equity(result: WalkForwardResult):
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for name in result.seed_returns.columns:
            eq = (1.0 + result.seed_returns[name]).cumprod()
            ax.plot(eq.index, eq.values, lw=0.7, ls="--", alpha=0.6, label=name)
        for name in [c for c in result.stitched.columns if c != "fold"]:
            if name in (AGENT, INDEX, "equal_weight_buy_hold"):
                eq = (1.0 + result.stitched[name]).cumprod()
                ax.plot(eq.index, eq.values, lw=2.2 if name == AGENT else 1.3, label=name)
        for t in _fold_starts(result)[1:]:
            ax.axvline(t, color="k", lw=0.5, alpha=0.3)
        ax.set_ylabel("growth of 1")
        ax.set_title("Stitched out-of-sample equity (fold winners; vertical lines: fold starts)")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)

    return draw


def _active(result: WalkForwardResult):
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        ew = result.stitched["equal_weight_buy_hold"]
        for name in result.seed_returns.columns:
            cum = (result.seed_returns[name] - ew).cumsum() * 100
            ax.plot(cum.index, cum.values, lw=0.7, ls="--", alpha=0.6, label=name)
        cum = (result.stitched[AGENT] - ew).cumsum() * 100
        t = result.hac["vs_equal_weight"].get("t")
        label = "agent (fold winners)" + (f", HAC t = {t:.2f}" if t is not None else "")
        ax.plot(cum.index, cum.values, lw=2.2, label=label)
        ax.axhline(0.0, color="k", lw=0.5)
        for ts in _fold_starts(result)[1:]:
            ax.axvline(ts, color="k", lw=0.5, alpha=0.3)
        ax.set_ylabel("cumulative active return (%)")
        ax.set_title("Active return vs equal weight, summed over bars")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)

    return draw


def _timeline(folds: list[Fold]):
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for f in folds:
            for name, color in _SPLIT_COLORS.items():
                s = f.splits[name]
                start, end = pd.Timestamp(s["start"]), pd.Timestamp(s["end"])
                ax.barh(
                    f.index,
                    (end - start).days,
                    left=start,
                    color=color,
                    height=0.6,
                    label=name if f.index == 0 else None,
                )
        ax.set_yticks([f.index for f in folds], [f"fold {f.index}" for f in folds])
        ax.invert_yaxis()
        ax.set_title("Fold plan (gaps: embargo)")
        ax.legend(fontsize=7, loc="lower left")
        ax.grid(alpha=0.3, axis="x")

    return draw


def _seeds(result: WalkForwardResult):
    def draw(fig: Figure) -> None:
        ax1, ax2 = fig.subplots(1, 2)
        seeds = result.seeds
        for fold, g in seeds.groupby("fold"):
            ax1.scatter([fold] * len(g), g["sharpe_agent"], color="tab:blue", alpha=0.6, s=18)
            w = g[g["winner"]]
            ax1.scatter(w["fold"], w["sharpe_agent"], color="tab:red", marker="*", s=90)
        folds = result.folds
        ax1.plot(
            folds["fold"], folds["sharpe_equal_weight"], "k_", ms=16, mew=2, label="equal weight"
        )
        ax1.scatter([], [], color="tab:blue", s=18, label="each seed")
        ax1.scatter([], [], color="tab:red", marker="*", s=90, label="fold winner (validation)")
        ax1.set_xticks(list(folds["fold"]))
        ax1.set_xlabel("fold")
        ax1.set_title("Backtest Sharpe per fold: every seed")
        ax1.legend(fontsize=7)
        ax1.grid(alpha=0.3)
        vals = seeds["active_annual_mean"].to_numpy(dtype=float) * 100
        ax2.hist(
            vals[np.isfinite(vals)], bins=max(5, min(30, len(vals))), color="tab:blue", alpha=0.7
        )
        ax2.axvline(0.0, color="k", lw=0.8)
        ax2.set_xlabel("annualized mean active return vs equal weight (%)")
        ax2.set_title(f"Distribution over fold × seed ({len(vals)} agents)")
        ax2.grid(alpha=0.3)

    return draw


def _frame(df: pd.DataFrame, pct: tuple[str, ...] = ()) -> str:
    shown = df.copy()
    for c in pct:
        if c in shown:
            shown[c] = [
                "–" if v is None or not np.isfinite(float(v)) else f"{float(v) * 100:+.2f} %"
                for v in shown[c]
            ]
    shown = shown.astype(object).where(shown.notna(), "–")
    return frame_table(shown, max_rows=len(shown))


#: Columns of the per-fold table and their headings.
_FOLD_COLUMNS = {
    "fold": "fold",
    "validation": "validation window",
    "backtest": "backtest window",
    "winner_seed": "winner seed",
    "validation_score": "validation score",
    "sharpe_agent": "Sharpe agent",
    "sharpe_equal_weight": "Sharpe EW",
    "sharpe_index": "Sharpe index",
    "return_agent": "return agent",
    "return_equal_weight": "return EW",
    "active_annual_mean": "active / yr",
    "n_candidates": "N",
    "dsr": "DSR",
    "pbo": "PBO",
}


def _fold_table(folds: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in _FOLD_COLUMNS if c in folds]
    table = folds[cols].rename(columns=_FOLD_COLUMNS)
    if table["Sharpe index"].isna().all():
        table = table.drop(columns=["Sharpe index"])
    return table


def _embargo_text(summary: dict, spec: dict) -> str:
    embargo = summary.get("embargo") or {}
    sessions = embargo.get("sessions", spec.get("embargo"))
    if sessions is None:
        return "embargo: the dataset's default"
    return f"embargo {plural(int(sessions), 'session')}" + (
        " (the default)" if embargo.get("default") else ""
    )


def render_report(result: WalkForwardResult, folds: list[Fold]) -> str:
    """The walk-forward page of ``result`` as one HTML document (no external resources)."""
    s = result.summary
    settings = s.get("settings", {})
    spec = settings.get("spec", {})
    strat = settings.get("strategy", {})
    st = s.get("stitched", {})
    score = strat.get("train", {}).get("score", DEFAULT_SCORE)
    meta = [
        f"dataset: {html.escape(str(settings.get('dataset', {}).get('path')))} "
        f"(hash {html.escape(str(settings.get('dataset', {}).get('hash')))[:12]})",
        f"{plural(len(folds), 'fold')} ({html.escape(str(spec.get('scheme')))}: train "
        f"{html.escape(str(spec.get('train')))}, validation "
        f"{html.escape(str(spec.get('validation')))}, backtest "
        f"{html.escape(str(spec.get('backtest')))}, {_embargo_text(s, spec)})",
        f"{plural(len(s.get('seeds', [])), 'seed')}: "
        f"{', '.join(str(x) for x in s.get('seeds', []))}",
        f"agent: {html.escape(str(strat.get('agent', {}).get('algorithm')))}, "
        + html.escape(steps_text(s.get("env_steps") or {}, strat))
        + (", warm-started from the previous fold's winner" if settings.get("warm_start") else ""),
        f"out-of-sample: {html.escape(str(st.get('start', ''))[:10])} → "
        f"{html.escape(str(st.get('end', ''))[:10])} ({st.get('bars')} returns: each fold's "
        "backtest window less its first bar)",
    ]
    disclosures = s.get("disclosures", {})
    sections = [
        verdict_html(walkforward_verdict(result)),
        warning_box(v for k, v in disclosures.items() if k != "benchmark"),
        "<h2>Is the agent's active return different from zero?</h2>",
        _hac_html(result),
        "<h2>Stitched out-of-sample metrics</h2>",
        _metrics_table(result),
        f"<p class='note'>{html.escape(_DASHES)} "
        f"{html.escape(str(s.get('sharpe_convention', SHARPE_CONVENTION)))}. "
        "Active statistics are against the reference portfolio over the stitched bars; turnover, "
        "exposure and costs come from each fold's backtest of the account. "
        "agent = each fold's winner (the seed whose checkpoint scored best on "
        "that fold's validation window) on the fold's backtest window, folds one after the "
        "other; seed-k = seed k's own agents. Every fold restarts from the initial capital, "
        f"like the benchmarks. {html.escape(str(disclosures.get('benchmark', '')))}. "
        f"Annualization: {s.get('bars_per_year', 0):g} bars per year.</p>",
        "<h2>Stitched equity curve</h2>",
        f'<img alt="stitched equity curve" src="{png_uri(_equity(result), (11, 4))}">',
        "<h2>Active return</h2>",
        f'<img alt="cumulative active return" src="{png_uri(_active(result), (11, 3.6))}">',
        "<h2>Fold plan</h2>",
        f'<img alt="fold plan" src="{png_uri(_timeline(folds), (11, 0.5 + 0.45 * len(folds)))}">',
        "<h2>Per-fold results</h2>",
        _frame(
            _fold_table(result.folds),
            pct=("return agent", "return EW", "active / yr"),
        ),
        f"<p class='note'>validation score: the winner's validation {html.escape(str(score))}"
        f"{' (annualized)' if score in ('sharpe', 'sortino', 'return') else ''} "
        "(what selection ranked by); Sharpe ratios annualized; EW = equal weight (buy-and-hold); active / yr = the "
        "annualized mean of the winner's active return vs EW; N, DSR, PBO of the fold's "
        "selection among all its seeds' checkpoints. Train windows: see the fold plan.</p>",
        "<h2>Distribution over seeds</h2>",
        f'<img alt="seed distribution" src="{png_uri(_seeds(result), (11, 3.6))}">',
        _frame(result.seeds, pct=("return_agent", "active_annual_mean")),
        "<h2>Every selection made: Deflated Sharpe and PBO</h2>",
        "<p class='note'>"
        + html.escape(STATISTIC_MEANINGS["dsr"])
        + " "
        + html.escape(STATISTIC_MEANINGS["pbo"])
        + " Each fold chose its winner among every checkpoint of every seed (N = all of "
        "them); each fold × seed chose its checkpoint among its own. All on validation "
        "windows only.</p>",
        _frame(result.selections),
    ]
    title = f"finpod walk-forward: {html.escape(result.out.name)}"
    return html_document(title, meta, sections, extra_css=_EXTRA_CSS + VERDICT_CSS)
