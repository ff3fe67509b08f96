"""The tournament's displays: a live rich table of pods and leaderboard, event lines.

:class:`TournamentView` gives :func:`finpod.pipeline.train` and
:func:`finpod.pipeline.run_all` their ``on_event`` and ``display`` hooks when ``finpod
train`` or ``finpod run`` trains a tournament.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from finpod.cli.interrupted import note_run_dir
from finpod.cli.lines import statement
from finpod.cli.stop_signals import reclaim_stop_signals
from finpod.cli.tables import fits, print_table
from finpod.runs import LOG_FILE
from finpod.tournament.budget import running_steps

#: Seconds between two progress lines when the console is not a terminal (a log file).
PROGRESS_LINE_EVERY_S = 30.0


def duration(seconds: float) -> str:
    """``45s``, ``3m05s`` or ``1h02m``: a time left or spent, short."""
    s = round(seconds)
    if s < 90:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def short_count(n: float) -> str:
    """``950``, ``65k``, ``1.2M``: env steps in a narrow column."""
    if n < 10_000:
        return f"{n:,.0f}"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.1f}M"


def budget_text(snap: dict[str, Any], percent: bool = False) -> tuple[str, float]:
    """The budget's progress as text (``123,456/400,000 steps · ETA 1m40s``, with
    ``percent`` ``… steps (31%) · ETA …``) and as a fraction: a step budget counts the
    running pods' env steps as they are trained."""
    budget = snap["budget"]
    used = snap["budget_used"]
    if budget.kind == "steps":
        used += running_steps(snap["running"])
    unit = {"time": "s", "steps": " steps", "pods": " pods"}[budget.kind]
    fraction = min(1.0, used / budget.amount)
    text = f"{used:,.0f}/{budget.amount:,.0f}{unit}" + (f" ({fraction:.0%})" if percent else "")
    eta, cap = snap.get("eta_s"), snap.get("time_cap")
    if eta is not None:
        # An ETA that is the wall-time cap's end is a bound, not an estimate: say so.
        bound = cap is not None and abs(eta - max(0.0, cap - snap["elapsed_s"])) < 0.5
        text += f" · ETA {'≤ ' if bound else ''}{duration(eta)}{' (time cap)' if bound else ''}"
    return text, fraction


class TournamentView:
    """The tournament's displays, as hooks for :mod:`finpod.pipeline`: ``on_event`` prints
    the cluster events a user must know about, ``display`` refreshes a live table (in a
    terminal) or prints a progress line every :data:`PROGRESS_LINE_EVERY_S` (in a file),
    and the ``"tournament"`` event closes it and prints the final leaderboard and summary."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live_table = _LiveTable(self.console)
        self.lines = _EventLines(self.console)
        self._show = (
            self.live_table.update if self.console.is_terminal else _ProgressLines(self.console)
        )

    def display(self, snap: dict[str, Any]) -> None:
        """The live table (or a progress line) for an orchestrator snapshot."""
        reclaim_stop_signals()  # Ray, once started, took SIGTERM over
        self._show(snap)

    def on_event(self, kind: str, payload: dict[str, Any]) -> None:
        reclaim_stop_signals()
        if kind == "tournament":
            self.live_table.stop()
            if not getattr(payload["result"], "finished", False):  # else said at "run"
                print_summary(self.console, payload["result"])
        else:
            self.lines(kind, payload)

    def close(self) -> None:
        """Stop the live table (a run that raised)."""
        self.live_table.stop()


def print_summary(console: Console, result: Any) -> None:
    """The final leaderboard and what the session did."""
    board = result.leaderboard
    summary = result.summary
    print_leaderboard(console, board.entries, board.score_name, limit=10)
    best = board.best()
    # One statement per line in a log file (grep-able, wrapped only past 120 columns).
    statement(
        console,
        f"[bold]{summary.pods_trained}[/] pods trained this session "
        f"({summary.pods_failed} failed), {board.candidates_evaluated} candidates evaluated in the run; "
        + (
            f"best [bold]{best.pod_id}[/] ({best.algorithm}) validation {board.score_name} {best.score:.3f}"
            if best
            else "no pod scored"
        ),
    )
    ens = board.ensemble
    if ens:
        statement(
            console,
            f"ensemble of the top {len(ens['members'])} ({', '.join(ens['members'])}): "
            f"validation {board.score_name} [bold]{ens['score']:.3f}[/] vs best single "
            f"{ens['best_single_score']:.3f}: "
            + ("[bold]selected[/]" if ens.get("selected") else "not selected")
            + " (counted in N)",
        )
    if board.selection:
        statement(
            console,
            f"selection (paired test on validation): {board.selection['decision']} → "
            f"[bold]{board.selection['selected']}[/]",
        )
        if board.selection.get("settings_note"):
            statement(console, board.selection["settings_note"])
    if summary.throughput:
        tp = summary.throughput
        line = (
            f"throughput: {tp['env_steps']:,} env steps in {tp['wall_s']:.0f}s = "
            f"[bold]{tp['env_steps_per_s']:,.0f}[/] env steps/s"
        )
        if best is not None:
            line += f"; the best pod has trained {best.env_steps:,} env steps (with its ancestors)"
        statement(console, line)
    if summary.budget:
        statement(console, budget_line(summary.budget))
    if summary.pods_unscored:
        statement(
            console,
            f"[yellow]{summary.pods_unscored} pod(s) not scored[/]: still running well past "
            "the wall-time cap (train.log names them)",
        )
    if summary.node_events or summary.quarantined:
        statement(
            console,
            f"{summary.node_events} node(s) lost ({summary.pods_requeued} pod(s) requeued), "
            f"{len(summary.quarantined)} node(s) quarantined (reasons in train.log)",
        )
    console.print(f"run directory: [bold]{result.run_dir}[/]", soft_wrap=True)


def budget_line(budget: dict[str, Any]) -> str:
    """One line on how a tournament spent its env steps (``run.json``'s ``budget``)."""
    stops = budget.get("stops") or {}
    stopped = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in sorted(stops.items()))
    line = (
        f"budget ({budget.get('scheme', '?')}): {budget.get('pods', 0)} pods: "
        f"{budget.get('fresh', 0)} fresh, {budget.get('children', 0)} perturbed copies, "
        f"{budget.get('promotions', 0)} continued (deepest rung {budget.get('max_rung', 0)})"
        + (f"; not continued: {stopped}" if stopped else "")
    )
    fill = budget.get("fill")
    if isinstance(fill, dict) and fill.get("pods"):
        line += (
            f"; {fill['pods']} explorer segment(s) ({fill.get('env_steps', 0):,} env steps) "
            "beyond the budget while the champion finished its share"
        )
    sel = budget.get("selected")
    if sel and sel.get("share") is not None:
        line += (
            f"; the best pod's lineage trained {sel['env_steps']:,} of "
            f"{budget.get('env_steps', 0):,} env steps ({100 * sel['share']:.0f} %)"
        )
    return line


class _EventLines:
    """One console line for the cluster events a user must know about while a run goes."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.run_dir: Any = None

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "run":
            self.run_dir = payload["run_dir"]
            note_run_dir(payload["run_dir"])
            if payload.get("finished"):
                self.console.print(
                    f"run {payload['run_dir']} is finished: its budget ({payload['budget']}) "
                    "is spent; nothing to do, nothing changed (pass --budget to train further)",
                    highlight=False,
                    soft_wrap=True,
                )
                return
            self.console.print(
                f"run directory: {payload['run_dir']}", highlight=False, soft_wrap=True
            )
        elif kind in ("start", "finish") and not self.console.is_terminal:
            # No live table without a terminal: one line per pod started and finished.
            if kind == "start":
                spec = payload["spec"]
                self.console.print(f"start {spec.pod_id} ({spec.algorithm})", highlight=False)
            else:
                result = payload["result"]
                rank = payload.get("rank")
                where = f" → leaderboard #{rank}" if isinstance(rank, int) else ""
                self.console.print(
                    f"finish {result.pod_id}: score {result.score:.4g}{where}", highlight=False
                )
        elif kind == "failed":
            # One line per failed pod; its traceback is in the run's log, never here.
            log = f" (full text in {Path(self.run_dir) / LOG_FILE})" if self.run_dir else ""
            statement(self.console, f"[yellow]{escape(str(payload['message']))}{log}[/]")
        elif kind == "note":  # e.g. a stale lock taken over
            statement(self.console, f"[yellow]{escape(str(payload['message']))}[/]")
        elif kind == "ensemble_start":
            self.console.print(
                f"scoring the ensemble of the top {payload['members']} on the validation split",
                highlight=False,
            )
        elif kind == "waiting":
            need = ", ".join(f"{v:g} {k}" for k, v in payload["need"].items() if k != "memory")
            self.console.print(
                f"[yellow]waiting for a node with {need} (requested from the autoscaler, "
                f"{payload['waited_s']:.0f}s so far)[/]"
            )
        elif kind == "node_lost":
            self.console.print(
                f"[yellow]node {payload['node_id'][:8]} lost; "
                f"{len(payload['requeued'])} pod(s) requeued[/]"
            )
        elif kind == "quarantine":
            self.console.print(
                f"[red]node {payload['node_id'][:8]} quarantined: {payload['reason']}[/]"
            )


class _LiveTable:
    """A rich Live view refreshed at most 4 times a second from orchestrator snapshots."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, refresh_per_second=4, transient=True, auto_refresh=False)
        self._last = 0.0
        self.progress = Progress(
            TextColumn("[bold]budget"),
            BarColumn(),
            TextColumn("{task.description}"),
            console=console,
        )
        self.task = self.progress.add_task("", total=1.0)

        self._started = False

    def stop(self) -> None:
        if self._started:
            self.live.stop()
            self._started = False

    def update(self, snap: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._last < 0.25 or not self.console.is_terminal:
            return
        self._last = now
        if not self._started:
            self.live.start()
            self._started = True
        self.live.update(self.frame(snap), refresh=True)

    def frame(self, snap: dict[str, Any]) -> Group:
        """What the live view shows for ``snap``: the budget bar and counters, the running
        pods (each with its own epoch, env steps so far and last score), the leaderboard."""
        text, fraction = budget_text(snap)
        self.progress.update(self.task, completed=fraction, description=text)
        counters = Text(
            f"pool {snap['pool']}/{snap['target']} · {snap['candidates']} evaluated · "
            f"{snap['failed']} failed"
            + (
                f" · {snap['elapsed_s']:.0f}/{snap['time_cap']:.0f}s cap"
                if snap.get("time_cap")
                else ""
            )
        )
        running = Table(title="running pods", expand=False, title_justify="left")
        for col in ("pod", "algo", "parent", "node", "epoch", "steps", "score", "time"):
            running.add_column(col, no_wrap=True)
        for pod in snap["running"]:
            score = pod["score"]
            running.add_row(
                pod["pod_id"],
                pod["algorithm"],
                pod["parent"] or "—",
                pod["node"],
                f"{pod['epoch']}/{pod['epochs']}",
                f"{short_count(pod.get('done', 0))}/{short_count(pod['steps'])}",
                "—" if score is None or not math.isfinite(score) else f"{score:.3f}",
                f"{pod['elapsed_s']:.0f}s",
            )
        board = _leaderboard_table(snap["entries"], snap["score_name"], 8, self.console)
        return Group(self.progress.get_renderable(), counters, running, board)


class _ProgressLines:
    """Without a terminal (a log file): one progress line every
    :data:`PROGRESS_LINE_EVERY_S`, the first once pods are training."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._last: float | None = None

    def __call__(self, snap: dict[str, Any]) -> None:
        now = time.monotonic()
        if self._last is None:
            # The first line once training has started (an ETA from the pace so far).
            if snap.get("eta_s") is None or not (
                snap["budget_used"] or running_steps(snap["running"])
            ):
                return
        elif now - self._last < PROGRESS_LINE_EVERY_S:
            return
        self._last = now
        text, _ = budget_text(snap, percent=True)
        statement(
            self.console,
            f"progress: {text} · {len(snap['running'])} running · "
            f"{snap['candidates']} evaluated · {duration(snap['elapsed_s'])} elapsed",
        )


def _leaderboard_rows(
    entries: list[Any], score_name: str, limit: int
) -> tuple[list[str], list[list[str]]]:
    header = ["#", "pod", "algo", score_name, "env steps", "lineage", "learning rate"]
    rows = []
    for rank, entry in enumerate(entries[:limit], start=1):
        lr = entry.hparams.get("learning_rate", entry.hparams.get("actor_lr"))
        rows.append(
            [
                str(rank),
                entry.pod_id,
                entry.algorithm,
                f"{entry.score:.3f}",
                f"{entry.env_steps:,}",
                " → ".join([*entry.lineage[-3:], entry.pod_id]) if entry.lineage else "scratch",
                "—" if lr is None else f"{lr:.2g}",
            ]
        )
    return header, rows


def _leaderboard_table(
    entries: list[Any], score_name: str, limit: int, console: Console | None = None
) -> Table:
    """The live leaderboard; narrower than ``console`` by leaving out the lineage and
    learning-rate columns when the whole table would not fit."""
    header, rows = _leaderboard_rows(entries, score_name, limit)
    for keep in (len(header), header.index("lineage")):
        table = Table(title="leaderboard (validation)", title_justify="left")
        for col in header[:keep]:
            table.add_column(col, no_wrap=True)
        for row in rows:
            table.add_row(*row[:keep])
        if console is None or fits(console, table):
            break
    return table


def print_leaderboard(console: Console, entries: list[Any], score_name: str, limit: int) -> None:
    """The leaderboard as a table when it fits the console, else one block per entry."""
    header, rows = _leaderboard_rows(entries, score_name, limit)

    def long_form() -> list[tuple[str, list[tuple[str, str]]]]:
        return [
            (f"#{row[0]} {row[1]}", list(zip(header[2:], row[2:], strict=True))) for row in rows
        ]

    print_table(console, "leaderboard (validation)", header, rows, long_form)
