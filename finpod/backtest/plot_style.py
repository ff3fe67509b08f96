"""How the tearsheet's figures look: one colour per strategy in every panel, legends
beside the data (never over it), dollars written whole on an axis."""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter

from finpod.backtest import metrics as m

#: One colour per strategy in every panel (the agent never in another's colour).
STRATEGY_COLORS = {
    "agent": "#1f77b4",
    "index": "#7f7f7f",
    m.REFERENCE: "#2ca02c",
    "equal_weight_buy_hold": "#ff7f0e",
    "equal_weight_daily": "#9467bd",
    "momentum": "#8c564b",
}
_OTHER_COLORS = ("#e377c2", "#bcbd22", "#17becf", "#d62728")


def color_of(name: str) -> str:
    """The colour of strategy ``name``, the same in every panel."""
    if name in STRATEGY_COLORS:
        return STRATEGY_COLORS[name]
    return _OTHER_COLORS[sum(map(ord, name)) % len(_OTHER_COLORS)]


def line_style(name: str) -> dict:
    return {"color": color_of(name), "lw": 2.0 if name == "agent" else 1.0}


def legend_outside(ax, fontsize: int = 7) -> None:
    """The legend to the right of the axes, never over the data."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def legend_below(ax, fontsize: int = 7, ncol: int = 3) -> None:
    """The legend under the axes (panels side by side have no room to their right)."""
    ax.legend(
        fontsize=fontsize,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.22),
        ncol=ncol,
        borderaxespad=0.0,
    )


def dollar_formatter():
    """Dollars written whole on an axis (``$1.25M``, ``$980k``), never as an offset
    (``1e6``) the reader has to apply."""

    def fmt(value: float, _pos: int) -> str:
        if abs(value) >= 1e6:
            return f"${value / 1e6:,.2f}M"
        if abs(value) >= 1e3:
            return f"${value / 1e3:,.0f}k"
        return f"${value:,.0f}"

    return FuncFormatter(fmt)
