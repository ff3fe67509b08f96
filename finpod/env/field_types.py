"""Settings typed at the door: every field of a settings dataclass (``EnvConfig``) has the
type its annotation names before any range is checked, so a number written as text in a
strategy file (``cost_rate = "0.002"``) is one line naming the key and the fix, never a
``TypeError`` from a comparison, and a word (``"banana"``) is "not a number"."""

from __future__ import annotations

import math
import numbers
from dataclasses import fields
from typing import Any

from finpod.errors import FinpodError


def check_field_types(config: Any, examples: dict[str, Any], prefix: str = "env") -> None:
    """Raise :class:`FinpodError` naming the first field of the dataclass instance
    ``config`` whose value is not of its annotated type (``float``, ``int``, ``bool``,
    ``str``, each optionally ``| None``). Whole floats of integer fields (a search may give
    ``5.0``) and numpy scalars become Python ``int``/``bool``. ``examples``: a valid value
    for the hint of a field whose default is no example."""
    for f in fields(config):
        kind = str(f.type).replace("None", "").replace("|", "").strip()
        value = getattr(config, f.name)
        key = f"{prefix}.{f.name}"
        example = f"e.g. {f.name} = {_example(config, f.name, examples)}"
        if value is None and "None" in str(f.type):
            continue
        if kind in ("float", "int"):
            _check_number(config, f.name, key, value, kind == "int", example)
        elif kind == "bool" and getattr(value, "dtype", None) is not None:
            if value.dtype.kind != "b":  # a numpy bool (from a search) is a bool
                _bad_bool(key, f.name, value)
            object.__setattr__(config, f.name, bool(value))  # normalized while made
        elif kind == "bool" and not isinstance(value, bool):
            _bad_bool(key, f.name, value)
        elif kind == "str" and not isinstance(value, str):
            raise FinpodError(f"{key} must be text, got {value!r}", example)


def _bad_bool(key: str, name: str, value: Any) -> None:
    if isinstance(value, str):
        raise FinpodError(
            f"{key} must be true or false, got the text {value!r}",
            f"write it without quotes: {name} = true",
        )
    raise FinpodError(f"{key} must be true or false, got {value!r}", f"e.g. {name} = true")


def _check_number(
    config: Any, name: str, key: str, value: Any, integer: bool, example: str
) -> None:
    what = "an integer" if integer else "a number"
    if isinstance(value, str):
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            number = math.nan
        if math.isfinite(number) and (not integer or number == int(number)):
            raise FinpodError(
                f"{key} = {value!r} is text, not a number",
                f"write it without quotes: {name} = {value.strip()}",
            )
        hint = f"give an integer, {example}" if integer else example
        raise FinpodError(f"{key} = {value!r} is not a number", hint)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise FinpodError(f"{key} must be {what}, got {value!r}", example)
    if not math.isfinite(value):
        raise FinpodError(f"{key} must be a finite number, got {value}", example)
    if integer:
        if value != int(value):
            raise FinpodError(f"{key} must be an integer, got {value!r}", example)
        object.__setattr__(config, name, int(value))  # normalized while made


def _example(config: Any, name: str, examples: dict[str, Any]) -> Any:
    """A valid value of field ``name`` as TOML text: a listed example, or its default."""
    if name in examples:
        return examples[name]
    default = next(f.default for f in fields(config) if f.name == name)
    if isinstance(default, bool):
        return str(default).lower()
    return f'"{default}"' if isinstance(default, str) else default
