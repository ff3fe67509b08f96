"""Checks of a command's arguments that need no data, made before any work.

Each command calls these first, before the dataset stage and before torch, pandas or Ray
load, so a mistyped value is one line within a fraction of a second. They read only the
standard library and light finpod modules (:mod:`finpod.errors`, :mod:`finpod.grammar`,
:mod:`finpod.pipeline`'s places, :mod:`finpod.runs`' file names): the budget, the pods,
a window length, the seeds and the device are read by the same functions that read them
everywhere else, and each check returns the typed value for the command to hand down.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from finpod import grammar
from finpod.errors import FinpodError
from finpod.pipeline import check_writable, resolve_strategy
from finpod.runs import LEADERBOARD_FILE, find_run
from finpod.strategy import check_tables


def positive(flag: str, value: int | float | None, example: str) -> None:
    """``value`` (when given) is > 0, e.g. ``--steps``."""
    if value is not None and not value > 0:
        raise FinpodError(f"{flag} must be positive, got {value}", f"e.g. {flag} {example}")


def at_least(flag: str, value: int | None, lowest: int, example: str) -> None:
    """``value`` (when given) is ≥ ``lowest``."""
    if value is not None and value < lowest:
        raise FinpodError(
            f"{flag} must be at least {lowest}, got {value}", f"e.g. {flag} {example}"
        )


def strategy_file(path: Path | None) -> Path | None:
    """The strategy file as it will be read (``strategies/…`` also from finpod's
    checkout): it exists, is a file, parses as TOML, and its keys and ``[train]`` table are
    right (:func:`finpod.strategy.check_tables`, without torch). The values of its typed
    tables are checked by :func:`finpod.strategy.load_strategy`, before any data is read."""
    if path is None:
        return None
    found = resolve_strategy(path)
    if not found.exists():
        near = sorted(p.name for p in found.parent.glob("*.toml")) if found.parent.is_dir() else []
        hint = f"strategies here: {', '.join(near)}" if near else "see strategies/ for examples"
        raise FinpodError(f"strategy file {path} does not exist", hint)
    if not found.is_file():
        raise FinpodError(
            f"strategy {path} is not a file", "give a .toml file, e.g. strategies/ppo.toml"
        )
    # The messages of finpod.strategy.load_strategy, which reads it again for its keys.
    try:
        raw = tomllib.loads(found.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise FinpodError(
            f"strategy file {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
            f"position {err.start})",
            "save it as UTF-8",
        ) from err
    except OSError as err:
        raise FinpodError(
            f"cannot read strategy file {path}: {err.strerror or err}", "check its permissions"
        ) from err
    except tomllib.TOMLDecodeError as err:
        raise FinpodError(
            f"strategy file {path} is not valid TOML: {err}", "fix the syntax"
        ) from err
    check_tables(raw, found)
    return found


def positive_int(flag: str, value: int | None, example: str) -> int | None:
    """``value`` (when given) is a whole number ≥ 1, e.g. ``--threads``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise FinpodError(
            f"{flag} must be a whole number ≥ 1, got {value}", f"e.g. {flag} {example}"
        )
    return value


def dataset_dir(path: Path, flag: str = "--data", hint: str | None = None) -> None:
    """``path`` is a finpod dataset (has its ``manifest.json``)."""
    path = Path(path)
    if not (path / "manifest.json").is_file():
        what = "does not exist" if not path.exists() else "is not a finpod dataset"
        raise FinpodError(
            f"{flag} {path} {what}", hint or f"build one with: finpod download --out {path}"
        )


def device(name: str | None) -> grammar.Device | None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:K`` (:func:`finpod.grammar.parse_device`)."""
    return None if name is None else grammar.parse_device(name)


def writable(folder: Path, flag: str, what: str = "write to") -> None:
    """``folder`` can be created and written (nothing is created)."""
    check_writable(Path(folder), what, flag=flag)


# ---------------------------------------------------------------- grammars


def budget(text: str | None) -> grammar.Budget | None:
    """A tournament budget (:func:`finpod.grammar.parse_budget`): ``90s``, ``30min``,
    ``2h``, ``2e6 steps``, ``16M steps``, ``40 pods``."""
    return None if text is None else grammar.parse_budget(text)


def pods(value: str | None) -> grammar.Pods | None:
    """``auto`` or a positive whole number of pods (:func:`finpod.grammar.parse_pods`)."""
    return None if value is None else grammar.parse_pods(value)


def window_length(text: str, what: str) -> grammar.Length:
    """A walk-forward window length (:func:`finpod.grammar.parse_length`): ``1y``,
    ``6mo``, ``4w``, ``30d`` or a number of sessions."""
    return grammar.parse_length(text, what)


def seeds(text: str) -> grammar.Seeds:
    """A count of seeds (``3``) or a list of distinct seeds (``0,4,7``)
    (:func:`finpod.grammar.parse_seeds`)."""
    return grammar.parse_seeds(text)


def scheme(name: str) -> None:
    """``rolling`` or ``expanding``."""
    if name not in ("rolling", "expanding"):
        raise FinpodError(f"unknown scheme {name!r}", "use rolling or expanding")


def run_with_board(run: str | Path, runs: Path) -> Path:
    """The run directory ``run`` names (a path, or a run id under ``runs``), with the
    leaderboard a backtest or a paper trader reads: one line for a run that is not there
    and another for a run that has not scored a checkpoint on validation yet."""
    run_path = find_run(run, runs)
    if not (run_path / LEADERBOARD_FILE).is_file():
        raise FinpodError(
            f"run {run_path} has no leaderboard yet: no checkpoint has been scored on "
            "validation, so there is no agent to use",
            f"let it train to its first evaluation (finpod train --resume {run_path})",
        )
    return run_path
