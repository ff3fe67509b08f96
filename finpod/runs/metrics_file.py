"""``metrics.csv`` and ``learning_curves.png`` of a run directory (single agent or tournament).

``metrics.csv`` has one row per logged number::

    pod_id,env_steps,wall_s,split,metric,value

``split`` is ``train`` (losses, episode returns) or ``validation`` (the selection score);
``wall_s`` is seconds since the writer started (3 decimals); ``value`` is written with
full precision (any non-finite number as ``nan``, so it stays visible and is never read
back as a score). Rows are appended with one ``write`` of whole lines and an
``fsync``: a crash leaves at most a torn last line, which :func:`read_metrics` drops and
:func:`cut_torn_tail` removes before the next append.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from finpod.atomic import atomic_write, atomic_write_text
from finpod.errors import FinpodError

if TYPE_CHECKING:
    import pandas as pd

METRICS_FILE = "metrics.csv"
CURVES_FILE = "learning_curves.png"
METRICS_HEADER = ("pod_id", "env_steps", "wall_s", "split", "metric", "value")

#: One row: (pod_id, env_steps, wall_s, split, metric, value).
MetricRow = tuple[str, int, float, str, str, float]


def format_rows(rows: Iterable[Sequence]) -> str:
    """CSV text of ``rows`` (no header), one line each."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for pod, steps, wall, split, metric, value in rows:
        writer.writerow([pod, int(steps), f"{float(wall):.3f}", split, metric, _fmt(value)])
    return buf.getvalue()


def write_metrics(path: Path, rows: Iterable[Sequence]) -> None:
    """Rewrite ``path`` with a header and ``rows`` (atomically)."""
    atomic_write_text(Path(path), ",".join(METRICS_HEADER) + "\n" + format_rows(rows))


def append_metrics(path: Path, rows: Iterable[Sequence]) -> None:
    """Append ``rows`` to ``path`` (created with its header if missing): one ``write`` of
    whole lines, then ``fsync``."""
    text = format_rows(rows)
    if not text:
        return
    path = Path(path)
    if not path.is_file():
        write_metrics(path, [])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_metrics(path: Path) -> list[MetricRow]:
    """Rows of a ``metrics.csv`` (empty if the file does not exist).

    A last line without its newline is a write cut short by a crash: it is dropped. A
    malformed line anywhere else raises :class:`FinpodError`.
    """
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows: list[MetricRow] = []
    with io.StringIO(text, newline="") as fh:
        for rec in csv.DictReader(fh):
            try:
                rows.append(
                    (
                        rec["pod_id"],
                        int(rec["env_steps"]),
                        float(rec["wall_s"]),
                        rec["split"],
                        rec["metric"],
                        float(rec["value"]) if rec["value"] not in ("", "nan") else math.nan,
                    )
                )
            except (KeyError, TypeError, ValueError) as err:
                raise FinpodError(f"{path} has a malformed row: {err}", "restore the file") from err
    return rows


def cut_torn_tail(path: Path) -> None:
    """Truncate ``path`` after its last newline (a torn append), so appends stay whole."""
    path = Path(path)
    if not path.is_file():
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
            os.fsync(fh.fileno())


def plot_learning_curves(
    rows: Sequence[MetricRow],
    out_png: Path,
    score_name: str,
    *,
    highlight: Iterable[str] = (),
    title: str = "learning curves",
    train_panel: bool = False,
) -> Path | None:
    """Validation ``score_name`` against env steps, one line per pod; ``None`` if nothing to draw.

    ``highlight``ed pods are drawn bold and labelled by rank, the others grey (a tournament
    of many pods); with no highlight every pod is labelled (up to 10). ``train_panel``
    adds a second panel of the training episode return.
    """
    val = [r for r in rows if r[3] == "validation" and r[4] == score_name]
    panels = [(val, f"validation {score_name}")]
    if train_panel:
        train = [r for r in rows if r[3] == "train" and r[4] == "episode_return"]
        panels.append((train, "train episode return"))
    if not any(part for part, _ in panels):
        return None
    # lazy: finpod.runs loads no matplotlib (tests/test_boundaries.py). A bare Figure
    # draws with Agg without switching the process's pyplot backend.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8 if len(panels) == 1 else 11, 4.5 if len(panels) == 1 else 4), dpi=100)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    bold = list(highlight)
    for ax, (part, label) in zip(axes, panels, strict=True):
        by_pod: dict[str, list[tuple[int, float]]] = {}
        for pod, steps, _, _, _, value in part:
            by_pod.setdefault(pod, []).append((steps, value))
        for pod, points in by_pod.items():
            points.sort()
            xs, ys = zip(*points, strict=True)
            if pod in bold:
                ax.plot(xs, ys, marker="o", lw=1.8, label=f"{pod} (#{bold.index(pod) + 1})")
            elif bold:
                ax.plot(xs, ys, color="0.7", lw=0.8, alpha=0.7)
            else:
                ax.plot(xs, ys, marker=".", label=str(pod))
        ax.set_xlabel("env steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if bold or (by_pod and len(by_pod) <= 10):
            ax.legend(fontsize=7, loc="best")
    axes[0].set_title(title)
    fig.tight_layout()
    out_png = Path(out_png)
    atomic_write(out_png, lambda p: fig.savefig(p, format="png"))
    return out_png


def _fmt(value: float) -> str:
    value = float(value)
    # Shortest text that reads back to the same float; any non-finite number is "nan",
    # which no reader takes for a score.
    return repr(value) if math.isfinite(value) else "nan"


def metrics_frame(path: Path) -> pd.DataFrame | None:
    """``metrics.csv`` as a DataFrame (columns :data:`METRICS_HEADER`), or ``None`` when
    the file is missing or unreadable (a report then goes without learning curves)."""
    # lazy: the CLI reads finpod.runs at start-up, without pandas (tests/test_boundaries.py)
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        return None
    try:
        rows = read_metrics(path)
    except (OSError, FinpodError):
        return None
    return pd.DataFrame(rows, columns=list(METRICS_HEADER))
