"""Checks of a command's arguments that need no data, made before any work.

Each command calls these first, before the dataset stage and before torch, pandas or Ray
load, so a mistyped value is one line within a fraction of a second. They read only the
standard library and :mod:`finpod.errors`. A few grammars are spelled here again in their
light form (the budget, the pods, a window length, the seeds) because their full parsers
live in modules that load torch; ``tests/test_cli_checks.py`` holds both to the same
answers.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from finpod.errors import FinpodError

#: Devices a ``--device`` may name (``cuda:K`` too).
DEVICES = ("auto", "cpu", "cuda")


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
    checkout): it exists, is a file and parses as TOML. Its keys and values are checked
    by :func:`finpod.strategy.load_strategy`, before any data is read."""
    if path is None:
        return None
    from finpod.pipeline import resolve_strategy  # light: pipeline loads its work lazily

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
        tomllib.loads(found.read_text(encoding="utf-8"))
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
    return found


def dataset_dir(path: Path, flag: str = "--data", hint: str | None = None) -> None:
    """``path`` is a finpod dataset (has its ``manifest.json``)."""
    path = Path(path)
    if not (path / "manifest.json").is_file():
        what = "does not exist" if not path.exists() else "is not a finpod dataset"
        raise FinpodError(
            f"{flag} {path} {what}", hint or f"build one with: finpod download --out {path}"
        )


def device(name: str | None) -> None:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:K``."""
    if name is None:
        return
    if name in DEVICES or re.fullmatch(r"cuda:\d+", name):
        return
    raise FinpodError(f"unknown device {name!r}", "use auto, cpu, cuda or cuda:K")


def writable(folder: Path, flag: str, what: str = "write to") -> None:
    """``folder`` can be created and written (nothing is created)."""
    from finpod.pipeline import check_writable  # light: pipeline loads its work lazily

    check_writable(Path(folder), what, flag=flag)


# ---------------------------------------------------------------- light grammars

_BUDGET = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?:([kMG])\s+)?([a-zA-Z]*)\s*$")
_TIME_UNITS = ("s", "sec", "m", "min", "h", "d")


def budget(text: str | None) -> None:
    """A tournament budget as :func:`finpod.tournament.settings.parse_budget` reads it:
    ``90s``, ``30m``, ``2h``, ``2e6 steps``, ``16M steps``, ``40 pods``."""
    if text is None:
        return
    match = _BUDGET.match(text)
    if match is None:
        raise FinpodError(
            f"budget {text!r} is not understood", 'use e.g. "30m", "2h", "1e6 steps" or "40 pods"'
        )
    amount, scale, unit = float(match.group(1)), match.group(2), match.group(3).lower()
    counts = ("step", "steps", "pod", "pods")
    if scale is not None and unit not in counts:
        raise FinpodError(
            f"budget {text!r}: {scale} scales counts only", 'use e.g. "16M steps" or "30m"'
        )
    if unit not in ("", *_TIME_UNITS, *counts):
        raise FinpodError(
            f"budget unit {unit!r} in {text!r} is not known",
            "use s, m, h (wall time), steps or pods",
        )
    scaled = amount * {"k": 1e3, "M": 1e6, "G": 1e9}.get(scale or "", 1.0)
    if (int(scaled) if unit in counts else scaled) <= 0:
        raise FinpodError(f"budget {text!r} must be positive", 'use e.g. "30m"')


def pods(value: str | None) -> None:
    """``auto`` or a positive whole number of pods."""
    if value is None or value.strip().lower() == "auto":
        return
    try:
        ok = int(value) >= 1
    except ValueError:
        ok = False
    if not ok:
        raise FinpodError(
            f'pods must be "auto" or a positive integer, got {value!r}', "e.g. --pods 4"
        )


_LENGTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([ymwds]?)\s*$", re.IGNORECASE)


def window_length(text: str, what: str) -> None:
    """A walk-forward window length as :func:`finpod.walkforward.folds.parse_length`
    reads it: ``1y``, ``6m``, ``4w``, ``30d`` or a number of sessions."""
    match = _LENGTH.match(str(text))
    if not match:
        raise FinpodError(
            f"the {what} length {text!r} is not understood",
            "write e.g. 1y, 6m, 4w, 30d or a number of sessions such as 250",
        )
    value, unit = float(match.group(1)), (match.group(2) or "s").lower()
    if value <= 0:
        raise FinpodError(f"the {what} length must be positive, got {text!r}", "e.g. 1y")
    if unit != "y" and not value.is_integer():
        raise FinpodError(
            f"the {what} length {text!r} must be a whole number of {unit}", "e.g. 6m or 0.5y"
        )


def seeds(text: str) -> None:
    """A count of seeds (``3``) or a list of distinct seeds ≥ 0 (``0,4,7``)."""
    try:
        out = [int(s) for s in text.split(",")] if "," in text else list(range(int(text)))
    except ValueError as err:
        raise FinpodError(
            f"--seeds {text!r} is not understood", "give a count (3) or a list (0,4,7)"
        ) from err
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise FinpodError(
            f"--seeds {text!r} must name at least one distinct seed ≥ 0", "e.g. --seeds 3"
        )


def scheme(name: str) -> None:
    """``rolling`` or ``expanding``."""
    if name not in ("rolling", "expanding"):
        raise FinpodError(f"unknown scheme {name!r}", "use rolling or expanding")


def run_with_board(run: str | Path, runs: Path) -> Path:
    """The run directory ``run`` names (a path, or a run id under ``runs``), with the
    leaderboard a backtest or a paper trader reads: one line for a run that is not there
    and another for a run that has not scored a checkpoint on validation yet."""
    from finpod.runs import LEADERBOARD_FILE, find_run  # light: no torch

    run_path = find_run(run, runs)
    if not (run_path / LEADERBOARD_FILE).is_file():
        raise FinpodError(
            f"run {run_path} has no leaderboard yet: no checkpoint has been scored on "
            "validation, so there is no agent to use",
            f"let it train to its first evaluation (finpod train --resume {run_path})",
        )
    return run_path
