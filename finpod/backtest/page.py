"""The building blocks of finpod's self-contained HTML pages (the tearsheet and the
walk-forward report): the style sheet, figures as base64 data: URIs, tables, the warning
box and the document shell. No page imports another page's helpers; both import these.
"""

from __future__ import annotations

import base64
import html
import io
import warnings
from collections.abc import Callable, Iterable

import pandas as pd
from matplotlib.figure import Figure

from finpod.backtest.labels import METRIC_LABELS

#: The one style sheet of every finpod page (inlined: a page needs no network).
PAGE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;
color:#1b1b1b;max-width:1100px}
h1{font-size:1.5em;margin-bottom:0}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9em}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}thead th{background:#f3f3f3}
tbody th{text-align:left;font-weight:500}img{max-width:100%;display:block;margin:.5em 0}
.note{color:#555;font-size:.85em;max-width:900px}td.l{text-align:left;max-width:560px}
.warn{background:#fff6e0;border:1px solid #e8c66a;padding:6px 12px;margin:1em 0;font-size:.9em}
table.metrics td,table.metrics thead th{white-space:nowrap}
table.metrics thead th+th{min-width:6.5em}
"""


def png_uri(draw: Callable[[Figure], None], size: tuple[float, float] = (10, 3.6)) -> str:
    """Run ``draw(fig)`` on a fresh figure of ``size`` inches and return it as a PNG data: URI."""
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


def frame_table(frame: pd.DataFrame, max_rows: int = 20) -> str:
    """The first ``max_rows`` rows of ``frame`` as an HTML table (floats to 4 significant digits)."""
    shown = frame.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = []
    for _, row in shown.iterrows():
        cells = [
            f"<td>{v:.4g}</td>" if isinstance(v, float) else f"<td>{html.escape(str(v))}</td>"
            for v in row
        ]
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def metrics_table(
    table: pd.DataFrame,
    format_value: Callable[[str, float], str],
    column_label: Callable[[str], str] = str,
) -> str:
    """A metrics × strategies table: each row headed by the metric's label, each value
    written by ``format_value(metric, value)``, each column headed by ``column_label``."""
    head = "".join(f"<th>{html.escape(column_label(str(c)))}</th>" for c in table.columns)
    rows = []
    for name, row in table.iterrows():
        cells = "".join(f"<td>{format_value(str(name), float(v))}</td>" for v in row)
        label = METRIC_LABELS.get(str(name), str(name))
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    # class "metrics": values and column names stay on one line, and every strategy's
    # column is at least as wide as a number (the agent's is never squeezed).
    return (
        f"<table class='metrics'><thead><tr><th></th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def warning_box(items: Iterable[object]) -> str:
    """The "Before reading these numbers" box listing ``items`` (empty when there are none)."""
    lis = "".join(f"<li>{html.escape(str(v))}</li>" for v in items if v)
    if not lis:
        return ""
    return f"<div class='warn'><b>Before reading these numbers</b><ul>{lis}</ul></div>"


def html_document(title: str, meta: list[str], sections: list[str], extra_css: str = "") -> str:
    """One self-contained HTML page: ``title`` (already escaped), a line of ``meta`` items
    (already escaped), then ``sections`` in order."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{PAGE_CSS}{extra_css}</style></head><body>"
        f"<h1>{title}</h1><p class='meta'>{' · '.join(meta)}</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
