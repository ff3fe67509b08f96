"""The ``finpod`` command line: ``download``, ``info``, ``train``, ``backtest``, ``report``, ``run``, ``paper``.

Each verb lives in its own module and registers itself on :data:`app`. User errors
(:class:`finpod.errors.FinpodError`), usage errors (an unknown command or flag, a
missing argument, a bad option value) and errors of the machine or the input's bytes (a
path that cannot be read or written, text that is not UTF-8, a number that is not finite)
print one red line with what to do and exit 1; a traceback is shown only with ``--debug``.
Other libraries' own log lines and warnings (yfinance offline) are held back and said in
one line (:mod:`finpod.cli.noise`).
Ctrl-C, SIGTERM and SIGHUP stop every command alike: one line naming the run and the
``--resume`` that continues it (or says that nothing can be resumed before the first
checkpoint), or the command that continues the work. ``finpod`` alone prints the help.
"""

from __future__ import annotations

import re
import signal
import sys

import typer
from rich.console import Console
from rich.markup import escape

from finpod import __version__
from finpod.cli import backtest_cmd, data_cmd, paper_cmd, run_cmd, train_cmd, walkforward_cmd
from finpod.cli.interrupted import interrupted_line, note_command, noted_resume, noted_run_dir
from finpod.cli.noise import HeldBack
from finpod.cli.stop_signals import Stopped, install_stop_signals, received_stop_signal
from finpod.errors import FinpodError

app = typer.Typer(
    name="finpod",
    help="Deep-RL stock trading on the NASDAQ-100: download → train → backtest.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
err_console = Console(stderr=True)


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
    # --debug is read by main() from the arguments, before typer parses them.


def _register() -> None:
    for module in (data_cmd, train_cmd, backtest_cmd, run_cmd, walkforward_cmd, paper_cmd):
        module.register(app)


_register()


def _click_errors() -> tuple[type[Exception], type[Exception], type[Exception] | None]:
    """(UsageError, ClickException, NoArgsIsHelpError) of the click that typer runs on.

    Typer ships its own copy of click; its classes are found from ``typer.BadParameter``.
    """
    bases = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
    usage, click_error = bases["UsageError"], bases["ClickException"]
    no_args = getattr(sys.modules[usage.__module__], "NoArgsIsHelpError", None)
    return usage, click_error, no_args


def usage_error_line(err: Exception) -> str:
    """One line for a usage error: click's message and the ``--help`` to read."""
    message = " ".join(err.format_message().split())
    ctx = getattr(err, "ctx", None)
    path = ctx.command_path if ctx is not None else "finpod"
    return f"{message} (see `{path} --help`)"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``finpod`` script."""
    args = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in args
    usage_error, click_error, no_args = _click_errors()
    install_stop_signals()
    note_command(args)
    try:
        code = _run_app(args, debug)
    except usage_error as err:
        if no_args is not None and isinstance(err, no_args):
            typer.echo(err.ctx.get_help())  # plain `finpod`: the help, as before
            sys.exit(0)
        if debug:
            raise
        _red_line(usage_error_line(err))
        sys.exit(1)
    except click_error as err:
        if debug:
            raise
        _red_line(" ".join(err.format_message().split()))
        sys.exit(1)
    except FinpodError as err:
        if debug:
            raise
        _red_line(str(err))
        sys.exit(1)
    except (KeyboardInterrupt, typer.Abort) as stop:
        name = stop.name if isinstance(stop, Stopped) else received_stop_signal()
        _interrupted(name)
        sys.exit(128 + signal.Signals[name] if name else 130)
    except Exception as err:
        line = environment_error_line(err)
        if line is None or debug:
            raise
        _red_line(line)
        sys.exit(1)
    if isinstance(code, int) and code == 130:  # typer turns KeyboardInterrupt into 130
        name = received_stop_signal()
        _interrupted(name)
        code = 128 + signal.Signals[name] if name else code
    if isinstance(code, int) and code != 0:
        sys.exit(code)


def _run_app(args: list[str], debug: bool) -> object:
    """The command, with other libraries' console noise held back and said in one line
    before anything finpod prints after it (all of it shown as it comes with --debug)."""
    if debug:
        return app(args=args, prog_name="finpod", standalone_mode=False)
    held = HeldBack()
    try:
        with held:
            # Not standalone: click/typer would print a boxed usage message and exit 2.
            return app(args=args, prog_name="finpod", standalone_mode=False)
    finally:
        line = held.summary()
        if line:
            err_console.print(f"[yellow]note:[/] {line}", highlight=False, soft_wrap=True)


def _interrupted(signal: str | None = None) -> None:
    line = interrupted_line(noted_run_dir(), noted_resume(), signal)
    err_console.print(line, highlight=False, soft_wrap=True)


def environment_error_line(err: BaseException) -> str | None:
    """One line for an error of the machine or of the input's bytes, not of finpod: a file
    that cannot be read or written (``OSError``), bytes that are not text
    (``UnicodeError``), a number that is not finite. None for any other exception (a bug,
    whose traceback is worth seeing)."""
    if isinstance(err, UnicodeDecodeError):
        return (
            f"cannot decode text: byte 0x{err.object[err.start]:02x} at position "
            f"{err.start} is not valid {err.encoding} (save the file as UTF-8)"
        )
    if isinstance(err, UnicodeError):
        return f"text encoding error: {err} (save the file as UTF-8)"
    if isinstance(err, OSError):
        path = err.filename if err.filename is not None else ""
        what = err.strerror or type(err).__name__
        target = f"{path}: " if path else ""
        return f"{target}{what} (check the path, its permissions and free space)"
    if isinstance(err, OverflowError | FloatingPointError) or (
        isinstance(err, ValueError) and _non_finite_text(str(err))
    ):
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"a number is not finite: {first} (check the inputs for nan or inf)"
    return None


#: Words of a message about a number that is not finite; whole words only, so that
#: "banana" or "info" in a message is not read as "nan" or "inf".
_NON_FINITE_WORDS = re.compile(r"\b(nan|inf|infinity|non-finite|not finite)\b", re.IGNORECASE)


def _non_finite_text(message: str) -> bool:
    return _NON_FINITE_WORDS.search(message) is not None


def _red_line(text: str) -> None:
    # The message is text, not markup: a hint such as "[env] user_features" is printed as is.
    err_console.print(
        f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True, markup=True
    )
