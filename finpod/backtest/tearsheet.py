"""The tearsheet: one self-contained HTML page per backtest (every image a base64 PNG).

Panels: metrics table (agent vs benchmarks), equity curves, drawdown, monthly returns,
rolling Sharpe and beta, holdings and exposure, and the run's learning curves and
leaderboard. pyfolio-reloaded draws the underwater drawdown (it wants UTC timestamps);
finpod draws the rest itself: the equity curve and annual returns with every benchmark,
the monthly heatmap (pyfolio prints months without bars as 0 %), rolling ratios annualized
for the bar size (pyfolio assumes daily bars), and holdings/exposure (pyfolio's exposure
panel comes out blank under current pandas).
"""

from __future__ import annotations

import base64
import html
import io
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest import metrics as m
from finpod.backtest.labels import METRIC_LABELS, format_metric

if TYPE_CHECKING:
    from finpod.backtest.result import BacktestResult

_LABELS = METRIC_LABELS
#: Worst drawdowns listed in the drawdown table.
_WORST_DRAWDOWNS = 5
#: Most tickers drawn individually in the holdings panel; the rest are summed as "other".
_TOP_HOLDINGS = 10


def _png(draw: Callable[[Figure], None], size: tuple[float, float] = (10, 3.6)) -> str:
    """Run ``draw(fig)`` on a fresh figure and return it as a data: URI."""
    # A bare Figure (not pyplot) draws with Agg without touching the global backend, so
    # notebooks keep showing their own plots inline.
    fig = Figure(figsize=size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draw(fig)
        fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _utc(series: pd.Series) -> pd.Series:
    series = series.copy()
    idx = pd.DatetimeIndex(series.index)
    series.index = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    return series


def _pyfolio_plotting():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pyfolio.plotting as pp
    return pp


_format = format_metric


def _column_label(name: str) -> str:
    if name == "index":
        return "index (level, no costs)"
    if name == m.REFERENCE:
        return "reference (zero tilt)"
    return name


def _daily(result: BacktestResult) -> bool:
    return result.bar.endswith("d")


def _date_axis(ax, result: BacktestResult) -> None:
    """Dates without times on daily bars (intraday keeps the time of day)."""
    import matplotlib.dates as mdates

    if _daily(result):
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)


def _stamp(value, result: BacktestResult) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)) or pd.isna(value):
        return "not recovered"
    ts = pd.Timestamp(value)
    return f"{ts:%Y-%m-%d}" if _daily(result) else f"{ts:%Y-%m-%d %H:%M}"


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


def _tilts_html(result: BacktestResult) -> str:
    tilts = (result.info or {}).get("largest_tilts") or []
    if not tilts:
        return ""
    rows = "".join(
        f"<tr><th>{html.escape(str(t['ticker']))}</th>"
        f"<td>{float(t['mean_active_weight']) * 100:+.2f} pp</td></tr>"
        for t in tilts
    )
    return (
        "<table><thead><tr><th>name</th><th>mean active weight</th></tr></thead>"
        f"<tbody>{rows}</tbody></table><p class='note'>Mean weight over the backtest minus the "
        "reference portfolio's mean weight, in percentage points of account value.</p>"
    )


def _active(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax1, ax2 = fig.subplots(1, 2)
        agent = (1.0 + result.returns.fillna(0.0)).cumprod()
        for name, style in ((m.REFERENCE, "-"), ("index", "--")):
            if name in result.benchmark_returns:
                other = (1.0 + result.benchmark_returns[name].fillna(0.0)).cumprod()
                excess = (agent / other - 1.0) * 100.0
                ax1.plot(excess.index, excess.values, ls=style, label=f"agent vs {name}")
        ax1.axhline(0.0, color="k", lw=0.5)
        ax1.set_ylabel("excess growth (%)")
        ax1.set_title("Cumulative excess return (growth of agent / growth of other − 1)")
        ax1.legend(fontsize=7)
        window = _window(result)
        for name, col in result.all_returns.items():
            if name not in ("agent", m.REFERENCE, "index"):
                continue
            vol = col.rolling(window).std() * np.sqrt(result.bars_per_year) * 100.0
            ax2.plot(vol.index, vol.values, label=str(name), lw=2.0 if name == "agent" else 1)
        ax2.set_ylabel("annualized volatility (%)")
        ax2.set_title(f"Rolling volatility ({window} bars)")
        ax2.legend(fontsize=7)
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def _turnover(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        window = _window(result)
        in_cash = result.start == "cash"
        series = {"agent": (result.traded_value, result.account_value)}
        for name in result.benchmark_traded_value.columns:
            series[name] = (
                result.benchmark_traded_value[name],
                result.benchmark_account_value.get(name),
            )
        for name, (traded, value) in series.items():
            if value is None:
                continue
            traded = traded.astype("float64").fillna(0.0).copy()
            if in_cash and len(traded):
                traded.iloc[0] = 0.0  # the initial purchase
            ratio = traded / value.reindex(traded.index).astype("float64")
            annual = ratio.rolling(window).mean() * result.bars_per_year
            ax.plot(annual.index, annual.values, label=str(name), lw=2.0 if name == "agent" else 1)
        excluded = "excluding the initial purchase" if in_cash else "started invested"
        ax.set_title(f"Turnover over time ({window}-bar mean, × capital / year; {excluded})")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        _date_axis(ax, result)

    return draw


def _metrics_html(result: BacktestResult) -> str:
    table = result.metrics
    head = "".join(f"<th>{html.escape(_column_label(str(c)))}</th>" for c in table.columns)
    rows = []
    for name, row in table.iterrows():
        cells = "".join(f"<td>{_format(str(name), float(v))}</td>" for v in row)
        rows.append(f"<tr><th>{html.escape(_LABELS.get(str(name), str(name)))}</th>{cells}</tr>")
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _frame_html(frame: pd.DataFrame, max_rows: int = 20) -> str:
    shown = frame.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = []
    for _, row in shown.iterrows():
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append(f"<td>{v:.4g}</td>")
            else:
                cells.append(f"<td>{html.escape(str(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _equity(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for name, col in result.all_returns.items():
            equity = (1.0 + col.fillna(0.0)).cumprod() * result.initial_capital
            ax.plot(equity.index, equity.values, label=str(name), lw=2.0 if name == "agent" else 1)
        ax.set_ylabel("account value ($)")
        ax.set_title("Equity curve (same capital, costs and fills for every strategy)")
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)
        _date_axis(ax, result)

    return draw


def _drawdown(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        _pyfolio_plotting().plot_drawdown_underwater(_utc(result.returns), ax=ax)
        ax.set_title("Agent drawdown (underwater)")
        _date_axis(ax, result)

    return draw


def _monthly(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        table = m.monthly_returns(result.returns) * 100.0
        ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
        values = table.to_numpy(dtype=float)
        limit = max(float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0, 0.1)
        cmap = matplotlib.colormaps.get_cmap("RdYlGn").copy()
        cmap.set_bad("#f3f3f3")
        ax1.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                ax1.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7)
        ax1.set_xticks(range(12), ["J", "F", "M", "A", "M", "J", "J", "A", "S", "O", "N", "D"])
        ax1.set_yticks(range(len(table.index)), [str(y) for y in table.index])
        ax1.set_title("Agent monthly returns (%); grey: no bars")
        yearly = (1.0 + result.all_returns.fillna(0.0)).groupby(result.returns.index.year).prod()
        yearly = (yearly - 1.0) * 100.0
        yearly.plot.barh(ax=ax2, width=0.8, legend=False)
        ax2.axvline(0.0, color="k", lw=0.5)
        ax2.set_xlabel("return (%)")
        ax2.set_title("Annual returns, all strategies (%)")
        ax2.legend(fontsize=6)
        ax2.grid(alpha=0.3, axis="x")

    return draw


def _window(result: BacktestResult) -> int:
    """Rolling window: about three months of bars, at least 10, at most half the data."""
    quarter = int(round(result.bars_per_year / 4))
    return max(10, min(quarter, len(result.returns) // 2))


def _rolling(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        window = _window(result)
        ax1, ax2 = fig.subplots(1, 2)
        for name, col in result.all_returns.items():
            rs = m.rolling_sharpe(col, window, result.bars_per_year)
            ax1.plot(rs.index, rs.values, label=str(name), lw=2.0 if name == "agent" else 1)
        ax1.axhline(0.0, color="k", lw=0.5)
        ax1.set_title(f"Rolling Sharpe ({window} bars, annualized)")
        ax1.legend(fontsize=7)
        bench = result.index_returns
        if bench is not None:
            rb = m.rolling_beta(result.returns, bench, window)
            ax2.plot(rb.index, rb.values, color="tab:orange")
            ax2.axhline(1.0, color="k", lw=0.5, ls="--")
            ax2.set_title(f"Rolling beta to the index ({window} bars)")
        else:
            ax2.text(0.5, 0.5, "no index in this dataset", ha="center", va="center")
            ax2.set_axis_off()
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def _holdings(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        pos = result.positions.astype("float64")
        total = result.account_value.reindex(pos.index).astype("float64")
        stocks = pos.drop(columns=["cash"], errors="ignore")
        weights = stocks.div(total.where(total > 0), axis=0).fillna(0.0)
        ax1, ax2 = fig.subplots(1, 2)
        top = weights.abs().mean().sort_values(ascending=False).index[:_TOP_HOLDINGS]
        shown = weights[top].clip(lower=0.0)
        other = weights.drop(columns=top).clip(lower=0.0).sum(axis=1)
        if len(weights.columns) > len(top):
            shown = shown.assign(other=other)
        if shown.shape[1]:
            palette = list(matplotlib.colormaps.get_cmap("tab20").colors[::2]) + list(
                matplotlib.colormaps.get_cmap("tab20").colors[1::2]
            )
            colors = [palette[i % len(palette)] for i in range(len(top))]
            colors += ["#bbbbbb"] * (shown.shape[1] - len(top))
            ax1.stackplot(
                shown.index, shown.T.values, labels=[str(c) for c in shown.columns], colors=colors
            )
            ax1.legend(fontsize=6, loc="upper left", ncol=2)
        ax1.set_ylim(0, max(1.0, float(shown.sum(axis=1).max() or 0) * 1.05))
        ax1.set_title("Holdings (weight of account value)")
        long = weights.clip(lower=0.0).sum(axis=1)
        short = weights.clip(upper=0.0).sum(axis=1)
        cash = (pos["cash"] / total).fillna(0.0) if "cash" in pos else 1.0 - long - short
        ax2.plot(long.index, long.values, label="long exposure")
        if (short < 0).any():
            ax2.plot(short.index, short.values, label="short exposure")
        ax2.plot(cash.index, np.asarray(cash), label="cash", ls="--")
        ax2.set_title("Exposure")
        ax2.legend(fontsize=7)
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def _learning(result: BacktestResult) -> Callable[[Figure], None] | None:
    curves = result.learning_curves
    if curves is None or curves.empty or not {"pod_id", "env_steps", "metric"} <= set(curves):
        return None

    def draw(fig: Figure) -> None:
        splits = [s for s in ("train", "validation") if s in set(curves.get("split", []))]
        splits = splits or [None]
        axes = np.atleast_1d(fig.subplots(1, len(splits)))
        score = (result.info.get("score_name") or "sharpe") if result.info else "sharpe"
        for ax, split in zip(axes, splits, strict=False):
            sub = curves if split is None else curves[curves["split"] == split]
            preferred = (score,) if split == "validation" else ("episode_return", "reward_mean")
            present = set(sub["metric"])
            metric = next((p for p in preferred if p in present), sub["metric"].iloc[0])
            sub = sub[sub["metric"] == metric]
            for pod, g in sub.groupby("pod_id"):
                g = g.sort_values("env_steps")
                ax.plot(g["env_steps"], g["value"], lw=1, label=str(pod))
            ax.set_xlabel("env steps")
            ax.set_title(f"{split or ''} {metric} per pod".strip())
            ax.grid(alpha=0.3)
            if sub["pod_id"].nunique() <= 12:
                ax.legend(fontsize=6)

    return draw


#: Order and titles of the selection statistics section.
_STATISTICS = (
    ("psr", "PSR of the backtest returns (vs a Sharpe of 0)"),
    ("dsr", "Deflated Sharpe of the selection (validation split)"),
    ("pbo", "Probability of backtest overfitting (CSCV, validation split)"),
)


def _statistics_html(result: BacktestResult) -> str:
    """The PSR, DSR and PBO, each with what it measures, or why it is undefined."""
    stats = result.statistics or {}
    n = stats.get("num_trials")
    rows = []
    for key, title in _STATISTICS:
        value = stats.get(key)
        shown = f"{value:.3f}" if isinstance(value, int | float) else "undefined"
        why = stats.get(f"{key}_note")
        meaning = m.STATISTIC_MEANINGS[key]
        if why:
            meaning += f" <i>({html.escape(str(why))})</i>"
        rows.append(f"<tr><th>{title}</th><td>{shown}</td><td class='l'>{meaning}</td></tr>")
    detail = [f"selection split: {html.escape(str(stats.get('selection_split', 'validation')))}"]
    if n:
        detail.append(f"N = {n} candidates and checkpoints selection chose among")
    if stats.get("validation_bars"):
        detail.append(f"{stats['validation_bars']} validation bars")
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
        + f"<p class='note'>{' · '.join(detail)}.</p>"
    )


def _disclosures_html(result: BacktestResult) -> str:
    items = [v for k, v in (result.disclosures or {}).items() if v and k != "benchmark"]
    if not items:
        return ""
    lis = "".join(f"<li>{html.escape(str(v))}</li>" for v in items)
    return f"<div class='warn'><b>Before reading these numbers</b><ul>{lis}</ul></div>"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;
color:#1b1b1b;max-width:1100px}
h1{font-size:1.5em;margin-bottom:0}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9em}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}thead th{background:#f3f3f3}
tbody th{text-align:left;font-weight:500}img{max-width:100%;display:block;margin:.5em 0}
.note{color:#555;font-size:.85em;max-width:900px}td.l{text-align:left;max-width:560px}
.warn{background:#fff6e0;border:1px solid #e8c66a;padding:6px 12px;margin:1em 0;font-size:.9em}
"""


def _start_note(result: BacktestResult) -> str:
    env = (result.info or {}).get("env") or {}
    reference = env.get("reference", "equal_weight")
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


def render_tearsheet(result: BacktestResult) -> str:
    """The full tearsheet of ``result`` as one HTML document (no external resources)."""
    info = result.info or {}
    idx = result.returns.index
    span = f"{idx[0]:%Y-%m-%d} → {idx[-1]:%Y-%m-%d}" if len(idx) else "empty"
    meta = [
        f"agent: {html.escape(str(info.get('agent', 'best')))}",
        f"backtest split: {span} ({len(idx)} bars of {html.escape(result.bar)})",
        f"initial capital: ${result.initial_capital:,.0f}",
        f"candidates selection chose among: {result.num_trials}",
    ]
    if info.get("dataset_hash"):
        meta.append(f"dataset hash: {html.escape(str(info['dataset_hash']))[:16]}")
    if info.get("env"):
        env = info["env"]
        meta.append(
            "fills at bar t+1 "
            f"{html.escape(str(env.get('fill_price', 'open')))}, cost rate "
            f"{float(env.get('cost_rate', 0.0)) * 100:.2f} %"
        )
    bench_note = (result.disclosures or {}).get("benchmark") or (
        "index = the dataset's index level, a price series with no costs"
    )
    sections = [
        _disclosures_html(result),
        "<h2>Metrics</h2>",
        _metrics_html(result),
        '<p class="note">Every strategy starts with the same capital and trades through the '
        f"same environment (next-bar fills, same costs). {html.escape(bench_note)}. "
        f"Annualization uses {result.bars_per_year:g} bars per year (from the dataset's "
        "calendar). PSR is the probabilistic Sharpe of each column's backtest returns against "
        "0.</p>",
        "<h2>Selection statistics</h2>",
        _statistics_html(result),
        "<h2>Equity curve</h2>",
        f'<img alt="equity curve" src="{_png(_equity(result))}">',
        "<h2>Active return against the reference</h2>",
        f'<p class="note">{html.escape(_start_note(result))}</p>',
        f'<img alt="excess return and rolling volatility" src="{_png(_active(result), (11, 3.6))}">',
        "<h3>Largest average tilts</h3>",
        _tilts_html(result),
        "<h2>Drawdown</h2>",
        f'<img alt="drawdown" src="{_png(_drawdown(result), (10, 3))}">',
        "<h3>Worst drawdowns</h3>",
        _drawdowns_html(result),
        "<h2>Monthly and annual returns</h2>",
        f'<img alt="monthly returns" src="{_png(_monthly(result), (11, 3.8))}">',
        "<h2>Rolling Sharpe and beta</h2>",
        f'<img alt="rolling sharpe and beta" src="{_png(_rolling(result), (11, 3.6))}">',
        "<h2>Holdings and exposure</h2>",
        f'<img alt="holdings and exposure" src="{_png(_holdings(result), (11, 3.8))}">',
        "<h2>Turnover over time</h2>",
        f'<img alt="turnover over time" src="{_png(_turnover(result), (11, 3.2))}">',
    ]
    learning = _learning(result)
    if learning is not None:
        sections += [
            "<h2>Learning curves</h2>",
            f'<img alt="learning curves" src="{_png(learning, (11, 3.6))}">',
        ]
    if result.leaderboard is not None and not result.leaderboard.empty:
        sections += ["<h2>Leaderboard</h2>", _frame_html(result.leaderboard)]
    if not result.transactions.empty:
        last = result.transactions.tail(15).reset_index()
        if _daily(result) and "timestamp" in last:
            last["timestamp"] = pd.DatetimeIndex(last["timestamp"]).strftime("%Y-%m-%d")
        sections += ["<h2>Last transactions</h2>", _frame_html(last)]
    title = f"finpod backtest: {html.escape(result.run_id)}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        f"<h1>{title}</h1><p class='meta'>{' · '.join(meta)}</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
