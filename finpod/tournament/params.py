"""One searched hyperparameter: its declaration (:class:`ParamSpec`: a range, a choice or a
fixed value), how a fresh pod draws it and a child perturbs it, and how one raw TOML value
of a ``[search.<algorithm>]`` or ``[search.env]`` table becomes one.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from finpod.errors import FinpodError


@dataclass(frozen=True)
class ParamSpec:
    """How one hyperparameter is drawn for a fresh pod and perturbed in a child."""

    name: str
    """Hyperparameter field name."""
    kind: str
    """``"float"`` or ``"int"`` (a range), ``"choice"`` (a list) or ``"fixed"`` (one value)."""
    low: float | None = None
    """Lower bound of a range (inclusive)."""
    high: float | None = None
    """Upper bound of a range (inclusive)."""
    log: bool = False
    """Draw a range log-uniformly (for scale parameters such as learning rates)."""
    choices: tuple[Any, ...] = ()
    """Options of a ``"choice"`` parameter."""
    value: Any = None
    """The value of a ``"fixed"`` parameter."""

    def sample(self, rng: np.random.Generator) -> Any:
        """A value for a fresh pod."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "choice":
            return self.choices[int(rng.integers(len(self.choices)))]
        assert self.low is not None and self.high is not None
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        return self._clip(x)

    def perturb(self, value: Any, factor: float) -> Any:
        """``value · factor`` clipped into the range (ints rounded); other kinds unchanged."""
        if self.kind not in ("float", "int"):
            return value
        return self._clip(float(value) * factor)

    def declares(self, value: Any) -> bool:
        """Is ``value`` one this declaration can give: one of its choices, its fixed value,
        or a number inside its range? (The champion's own settings need not be: a timid
        base's one update epoch beside ``update_epochs = [2, 4]``.)"""
        if self.kind == "choice":
            return any(_same(value, c) for c in self.choices)
        if self.kind == "fixed":
            return _same(value, self.value)
        assert self.low is not None and self.high is not None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return number and self.low <= float(value) <= self.high

    def perturb_env(self, value: Any, scale: float, rng: np.random.Generator) -> Any:
        """A child's value of an execution control (see :meth:`SearchSpace.perturb_env`)."""
        if self.kind in ("choice", "fixed") and not self.declares(value):
            return self.sample(rng)
        if self.kind in ("float", "int"):
            assert self.low is not None and self.high is not None
            if self.log:
                bound = math.log1p(scale)
                factor = math.exp(rng.uniform(-bound, bound)) if bound > 0 else 1.0
                return self._clip(float(value) * factor)
            step = 0.5 * scale * (self.high - self.low)
            return self._clip(float(value) + rng.uniform(-step, step))
        if (
            self.kind == "choice"
            and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices)
            and rng.random() < scale / (1.0 + scale)
        ):
            return self.sample(rng)
        return value

    def to_dict(self) -> Any:
        """The declaration as written in a strategy table."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "choice":
            return list(self.choices)
        return {"low": self.low, "high": self.high, "log": self.log}

    def _clip(self, x: float) -> Any:
        assert self.low is not None and self.high is not None
        x = min(max(x, self.low), self.high)
        return int(round(x)) if self.kind == "int" else float(x)


def _same(a: Any, b: Any) -> bool:
    """Equal as declared values: numbers by value (5 and 5.0), lists and tuples by their
    items (a leaderboard's JSON gives lists where a declaration holds tuples)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def integer_fields(params_cls: type) -> set[str] | None:
    """Fields typed ``int`` (or ``int | None``): their ranges draw integers, whatever the
    bounds are written as; ``None`` when the class has no type hints to read."""

    try:
        hints = typing.get_type_hints(params_cls)
    except Exception:  # noqa: BLE001 - unresolvable hints: fall back to the bounds' types
        return None

    def is_int(hint: Any) -> bool:
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            return {a for a in typing.get_args(hint) if a is not type(None)} == {int}
        return hint is int

    return {name for name, hint in hints.items() if is_int(hint)}


def sequence_fields(params_cls: type) -> set[str]:
    """Fields whose value is itself a list (e.g. hidden widths): ``[64, 64]`` is one value."""

    hints = typing.get_type_hints(params_cls)
    out = set()
    for name, hint in hints.items():
        options = [hint, *typing.get_args(hint)]
        if any(typing.get_origin(h) in (tuple, list) or h in (tuple, list) for h in options):
            out.add(name)
    return out


def parse_param(
    algo: str,
    key: str,
    value: Any,
    fields: set[str],
    sequence: bool = False,
    int_fields: set[str] | None = None,
) -> ParamSpec:
    """One declaration: ``{low, high, log}`` range, list of choices, or a fixed value.

    For a field whose value is a list (``sequence``), ``[64, 64]`` is one fixed value and a
    list of lists (``[[64], [64, 64]]``) is a choice.
    """
    where = f"search.{algo}.{key}"
    if key not in fields:
        what = "env setting" if algo == "env" else "hyperparameter"
        raise FinpodError(f"unknown {what} {where!r}", f"valid keys: {', '.join(sorted(fields))}")
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"low", "high", "log"})
        if unknown:
            raise FinpodError(f"unknown key {unknown[0]!r} in {where}", "use low, high and log")
        if "low" not in value or "high" not in value:
            raise FinpodError(
                f"{where} needs both low and high", "e.g. { low = 1e-4, high = 1e-3 }"
            )
        low, high, log = value["low"], value["high"], value.get("log", False)
        for bound in (low, high):
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise FinpodError(
                    f"{where} bounds must be numbers, got {bound!r}", "e.g. low = 0.9"
                )
        if not isinstance(log, bool):
            raise FinpodError(f"{where}.log must be true or false", "e.g. log = true")
        if not low <= high:
            raise FinpodError(f"{where} has low {low} > high {high}", "swap the bounds")
        if log and low <= 0:
            raise FinpodError(
                f"{where} is log-scaled but low {low} ≤ 0", "use a positive low bound"
            )
        if int_fields is not None:
            # The field's declared type decides: {low = 0, high = 1} of a float is a float.
            kind = "int" if key in int_fields else "float"
        else:
            kind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
        return ParamSpec(key, kind, low=float(low), high=float(high), log=log)
    if sequence and isinstance(value, list) and not any(isinstance(v, list) for v in value):
        return ParamSpec(key, "fixed", value=value)
    if isinstance(value, list):
        if not value:
            raise FinpodError(f"{where} is an empty list of choices", "list at least one value")
        return ParamSpec(key, "choice", choices=tuple(value))
    return ParamSpec(key, "fixed", value=value)
