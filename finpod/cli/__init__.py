"""The ``finpod`` command line: ``download``, ``info``, ``train``, ``backtest``, ``report``, ``run``.

Each verb lives in its own module and registers itself on :data:`app`. User errors
(:class:`finpod.errors.FinpodError`, bad flags) print one red line and exit 1; a traceback
is shown only with ``--debug``.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from finpod import __version__
from finpod.errors import FinpodError

app = typer.Typer(
    name="finpod",
    help="Deep-RL stock trading on the NASDAQ-100: download → train → backtest.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
err_console = Console(stderr=True)
_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"finpod {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """finpod: build a dataset, train a tournament of agents, backtest the winner."""
    _state["debug"] = debug


def _register() -> None:
    from finpod.cli import backtest_cmd, data_cmd, run_cmd, train_cmd

    for module in (data_cmd, train_cmd, backtest_cmd, run_cmd):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``finpod`` script."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        app(args=argv, standalone_mode=True)
    except FinpodError as err:
        if debug:
            raise
        err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/]")
        sys.exit(130)
