"""``finpod train``: one agent, or a tournament of agents on Ray; writes ``runs/<run-id>/``.

Display only: the work is :func:`finpod.pipeline.train` (see :mod:`finpod.pipeline`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from finpod.cli.interrupted import note_run_dir
from finpod.pipeline import train, wants_tournament
from finpod.runs import RUN_FILE, read_run_info

console = Console()


def run_header(payload: dict) -> str:
    """The first line of a single agent's training: ``run directory: DIR`` for a new run,
    ``resuming DIR from N env steps (to T)`` for a resumed one (never a fresh-start
    header over a run that continues)."""
    run_dir = payload["run_dir"]
    resumed = payload.get("resumed_from")
    if resumed is None:
        return f"run directory: {run_dir}"
    if payload.get("finished"):
        return f"run {run_dir} is finished at {resumed:,} env steps: nothing to do, nothing changed"
    total = payload.get("total_steps")
    if total is not None and resumed >= total:
        return (
            f"resuming {run_dir} from {resumed:,} env steps: already at its {total:,} "
            "(pass --steps to train further)"
        )
    to = f" (training to {total:,})" if total is not None else ""
    return f"resuming {run_dir} from {resumed:,} env steps{to}"


def register(app: typer.Typer) -> None:
    """Add ``finpod train`` to the app."""

    @app.command("train")
    def train_cmd(
        strategy: Annotated[
            Path | None,
            typer.Option("--strategy", "-s", help="Strategy TOML file (see strategies/)."),
        ] = None,
        data: Annotated[
            Path | None, typer.Option("--data", "-d", help="Dataset directory (finpod download).")
        ] = None,
        out: Annotated[
            Path, typer.Option("--out", "-o", help="Parent directory of run directories.")
        ] = Path("runs"),
        device: Annotated[
            str | None,
            typer.Option("--device", help="auto, cpu, cuda or cuda:K (default: the strategy's)."),
        ] = None,
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed (default: the strategy's train.seed).")
        ] = None,
        steps: Annotated[
            int | None,
            typer.Option(
                "--steps", help="Single agent: env steps to train (default: train.total_steps)."
            ),
        ] = None,
        run_id: Annotated[
            str | None,
            typer.Option(
                "--run-id",
                help="Run directory name under --out (default: time-stamped); an existing "
                "run of that name is continued, as with --resume.",
            ),
        ] = None,
        pods: Annotated[
            str | None,
            typer.Option(
                "--pods",
                help='Tournament: "auto" (what the cluster fits) or the most pods at once.',
                show_default="the strategy's [tournament] pods",
            ),
        ] = None,
        budget: Annotated[
            str | None,
            typer.Option(
                "--budget",
                help='Tournament budget: "30m", "2h", "1e6 steps" or "40 pods".',
                show_default="the strategy's [tournament] budget",
            ),
        ] = None,
        address: Annotated[
            str | None,
            typer.Option(
                "--address", help="Tournament: Ray cluster (auto or HOST:PORT); default in-process."
            ),
        ] = None,
        resume: Annotated[
            str | None,
            typer.Option("--resume", help="Continue this run directory (or run id under --out)."),
        ] = None,
    ) -> None:
        """Train one agent, or a tournament of agents on Ray, and write runs/<run-id>/.

        A tournament runs when the strategy has a tournament table or any of --pods,
        --budget, --address, --resume is given; otherwise one agent is trained. Either way
        checkpoints are chosen on the validation split only.
        """
        # lazy: the tournament's live view (and pandas, for its tables) loads only to train
        from finpod.cli.tournament_cmd import TournamentView

        continuing = resume is None and run_id is not None and (out / run_id / RUN_FILE).is_file()
        if continuing:
            # A fixed run id continues its run (e.g. a retried Kubernetes job); said once the
            # run is opened (a refusal is then its one line).
            resume = str(out / run_id)
        view = TournamentView()
        finished: list[bool] = []
        tournament = wants_tournament(
            strategy, data, out, pods=pods, budget=budget, address=address, resume=resume
        )
        if continuing and tournament:
            console.print(f"continuing run {out / run_id}", highlight=False)

        def show(kind: str, payload: dict) -> None:
            if kind == "log":  # a single agent's training log
                console.print(payload["line"], highlight=False, soft_wrap=True, markup=False)
            elif kind == "run" and not tournament:  # a single agent's run directory, first
                note_run_dir(payload["run_dir"])
                finished.append(bool(payload.get("finished")))
                if continuing and not finished[-1]:
                    console.print(f"continuing run {payload['run_dir']}", highlight=False)
                console.print(run_header(payload), highlight=False, soft_wrap=True)
            else:
                view.on_event(kind, payload)

        try:
            run_dir = train(
                strategy,
                data,
                out,
                pods=pods,
                budget=budget,
                address=address,
                resume=resume,
                device=device,
                seed=seed,
                total_steps=steps,
                run_id=None if continuing else run_id,
                # Without a terminal a progress bar draws nothing: the log lines carry progress.
                progress=console.is_terminal,
                on_event=show,
                display=view.display,
            )
        finally:
            view.close()
        if any(finished):
            return
        if read_run_info(run_dir)["kind"] == "agent":
            console.print(f"[bold green]run written to[/] {run_dir}")
        else:
            # The run directory on stdout, alone, so scripts can capture it.
            typer.echo(str(run_dir))
