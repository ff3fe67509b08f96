"""The tearsheet's figures: each panel a function of a ``BacktestResult`` returning a
``draw(fig)`` callable, which :func:`finpod.backtest.page.png_uri` renders to a data: URI.

pyfolio-reloaded draws the underwater drawdown (it wants UTC timestamps); the rest is drawn
here: equity curves and annual returns with every benchmark, the monthly heatmap, rolling
ratios annualized for the bar size, holdings and exposure, turnover, active return and the
run's learning curves (:mod:`finpod.backtest.learning_plot`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest import metrics as m
from finpod.backtest.plot_style import (
    color_of,
    dollar_formatter,
    legend_below,
    legend_outside,
    line_style,
)

if TYPE_CHECKING:
    from finpod.backtest.result import BacktestResult

#: Most tickers drawn individually in the holdings panel; the rest are summed as "other".
_TOP_HOLDINGS = 10


def _utc(series: pd.Series) -> pd.Series:
    series = series.copy()
    idx = pd.DatetimeIndex(series.index)
    series.index = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
    return series


def _pyfolio_plotting():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Only to draw a tearsheet: importing finpod.backtest (every pod, every report)
        # loads no pyfolio, a seconds-long import (tests/test_boundaries.py).
        import pyfolio.plotting as pp
    return pp


def column_label(name: str) -> str:
    if name == "index":
        return "index (level, no costs)"
    if name == m.REFERENCE:
        return "reference (zero tilt)"
    return name


def relative_luminance(rgba) -> float:
    """WCAG relative luminance of an sRGB colour (channels in 0-1): 0 black, 1 white."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(a, b) -> float:
    """WCAG contrast ratio of two colours, 1 (none) to 21 (black on white)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def readable_text_colour(background) -> str:
    """Black or white, whichever contrasts more with ``background`` (an RGBA tuple): the
    heatmap's numbers stay readable on its dark reds and greens (at least 4.5:1)."""
    black, white = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    return (
        "black"
        if contrast_ratio(background, black) >= contrast_ratio(background, white)
        else "white"
    )


def is_daily(result: BacktestResult) -> bool:
    return result.bar.endswith("d")


def _date_axis(ax, result: BacktestResult) -> None:
    """Dates without times on daily bars (intraday keeps the time of day)."""
    if is_daily(result):
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)


def active_panel(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax1, ax2 = fig.subplots(1, 2)
        agent = (1.0 + result.returns.fillna(0.0)).cumprod()
        for name, style in ((m.REFERENCE, "-"), ("index", "--")):
            if name in result.benchmark_returns:
                other = (1.0 + result.benchmark_returns[name].fillna(0.0)).cumprod()
                excess = (agent / other - 1.0) * 100.0
                ax1.plot(
                    excess.index,
                    excess.values,
                    ls=style,
                    color=color_of(name),
                    label=f"agent vs {name}",
                )
        ax1.axhline(0.0, color="k", lw=0.5)
        ax1.set_ylabel("excess growth (%)")
        ax1.set_title("Cumulative excess return (growth of agent / growth of other − 1)")
        legend_below(ax1)
        window = _window(result)
        for name, col in result.all_returns.items():
            if name not in ("agent", m.REFERENCE, "index"):
                continue
            vol = col.rolling(window).std() * np.sqrt(result.bars_per_year) * 100.0
            ax2.plot(vol.index, vol.values, label=str(name), **line_style(str(name)))
        ax2.set_ylabel("annualized volatility (%)")
        ax2.set_title(f"Rolling volatility ({window} bars)")
        legend_below(ax2)
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def turnover_panel(result: BacktestResult) -> Callable[[Figure], None]:
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
            ax.plot(annual.index, annual.values, label=str(name), **line_style(str(name)))
        excluded = "excluding the initial purchase" if in_cash else "started invested"
        ax.set_title(f"Turnover over time ({window}-bar mean, × capital / year; {excluded})")
        legend_outside(ax)
        ax.grid(alpha=0.3)
        _date_axis(ax, result)

    return draw


def equity_panel(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        for name, col in result.all_returns.items():
            equity = (1.0 + col.fillna(0.0)).cumprod() * result.initial_capital
            ax.plot(equity.index, equity.values, label=str(name), **line_style(str(name)))
        ax.set_ylabel("account value")
        ax.yaxis.set_major_formatter(dollar_formatter())
        ax.set_title("Equity curve (same capital, costs and fills for every strategy)")
        legend_outside(ax, fontsize=8)
        ax.grid(alpha=0.3)
        _date_axis(ax, result)

    return draw


def drawdown_panel(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        _pyfolio_plotting().plot_drawdown_underwater(_utc(result.returns), ax=ax)
        ax.set_title("Agent drawdown (underwater)")
        _date_axis(ax, result)

    return draw


def monthly_panel(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        table = m.monthly_returns(result.returns) * 100.0
        ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
        values = table.to_numpy(dtype=float)
        limit = max(float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0, 0.1)
        cmap = matplotlib.colormaps.get_cmap("RdYlGn").with_extremes(bad="#f3f3f3")
        image = ax1.imshow(
            np.ma.masked_invalid(values), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto"
        )
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                colour = readable_text_colour(image.to_rgba(v))
                ax1.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color=colour)
        ax1.set_xticks(range(12), ["J", "F", "M", "A", "M", "J", "J", "A", "S", "O", "N", "D"])
        ax1.set_yticks(range(len(table.index)), [str(y) for y in table.index])
        ax1.set_title("Agent monthly returns (%); grey: no bars")
        yearly = (1.0 + result.all_returns.fillna(0.0)).groupby(result.returns.index.year).prod()
        yearly = (yearly - 1.0) * 100.0
        yearly.plot.barh(
            ax=ax2, width=0.8, legend=False, color=[color_of(str(c)) for c in yearly.columns]
        )
        ax2.axvline(0.0, color="k", lw=0.5)
        ax2.set_xlabel("return (%)")
        ax2.set_title("Annual returns, all strategies (%)")
        legend_outside(ax2, fontsize=6)
        ax2.grid(alpha=0.3, axis="x")

    return draw


def _window(result: BacktestResult) -> int:
    """Rolling window: about three months of bars, at least 10, at most half the data."""
    quarter = int(round(result.bars_per_year / 4))
    return max(10, min(quarter, len(result.returns) // 2))


def rolling_panel(result: BacktestResult) -> Callable[[Figure], None]:
    def draw(fig: Figure) -> None:
        window = _window(result)
        ax1, ax2 = fig.subplots(1, 2)
        for name, col in result.all_returns.items():
            rs = m.rolling_sharpe(col, window, result.bars_per_year)
            ax1.plot(rs.index, rs.values, label=str(name), **line_style(str(name)))
        ax1.axhline(0.0, color="k", lw=0.5)
        ax1.set_title(f"Rolling Sharpe ({window} bars, annualized)")
        legend_below(ax1)
        bench = result.index_returns
        if bench is not None:
            for name, col in result.all_returns.items():
                if name == "index":
                    continue
                rb = m.rolling_beta(col, bench, window)
                ax2.plot(rb.index, rb.values, label=str(name), **line_style(str(name)))
            ax2.axhline(1.0, color=color_of("index"), lw=1.0, ls="--", label="index (β = 1)")
            ax2.set_title(f"Rolling beta to the index ({window} bars)")
            legend_below(ax2)
        else:
            ax2.text(0.5, 0.5, "no index in this dataset", ha="center", va="center")
            ax2.set_axis_off()
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def holdings_panel(result: BacktestResult) -> Callable[[Figure], None]:
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
            legend_below(ax1, fontsize=6, ncol=4)
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
        legend_below(ax2)
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw


def distribution_panel(result: BacktestResult) -> Callable[[Figure], None]:
    """Histogram of the agent's per-bar returns beside the reference's (or the index's),
    with the agent's 5 % VaR and CVaR (empyrical) marked."""

    def draw(fig: Figure) -> None:
        ax = fig.add_subplot()
        agent = result.returns.dropna() * 100.0
        others = [n for n in (m.REFERENCE, "index") if n in result.benchmark_returns]
        other = others[0] if others else None
        values = [agent] + ([result.benchmark_returns[other].dropna() * 100.0] if other else [])
        both = pd.concat(values)
        bins = np.linspace(float(both.min()), float(both.max()), 50) if len(both) else 10
        ax.hist(agent, bins=bins, alpha=0.6, color=color_of("agent"), label="agent")
        if other:
            ax.hist(
                values[1], bins=bins, alpha=0.4, color=color_of(other), label=column_label(other)
            )
        stats = m.distribution_statistics(result.returns)
        for key, style, name in (
            ("value_at_risk", "--", "VaR 5 %"),
            ("conditional_value_at_risk", ":", "CVaR 5 %"),
        ):
            if np.isfinite(stats[key]):
                ax.axvline(
                    stats[key] * 100.0,
                    color="k",
                    ls=style,
                    lw=1.0,
                    label=f"agent {name}: {stats[key] * 100:.2f} %",
                )
        ax.set_xlabel("return per bar (%)")
        ax.set_ylabel("bars")
        ax.set_title(
            f"Distribution of per-bar returns (agent skew {stats['skew']:.2f}, "
            f"excess kurtosis {stats['kurtosis']:.2f})"
        )
        legend_outside(ax)
        ax.grid(alpha=0.3)

    return draw


def active_risk_panel(result: BacktestResult) -> Callable[[Figure], None] | None:
    """Rolling information ratio against the reference, and the active drawdown (the
    agent's wealth relative to the reference's, from its running high). None without a
    reference column."""
    reference = result.reference_returns
    if reference is None:
        return None

    def draw(fig: Figure) -> None:
        window = _window(result)
        ax1, ax2 = fig.subplots(1, 2)
        ir = m.rolling_information_ratio(result.returns, reference, window, result.bars_per_year)
        ax1.plot(ir.index, ir.values, label="agent", **line_style("agent"))
        ax1.axhline(0.0, color=color_of(m.REFERENCE), lw=1.0, ls="--", label="reference (0)")
        ax1.set_title(f"Rolling information ratio vs the reference ({window} bars)")
        legend_below(ax1)
        dd = m.active_drawdown_series(result.returns, reference) * 100.0
        ax2.fill_between(dd.index, dd.values, 0.0, color=color_of("agent"), alpha=0.35)
        ax2.plot(
            dd.index,
            dd.values,
            label="agent relative to the reference",
            lw=1.0,
            color=color_of("agent"),
        )
        ax2.set_ylabel("active drawdown (%)")
        ax2.set_title("Active drawdown (wealth relative to the reference)")
        legend_below(ax2)
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            _date_axis(ax, result)

    return draw
