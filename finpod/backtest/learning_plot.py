"""The tearsheet's learning-curve panel: one line per pod in a colour of its own (no
colour repeats, however many pods), the metric with the most points per pod (PPO's
sparse episode returns give way to its reward), a pod scored once drawn as a marked,
labelled point."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest.plot_style import legend_outside
from finpod.scores import DEFAULT_SCORE

if TYPE_CHECKING:
    from finpod.backtest.result import BacktestResult


def pod_colors(count: int) -> list:
    """``count`` colours that never repeat: tab10 up to 10 pods, tab20 up to 20, then
    evenly spaced along a perceptual colour map."""
    if count <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(count)]
    if count <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(count)]
    return list(matplotlib.colormaps["turbo"](np.linspace(0.02, 0.98, count)))


def curve_metric(sub: pd.DataFrame, preferred: tuple[str, ...]) -> str:
    """The metric a learning-curve panel draws from the rows ``sub`` of one split: the
    first ``preferred`` one whose pods have at least two finite points (median over pods),
    else the metric with the most points per pod. PPO ends an episode only every so many
    rollouts, so its ``episode_return`` is NaN at most logs: one dot per pod, not a curve."""
    values = pd.to_numeric(sub["value"], errors="coerce")
    finite = sub[np.isfinite(values)]
    if finite.empty:
        return str(sub["metric"].iloc[0])
    per_pod = finite.groupby(["metric", "pod_id"]).size().groupby(level="metric").median()
    for name in preferred:
        if per_pod.get(name, 0) >= 2:
            return name
    if per_pod.max() >= 2:
        return str(per_pod.idxmax())
    return next((name for name in preferred if name in per_pod), str(per_pod.idxmax()))


def learning_panel(result: BacktestResult) -> Callable[[Figure], None] | None:
    """Validation score (and a training metric) against env steps, one line per pod in a
    colour of its own; a pod scored once is a marked, labelled point."""
    curves = result.learning_curves
    if curves is None or curves.empty or not {"pod_id", "env_steps", "metric"} <= set(curves):
        return None

    def draw(fig: Figure) -> None:
        splits = [s for s in ("train", "validation") if s in set(curves.get("split", []))]
        splits = splits or [None]
        axes = np.atleast_1d(fig.subplots(1, len(splits)))
        score = (result.info or {}).get("score_name") or DEFAULT_SCORE
        pods = list(dict.fromkeys(curves["pod_id"].astype(str)))
        colors = dict(zip(pods, pod_colors(len(pods)), strict=True))
        for ax, split in zip(axes, splits, strict=False):
            sub = curves if split is None else curves[curves["split"] == split]
            preferred = (score,) if split == "validation" else ("episode_return", "reward_mean")
            metric = curve_metric(sub, preferred)
            values = pd.to_numeric(sub["value"], errors="coerce")
            sub = sub[(sub["metric"] == metric) & np.isfinite(values)]
            points = sub.groupby("pod_id").size()
            few = int(points.max()) <= 12 if len(points) else False
            for pod, g in sub.groupby("pod_id"):
                g = g.sort_values("env_steps")
                color = colors.get(str(pod))
                if len(g) == 1:
                    # One point is not a curve: mark it and say so.
                    x, y = float(g["env_steps"].iloc[0]), float(g["value"].iloc[0])
                    ax.plot(
                        [x], [y], ls="none", marker="o", ms=5, color=color, label=f"{pod} (1 point)"
                    )
                    ax.annotate(
                        str(pod),
                        (x, y),
                        xytext=(3, 3),
                        textcoords="offset points",
                        fontsize=6,
                        color=color,
                    )
                    continue
                # A pod scored only a few times: its points marked on the line.
                ax.plot(
                    g["env_steps"],
                    g["value"],
                    lw=1,
                    marker="o" if few else None,
                    ms=3,
                    color=color,
                    label=str(pod),
                )
            ax.set_xlabel("env steps")
            if len(points):
                count = (
                    f"{int(points.min())}"
                    if points.min() == points.max()
                    else (f"{int(points.min())}–{int(points.max())}")
                )
                points_word = "point" if count == "1" else "points"
                ax.set_title(f"{split or ''} {metric} per pod ({count} {points_word} each)".strip())
            ax.grid(alpha=0.3)
            if sub["pod_id"].nunique() <= 12:
                legend_outside(ax, fontsize=6)

    return draw
