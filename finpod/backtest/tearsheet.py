"""The tearsheet: one self-contained HTML page per backtest (every image a base64 PNG).

Panels: metrics table (agent vs benchmarks), equity curves, the return distribution and
tail risk, rolling information ratio and active drawdown, drawdown, monthly returns,
rolling Sharpe and beta, holdings and exposure, and the run's learning curves and
leaderboard. pyfolio-reloaded draws the underwater drawdown (it wants UTC timestamps);
finpod draws the rest itself: the equity curve and annual returns with every benchmark,
the monthly heatmap (pyfolio prints months without bars as 0 %), rolling ratios annualized
for the bar size (pyfolio assumes daily bars), and holdings/exposure (pyfolio's exposure
panel comes out blank under current pandas). The figures are drawn in
:mod:`finpod.backtest.plots`; this module assembles the tables, notes and page.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from finpod.backtest import metrics as m
from finpod.backtest.capacity import capacity_text
from finpod.backtest.labels import format_metric
from finpod.backtest.learning_plot import learning_panel
from finpod.backtest.page import frame_table, html_document, metrics_table, png_uri, warning_box
from finpod.backtest.plots import (
    active_panel,
    active_risk_panel,
    column_label,
    distribution_panel,
    drawdown_panel,
    equity_panel,
    holdings_panel,
    is_daily,
    monthly_panel,
    rolling_panel,
    turnover_panel,
)
from finpod.backtest.selection import STATISTIC_MEANINGS
from finpod.backtest.verdict import (
    DSR_THRESHOLD,
    PBO_THRESHOLD,
    VERDICT_CSS,
    backtest_verdict,
    verdict_html,
)
from finpod.env.config import EQUAL_WEIGHT

if TYPE_CHECKING:
    from finpod.backtest.result import BacktestResult

#: Worst drawdowns listed in the drawdown table.
_WORST_DRAWDOWNS = 5


def _stamp(value, result: BacktestResult) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or pd.isna(value):
        return "not recovered"
    ts = pd.Timestamp(value)
    return f"{ts:%Y-%m-%d}" if is_daily(result) else f"{ts:%Y-%m-%d %H:%M}"


def _drawdowns_html(result: BacktestResult) -> str:
    """The worst drawdowns of the agent: peak, valley, recovery, length in bars."""
    table = m.worst_drawdowns(result.returns, _WORST_DRAWDOWNS)
    if table.empty:
        return "<p class='note'>No drawdown.</p>"
    rows = []
    for _, row in table.iterrows():
        recovered = not pd.isna(row["recovery"])
        rows.append(
            f"<tr><td>{row['drawdown'] * 100:.2f} %</td><td>{_stamp(row['peak'], result)}</td>"
            f"<td>{_stamp(row['valley'], result)}</td><td>{_stamp(row['recovery'], result)}</td>"
            f"<td>{int(row['length'])}{'' if recovered else ' (so far)'}</td></tr>"
        )
    head = "<th>drawdown</th><th>peak</th><th>valley</th><th>recovery</th><th>length (bars)</th>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


#: Tilts smaller than this (in weight, 0.005 pp) print as +0.00 pp: not listed.
_SMALLEST_TILT = 0.5e-4


def _tilts_html(result: BacktestResult) -> str:
    """The agent's largest mean active weights; tilts that round to 0.00 pp are left out."""
    tilts = (result.info or {}).get("largest_tilts") or []
    shown = [t for t in tilts if abs(float(t["mean_active_weight"])) >= _SMALLEST_TILT]
    if not shown:
        return (
            "<p class='note'>No tilt of 0.01 pp or more: on average the agent held the "
            "reference portfolio's weights.</p>"
            if tilts
            else ""
        )
    rows = "".join(
        f"<tr><th>{html.escape(str(t['ticker']))}</th>"
        f"<td>{float(t['mean_active_weight']) * 100:+.2f} pp</td></tr>"
        for t in shown
    )
    return (
        "<table><thead><tr><th>name</th><th>mean active weight</th></tr></thead>"
        f"<tbody>{rows}</tbody></table><p class='note'>Mean weight over the backtest minus the "
        "reference portfolio's mean weight, in percentage points of account value (tilts under "
        "0.01 pp not listed).</p>"
    )


def distribution_frame(result: BacktestResult) -> pd.DataFrame:
    """Shape and tails of every strategy's per-bar returns (:func:`metrics.distribution_statistics`;
    active rows against the reference, none for the index, a level)."""
    reference = result.reference_returns
    columns = {
        str(name): m.distribution_statistics(
            col, reference if name not in ("index", m.REFERENCE) else None
        )
        for name, col in result.all_returns.items()
    }
    table = pd.DataFrame(columns)
    table.index.name = "statistic"
    return table


def _distribution_html(result: BacktestResult) -> str:
    table = distribution_frame(result)
    percent = {
        "value_at_risk",
        "conditional_value_at_risk",
        "hit_rate",
        "active_hit_rate",
        "active_max_drawdown",
    }
    shown = table.dropna(how="all")

    def fmt(name: str, value: float) -> str:
        key = _DISTRIBUTION_NAMES.get(name, name)
        if not np.isfinite(value):
            return "–"
        return f"{value * 100:.2f} %" if key in percent else f"{value:.2f}"

    shown = shown.rename(index=m.DISTRIBUTION_LABELS)
    return metrics_table(shown, fmt, column_label) + (
        "<p class='note'>Skew and excess kurtosis as pyfolio's perf_stats computes them "
        "(scipy); VaR, CVaR and the tail ratio from empyrical (historical, 5 % cutoff, per "
        "bar); hit rates are shares of bars. Active rows are against the reference "
        "(– for the index, a level, and the reference itself).</p>"
    )


_DISTRIBUTION_NAMES = {label: key for key, label in m.DISTRIBUTION_LABELS.items()}


def metrics_html(result: BacktestResult) -> str:
    """The metrics × strategies table of ``result`` as HTML (what ``result._repr_html_`` shows)."""
    return metrics_table(result.metrics, format_metric, column_label)


#: Order and titles of the selection statistics section (the agent's selection on
#: validation); the PSR of the backtest returns is market-level (:func:`_market_html`).
_STATISTICS = (
    ("dsr", "Deflated Sharpe of the selection (validation split)"),
    ("pbo", "Probability of backtest overfitting (CSCV, validation split)"),
)


def _statistics_html(result: BacktestResult) -> str:
    """The DSR and PBO, each with what it measures, or why it is undefined, and the
    thresholds that make them a verdict."""
    stats = result.statistics or {}
    n = stats.get("num_trials")
    rows = []
    for key, title in _STATISTICS:
        value = stats.get(key)
        shown = f"{value:.3f}" if isinstance(value, int | float) else "undefined"
        why = stats.get(f"{key}_note")
        meaning = STATISTIC_MEANINGS[key]
        if why:
            meaning += f" <i>({html.escape(str(why))})</i>"
        rows.append(f"<tr><th>{title}</th><td>{shown}</td><td class='l'>{meaning}</td></tr>")
    detail = [f"selection split: {html.escape(str(stats.get('selection_split', 'validation')))}"]
    if n:
        detail.append(f"N = {n} candidates and checkpoints selection chose among")
    if stats.get("validation_bars"):
        returns = int(stats["validation_bars"])
        detail.append(f"{returns} validation returns (the returns of {returns + 1} bars)")
    if stats.get("expected_max_sharpe") is not None:
        detail.append(
            f"expected best Sharpe of N unskilled candidates {stats['expected_max_sharpe']:.4f} "
            f"per bar vs selected {stats.get('selected_validation_sharpe') or 0.0:.4f}"
        )
    if stats.get("pbo_partitions"):
        detail.append(f"PBO over {stats['pbo_partitions']} partitions")
    return (
        "<table><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + f"<p class='note'>{' · '.join(detail)}. Thresholds: DSR below {DSR_THRESHOLD}: the "
        f"validation edge is consistent with luck from the N candidates; PBO of "
        f"{PBO_THRESHOLD} or more: the selection is noise.</p>"
    )


def _market_html(result: BacktestResult) -> str:
    """The PSR of every column's total return: market-level, it measures the market the
    strategies rode (the zero-tilt reference scores about as high as the agent)."""
    psr = result.metrics.loc[["psr"]] if "psr" in result.metrics.index else None
    if psr is None:
        return ""
    why = (result.statistics or {}).get("psr_note")
    return (
        metrics_table(psr, format_metric, column_label)
        + "<p class='note'><b>market-level: measures the market, not the agent.</b> "
        + html.escape(STATISTIC_MEANINGS["psr"])
        + " It is about the total return, which the market's drift dominates: compare the "
        "agent's column with the reference's; the agent's own edge is the active return in "
        "the verdict above." + (f" <i>({html.escape(str(why))})</i>" if why else "") + "</p>"
    )


def _disclosures_html(result: BacktestResult) -> str:
    return warning_box(v for k, v in (result.disclosures or {}).items() if k != "benchmark")


def _start_note(result: BacktestResult) -> str:
    reference = result.env_config.reference if result.env_config is not None else EQUAL_WEIGHT
    how = (
        "started invested at the reference"
        if result.start == "reference"
        else "started in cash (the first bar buys the portfolio)"
    )
    return (
        f"Reference = {reference}, held with a zero tilt through the agent's own execution "
        f"controls and costs. Agent and benchmarks {how}. Active return = agent's return − "
        "reference's per bar; the information ratio is its annualized mean over its "
        "annualized standard deviation (the tracking error)."
    )


def _active_risk_sections(result: BacktestResult) -> list[str]:
    panel = active_risk_panel(result)
    if panel is None:
        return []
    return [
        "<h3>Rolling information ratio and active drawdown</h3>",
        f'<img alt="rolling information ratio and active drawdown" '
        f'src="{png_uri(panel, (11, 3.6))}">',
    ]


def _capacity_sections(info: dict) -> list[str]:
    if not info.get("capacity"):
        return []
    return [
        "<h3>Capacity: the same policies at other account sizes</h3>",
        frame_table(capacity_text(info["capacity"])),
        '<p class="note">Each line is rerun on the backtest split with only the starting '
        "capital changed; square-root impact makes a larger account pay more per dollar "
        "traded. Fees and impact are totals over the backtest / initial capital.</p>",
    ]


def _dollars(value: float) -> str:
    return f"${value:,.0f}"


def _costs_meta(result: BacktestResult) -> list[str]:
    """The costs in dollars among the run facts at the top of the page (the first screen):
    the agent's, split into fees and market impact under the square-root model, and the
    zero-tilt reference's beside them."""
    metrics = result.metrics
    if "costs_paid" not in metrics.index or "agent" not in metrics.columns:
        return []
    paid = float(metrics.at["costs_paid", "agent"])
    if not np.isfinite(paid):
        return []
    text = f"costs paid by the agent: {_dollars(paid)}"
    share = (
        metrics.at["costs_pct_capital", "agent"] if "costs_pct_capital" in metrics.index else None
    )
    if share is not None and np.isfinite(share):
        text += f" ({share * 100:.2f} % of initial capital"
        impact = metrics.at["impact_paid", "agent"] if "impact_paid" in metrics.index else None
        config = result.env_config
        if config is not None and config.cost_model == "sqrt" and impact is not None:
            text += f"; fees {_dollars(paid - impact)}, market impact {_dollars(impact)}"
        text += ")"
    if m.REFERENCE in metrics.columns:
        reference = float(metrics.at["costs_paid", m.REFERENCE])
        if np.isfinite(reference):
            text += f", the reference's: {_dollars(reference)}"
    return [text]


def render_tearsheet(result: BacktestResult) -> str:
    """The full tearsheet of ``result`` as one HTML document (no external resources)."""
    info = result.info or {}
    idx = result.returns.index
    levels = result.account_value.index
    span = f"{levels[0]:%Y-%m-%d} → {levels[-1]:%Y-%m-%d}" if len(levels) else "empty"
    meta = [
        f"agent: {html.escape(str(info.get('agent', 'best')))}",
        # The split's bars as finpod info counts them; a return needs two bars.
        f"backtest split: {span} ({len(levels)} bars of {html.escape(result.bar)}, "
        f"{len(idx)} returns)",
        f"initial capital: ${result.initial_capital:,.0f}",
        *_costs_meta(result),
        f"candidates selection chose among: N = {result.num_trials}",
    ]
    if info.get("selection_decision"):
        meta.append(f"selection: {html.escape(str(info['selection_decision']))}")
    if info.get("selection_settings"):
        meta.append(html.escape(str(info["selection_settings"])))
    if info.get("dataset_hash"):
        meta.append(f"dataset hash: {html.escape(str(info['dataset_hash']))[:16]}")
    config = result.env_config
    if config is not None:
        meta.append(
            f"fills at bar t+1 {html.escape(config.fill_price)}, cost rate "
            f"{config.cost_rate * 100:.2f} %"
            + (
                f", square-root impact Y = {config.impact_coefficient:g}"
                if config.cost_model == "sqrt"
                else ""
            )
        )
    bench_note = (result.disclosures or {}).get("benchmark") or (
        "index = the dataset's index level, a price series with no costs"
    )
    sections = [
        verdict_html(backtest_verdict(result)),
        _disclosures_html(result),
        "<h2>Metrics</h2>",
        metrics_table(
            result.metrics.drop(index="psr", errors="ignore"), format_metric, column_label
        ),
        '<p class="note">Every strategy starts with the same capital and trades through the '
        f"same environment (next-bar fills, same costs). {html.escape(bench_note)}. "
        f"Annualization uses {result.bars_per_year:g} bars per year (from the dataset's "
        "calendar). The PSR of each column is under market-level statistics.</p>",
        *_capacity_sections(info),
        "<h2>Selection statistics</h2>",
        _statistics_html(result),
        "<h2>Market-level statistics</h2>",
        _market_html(result),
        "<h2>Equity curve</h2>",
        f'<img alt="equity curve" src="{png_uri(equity_panel(result))}">',
        "<h2>Active return against the reference</h2>",
        f'<p class="note">{html.escape(_start_note(result))}</p>',
        f'<img alt="excess return and rolling volatility" src="{png_uri(active_panel(result), (11, 3.6))}">',
        *_active_risk_sections(result),
        "<h3>Largest average tilts</h3>",
        _tilts_html(result),
        "<h2>Distribution and tail risk</h2>",
        _distribution_html(result),
        f'<img alt="return distribution" src="{png_uri(distribution_panel(result), (11, 3.4))}">',
        "<h2>Drawdown</h2>",
        f'<img alt="drawdown" src="{png_uri(drawdown_panel(result), (10, 3))}">',
        "<h3>Worst drawdowns</h3>",
        _drawdowns_html(result),
        "<h2>Monthly and annual returns</h2>",
        f'<img alt="monthly returns" src="{png_uri(monthly_panel(result), (11, 3.8))}">',
        "<h2>Rolling Sharpe and beta</h2>",
        f'<img alt="rolling sharpe and beta" src="{png_uri(rolling_panel(result), (11, 3.6))}">',
        "<h2>Holdings and exposure</h2>",
        f'<img alt="holdings and exposure" src="{png_uri(holdings_panel(result), (11, 3.8))}">',
        "<h2>Turnover over time</h2>",
        f'<img alt="turnover over time" src="{png_uri(turnover_panel(result), (11, 3.2))}">',
    ]
    learning = learning_panel(result)
    if learning is not None:
        sections += [
            "<h2>Learning curves</h2>",
            f'<img alt="learning curves" src="{png_uri(learning, (11, 3.6))}">',
        ]
    if result.leaderboard is not None and not result.leaderboard.empty:
        sections += ["<h2>Leaderboard</h2>", frame_table(result.leaderboard)]
    if not result.transactions.empty:
        last = result.transactions.tail(15).reset_index()
        if is_daily(result) and "timestamp" in last:
            last["timestamp"] = pd.DatetimeIndex(last["timestamp"]).strftime("%Y-%m-%d")
        sections += ["<h2>Last transactions</h2>", frame_table(last)]
    title = f"finpod backtest: {html.escape(result.run_id)}"
    return html_document(title, meta, sections, extra_css=VERDICT_CSS)
