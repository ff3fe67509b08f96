"""The text of finpod's options, read in one place: budgets, window lengths, seeds, pods
and devices.

Each grammar is a frozen value with a ``parse`` (text → value, or one
:class:`~finpod.errors.FinpodError` line naming what is wrong and how to write it) and a
``__str__`` that writes its canonical text, so ``parse(str(x)) == x`` for every value. The
command line's early checks (:mod:`finpod.cli.checks`), the strategy file's tables and a
resumed run's recorded text all call these functions: nothing else in finpod reads them.

One vocabulary holds across every option, and it is case-sensitive:

- ``m`` alone is never a unit: minutes are ``min``, months are ``mo`` (``"3m"`` is refused
  and the message names both);
- ``M`` is million and only multiplies a count (``"16M steps"``); ``"5M"`` is refused;
- ``s`` is seconds; sessions are spelled out (``"250 sessions"``) or written as a bare
  number in a window length (``"250"``);
- counts are whole: ``"1.5 pods"`` is refused, ``"1.5M steps"`` is 1,500,000 steps.

The page ``docs/grammar.md`` holds :func:`grammar_table`'s table, generated from the
spellings below (``tests/test_grammar.py`` checks it is current).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from finpod.errors import FinpodError

#: Largest count of anything (steps, pods, sessions…): what a signed 64-bit integer holds.
MAX_COUNT = 2**63 - 1
#: Finest time step: a time is a whole number of nanoseconds.
NANOSECOND = Fraction(1, 10**9)
#: Longest time: ``MAX_COUNT`` nanoseconds (about 292 years).
MAX_SECONDS = MAX_COUNT * NANOSECOND
#: Largest seed: 2**32 − 1, numpy's legacy range and the one every library finpod seeds
#: accepts; it leaves room for the offsets finpod adds per env, learner and epoch.
MAX_SEED = 2**32 - 1
#: Most seeds one ``--seeds`` may name (a walk-forward trains every fold once per seed).
MAX_SEEDS = 1000
#: Largest CUDA device index of ``cuda:K``.
MAX_DEVICE_INDEX = 1023

#: Time units (``--budget``, ``time_cap``): spellings → seconds.
TIME_UNITS: dict[str, int] = {
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
#: Count units of a budget: spellings → budget kind.
COUNT_UNITS: dict[str, str] = {"step": "steps", "steps": "steps", "pod": "pods", "pods": "pods"}
#: Multipliers, written before a count unit only (``"16M steps"``).
MULTIPLIERS: dict[str, int] = {"k": 10**3, "M": 10**6, "G": 10**9}
#: Window-length units (walk-forward ``--train``/``--validation``/``--backtest``):
#: spellings → canonical unit.
LENGTH_UNITS: dict[str, str] = {
    "y": "y", "year": "y", "years": "y",
    "mo": "mo", "month": "mo", "months": "mo",
    "w": "w", "week": "w", "weeks": "w",
    "d": "d", "day": "d", "days": "d",
    "session": "sessions", "sessions": "sessions",
}  # fmt: skip
#: Budget kinds: wall time, env steps summed over pods, or pods trained.
BUDGET_KINDS = ("time", "steps", "pods")
#: Devices a ``--device`` may name besides ``cuda:K``.
DEVICES = ("auto", "cpu", "cuda")

_NUMBER = re.compile(
    r"^\s*(?P<sign>[+-]?)(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    r"\s*(?:(?P<scale>[A-Za-z])\s+(?=[A-Za-z]))?(?P<unit>[A-Za-z]*)\s*$"
)
#: A number's decimal exponent beyond which no grammar has a value (1e30 steps, 1e-30 s).
_EXPONENT_LIMIT = 30


@dataclass(frozen=True)
class _Quantity:
    """A number with its optional multiplier letter and unit, as written."""

    text: str
    number: str
    value: Fraction
    negative: bool
    scale: str | None
    unit: str


def _quantity(text: str, what: str, hint: str) -> _Quantity:
    """Split ``text`` into number, multiplier and unit (one error line when it is not)."""
    match = _NUMBER.match(text)
    if match is None:
        raise FinpodError(f"{what} {text!r} is not understood", hint)
    try:
        number = Decimal(match["num"])
    except InvalidOperation as err:  # pragma: no cover - the pattern admits none
        raise FinpodError(f"{what} {text!r} is not understood", hint) from err
    if number and not -_EXPONENT_LIMIT <= number.adjusted() <= _EXPONENT_LIMIT:
        raise FinpodError(
            f"{what} {text!r} is out of range (counts go to {MAX_COUNT:,}, times from 1 ns "
            "to about 292 years)",
            hint,
        )
    return _Quantity(
        text, match["num"], Fraction(number), match["sign"] == "-", match["scale"], match["unit"]
    )


def _from_value(value: Any, what: str) -> str:
    """The text of ``value`` (a number from TOML or code is written as it reads)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FinpodError(f"{what} {value!r} is not text or a number", "see docs/grammar.md")
    if isinstance(value, float) and not math.isfinite(value):
        raise FinpodError(f"{what} {value!r} is not a finite number", "give a finite value")
    return value if isinstance(value, str) else repr(value)


def _decimal_text(value: Fraction) -> str:
    """Exact decimal text of ``value`` (its denominator divides a power of ten)."""
    whole, rest = divmod(value.numerator, value.denominator)
    if not rest:
        return str(whole)
    digits = ""
    while rest:
        whole_digit, rest = divmod(rest * 10, value.denominator)
        digits += str(whole_digit)
    return f"{whole}.{digits}"


def _whole(value: Fraction, text: str, what: str, noun: str, hint: str) -> int:
    """``value`` as a count from 1 to :data:`MAX_COUNT` (one error line otherwise)."""
    if value.denominator != 1:
        raise FinpodError(f"{what} {text!r} is not a whole number of {noun}", hint)
    if value < 1:
        raise FinpodError(f"{what} {text!r} must be at least 1 {noun.rstrip('s')}", hint)
    if value > MAX_COUNT:
        raise FinpodError(f"{what} {text!r} is more than {MAX_COUNT:,} {noun}", hint)
    return int(value)


# ---------------------------------------------------------------------------- budget


class Seconds(Fraction):
    """An exact number of seconds that formats like a float (``f"{s:,.0f}"``)."""

    def __format__(self, spec: str) -> str:
        return format(float(self), spec) if spec else str(self)

    def __str__(self) -> str:
        return _decimal_text(self)

    def __repr__(self) -> str:
        return f"Seconds('{self}')"


_BUDGET_HINT = 'write e.g. "30min", "2h", "2e6 steps", "16M steps" or "40 pods"'


@dataclass(frozen=True)
class Budget:
    """How long a tournament runs: wall time, env steps (summed over pods) or pods trained.

    ``Budget("steps", 2e6)`` and ``Budget("time", 90.0)`` read numbers as their shortest
    decimal text, so a float from code is the same budget as its text."""

    kind: str
    """``"time"``, ``"steps"`` or ``"pods"``."""
    amount: int | Seconds
    """Exact seconds (:class:`Seconds`, whole nanoseconds) for time; an ``int`` count for
    steps and pods."""

    def __post_init__(self) -> None:
        if self.kind not in BUDGET_KINDS:
            raise FinpodError(
                f"budget kind {self.kind!r} is not known", f"use {', '.join(BUDGET_KINDS)}"
            )
        if isinstance(self.amount, bool) or not isinstance(self.amount, int | float | Fraction):
            raise FinpodError(f"budget amount {self.amount!r} is not a number", _BUDGET_HINT)
        if isinstance(self.amount, float):
            text = _from_value(self.amount, "budget")  # its shortest decimal text
            value = Fraction(Decimal(text))
            if self.kind == "time":  # a float is rounded to the nanosecond
                value = round(value / NANOSECOND) * NANOSECOND if value else value
        else:
            value = Fraction(self.amount)
            text = str(value)
        if self.kind == "time":
            object.__setattr__(self, "amount", Seconds(_seconds(value, f"{text}s", "budget")))
        else:
            count = _whole(value, f"{text} {self.kind}", "budget", self.kind, _BUDGET_HINT)
            object.__setattr__(self, "amount", count)

    def __str__(self) -> str:
        if self.kind == "time":
            return f"{self.amount}s"
        return f"{self.amount} {self.kind}"

    @property
    def seconds(self) -> float | None:
        """Wall seconds of a time budget (None for a count)."""
        return float(self.amount) if self.kind == "time" else None


def _seconds(value: Fraction, text: str, what: str) -> Fraction:
    """``value`` seconds checked: positive, whole nanoseconds, at most :data:`MAX_SECONDS`."""
    if value <= 0:
        raise FinpodError(f"{what} {text!r} must be positive", _BUDGET_HINT)
    if value % NANOSECOND:
        raise FinpodError(f"{what} {text!r} is finer than a nanosecond", _BUDGET_HINT)
    if value > MAX_SECONDS:
        raise FinpodError(
            f"{what} {text!r} is longer than {_decimal_text(MAX_SECONDS)}s (about 292 years)",
            _BUDGET_HINT,
        )
    return value


def parse_budget(value: Budget | str | int | float, what: str = "budget") -> Budget:
    """``"90s"``, ``"30min"``, ``"2h"``, ``"1d"`` → wall time; ``"2e6 steps"``,
    ``"16M steps"``, ``"500k steps"`` → env steps; ``"40 pods"``. A bare number (or a TOML
    number) is seconds. ``what`` names the option in messages (``tournament.budget``)."""
    if isinstance(value, Budget):
        return value
    text = _from_value(value, what)
    q = _quantity(text, what, _BUDGET_HINT)
    if q.unit in COUNT_UNITS:
        kind = COUNT_UNITS[q.unit]
        amount = q.value
        if q.scale is not None:
            if q.scale not in MULTIPLIERS:
                near = q.scale.lower() if q.scale.lower() in MULTIPLIERS else q.scale.upper()
                suggestion = f"{q.number}{near} {q.unit}" if near in MULTIPLIERS else None
                raise FinpodError(
                    f"{what} {text!r}: {q.scale} is not a multiplier (k is thousand, M million, "
                    "G billion)",
                    f"write {suggestion}" if suggestion else _BUDGET_HINT,
                )
            amount *= MULTIPLIERS[q.scale]
        if q.negative:
            raise FinpodError(f"{what} {text!r} must be positive", _BUDGET_HINT)
        return Budget(kind, _whole(amount, text, what, kind, _BUDGET_HINT))
    if q.scale is not None:
        raise FinpodError(
            f"{what} {text!r}: {q.scale} multiplies steps and pods only",
            f'write e.g. "{q.number}{q.scale} steps" or "{q.number}min"',
        )
    if q.unit in ("m", "M"):
        raise FinpodError(
            f"{what} {text!r} is ambiguous: {q.unit} is never minutes "
            f"({'m is not months either' if q.unit == 'm' else 'M is million'})",
            f"write {q.number}min for minutes"
            + (f" or {q.number}M steps for million steps" if q.unit == "M" else ""),
        )
    if q.unit and q.unit not in TIME_UNITS:
        raise FinpodError(
            f"{what} unit {q.unit!r} in {text!r} is not known",
            f"use {', '.join(_short(TIME_UNITS))} (wall time), steps or pods",
        )
    seconds = q.value * TIME_UNITS.get(q.unit, 1)
    if q.negative:
        raise FinpodError(f"{what} {text!r} must be positive", _BUDGET_HINT)
    return Budget("time", _seconds(seconds, text, what))


def parse_duration(value: str | int | float, what: str) -> Seconds:
    """A wall time (``"6min"``, ``"90s"``, a number of seconds) as exact :class:`Seconds`."""
    budget = parse_budget(value, what)
    if budget.kind != "time":
        raise FinpodError(f"{what} must be a duration, got {value!r}", 'e.g. "6min" or "90s"')
    return budget.amount  # type: ignore[return-value]


# ---------------------------------------------------------------------------- length


_LENGTH_HINT = "write e.g. 1y, 6mo, 4w, 30d or a number of sessions such as 250"


@dataclass(frozen=True)
class Length:
    """A walk-forward window length: a calendar span or a number of sessions."""

    count: int
    """How many units (≥ 1)."""
    unit: str
    """``y`` (years), ``mo`` (months), ``w`` (weeks), ``d`` (calendar days) or
    ``sessions``."""

    def __post_init__(self) -> None:
        if self.unit not in set(LENGTH_UNITS.values()):
            raise FinpodError(f"length unit {self.unit!r} is not known", _LENGTH_HINT)
        if isinstance(self.count, bool) or not isinstance(self.count, int):
            raise FinpodError(f"length count {self.count!r} is not a whole number", _LENGTH_HINT)
        _whole(Fraction(self.count), str(self), "the length", self.unit, _LENGTH_HINT)

    def __str__(self) -> str:
        return f"{self.count} sessions" if self.unit == "sessions" else f"{self.count}{self.unit}"


def parse_length(value: Length | str | int, what: str = "window") -> Length:
    """``"1y"``, ``"6mo"``, ``"4w"``, ``"10d"`` (calendar) or ``"250"``/``"250 sessions"``.
    A fraction of a year that is whole months is those months (``"0.5y"`` = ``6mo``)."""
    if isinstance(value, Length):
        return value
    label = f"the {what} length"
    text = _from_value(value, label)
    q = _quantity(text, label, _LENGTH_HINT)
    if q.scale is not None:
        raise FinpodError(f"{label} {text!r} is not understood", _LENGTH_HINT)
    if q.unit in ("m", "M"):
        raise FinpodError(
            f"{label} {text!r} is ambiguous: {q.unit} is never months",
            f"write {q.number}mo (months) or {q.number}min (minutes, not a window length)",
        )
    if q.unit and q.unit not in LENGTH_UNITS:
        why = "is seconds, not a window unit" if q.unit in TIME_UNITS else "is not known"
        raise FinpodError(f"{label} {text!r} is not understood: {q.unit!r} {why}", _LENGTH_HINT)
    if q.negative or q.value <= 0:
        raise FinpodError(f"{label} must be positive, got {text!r}", "e.g. 1y")
    unit = LENGTH_UNITS.get(q.unit, "sessions")
    amount = q.value
    if unit == "y" and amount.denominator != 1:
        unit, amount = "mo", amount * 12
        if amount.denominator != 1:
            raise FinpodError(
                f"{label} {text!r} is not a whole number of months", "e.g. 0.5y or 6mo"
            )
    noun = {"y": "years", "mo": "months", "w": "weeks", "d": "days"}.get(unit, unit)
    return Length(_whole(amount, text, label, noun, _LENGTH_HINT), unit)


# ----------------------------------------------------------------------------- seeds


_SEEDS_HINT = "give a count (3) or a list (0,4,7; one seed: 5,)"


def check_seed(value: Any, what: str = "seed") -> int:
    """One seed: an integer from 0 to :data:`MAX_SEED`."""
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            raise FinpodError(f"{what} {value!r} is not a whole number", "e.g. 0")
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FinpodError(f"{what} must be a whole number, got {value!r}", "e.g. 0")
    if not 0 <= value <= MAX_SEED:
        raise FinpodError(f"{what} must be from 0 to {MAX_SEED} (2**32 - 1), got {value}", "e.g. 0")
    return value


@dataclass(frozen=True)
class Seeds:
    """Distinct seeds, in order (a walk-forward trains each fold once per seed)."""

    values: tuple[int, ...]
    """The seeds, each from 0 to :data:`MAX_SEED`; 1 to :data:`MAX_SEEDS` of them."""

    def __post_init__(self) -> None:
        values = tuple(self.values)
        object.__setattr__(self, "values", values)
        if not 1 <= len(values) <= MAX_SEEDS:
            raise FinpodError(
                f"seeds must name 1 to {MAX_SEEDS} seeds, got {len(values)}", "e.g. --seeds 3"
            )
        for seed in values:
            check_seed(seed, "a seed")
        if len(set(values)) != len(values):
            raise FinpodError(f"seeds {self} name a seed twice", "give distinct seeds")

    def __str__(self) -> str:
        if self.values == tuple(range(len(self.values))):
            return str(len(self.values))
        return ",".join(map(str, self.values)) + ("," if len(self.values) == 1 else "")

    def __iter__(self) -> Any:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def parse_seeds(value: Seeds | str | int | list[int] | tuple[int, ...]) -> Seeds:
    """``3`` → seeds 0, 1, 2; ``"0,4,7"`` → 0, 4, 7; ``"5,"`` → the one seed 5."""
    if isinstance(value, Seeds):
        return value
    if isinstance(value, list | tuple):
        return Seeds(tuple(check_seed(s, "--seeds seed") for s in value))
    text = _from_value(value, "--seeds")
    if "," in text:
        items = [s.strip() for s in text.split(",")]
        if items[-1] == "" and len(items) > 1:
            items.pop()
        if any(not re.fullmatch(r"[+-]?\d+", s) for s in items):
            raise FinpodError(f"--seeds {value!r} is not understood", _SEEDS_HINT)
        if len(items) > MAX_SEEDS:
            raise FinpodError(
                f"--seeds {value!r} names {len(items)} seeds, more than {MAX_SEEDS}", _SEEDS_HINT
            )
        seeds = tuple(int(s) for s in items)
        if min(seeds) < 0 or len(set(seeds)) != len(seeds):
            raise FinpodError(
                f"--seeds {value!r} must name distinct seeds ≥ 0", "e.g. --seeds 0,4,7"
            )
        return Seeds(tuple(check_seed(s, "--seeds seed") for s in seeds))
    try:
        q = _quantity(text, "--seeds", _SEEDS_HINT)
    except FinpodError:
        q = None
    if q is None or q.unit or q.scale or q.value.denominator != 1:
        raise FinpodError(f"--seeds {value!r} is not understood", _SEEDS_HINT)
    if q.negative or q.value < 1:
        raise FinpodError(f"--seeds {value!r} must name at least one seed", "e.g. --seeds 3")
    if q.value > MAX_SEEDS:
        raise FinpodError(
            f"--seeds {value!r} asks for {q.value} seeds, more than {MAX_SEEDS}", "e.g. --seeds 3"
        )
    return Seeds(tuple(range(int(q.value))))


# ------------------------------------------------------------------------------ pods


_PODS_HINT = "e.g. --pods 4"


@dataclass(frozen=True)
class Pods:
    """Most pods training at once: a count, or ``None`` for ``auto`` (as many as fit)."""

    count: int | None = None
    """1 to :data:`MAX_COUNT`; None: auto."""

    def __post_init__(self) -> None:
        if self.count is not None:
            if isinstance(self.count, bool) or not isinstance(self.count, int):
                raise FinpodError(f"pods count {self.count!r} is not a whole number", _PODS_HINT)
            _whole(Fraction(self.count), str(self.count), "pods", "pods", _PODS_HINT)

    def __str__(self) -> str:
        return "auto" if self.count is None else str(self.count)


def parse_pods(value: Pods | str | int | float | None) -> Pods:
    """``"auto"``/``None`` → auto; a positive whole number (or its text) → that count."""
    if isinstance(value, Pods):
        return value
    if value is None or (isinstance(value, str) and value.strip() == "auto"):
        return Pods(None)
    bad = FinpodError(f'pods must be "auto" or a positive integer, got {value!r}', _PODS_HINT)
    try:
        text = _from_value(value, "pods")
        q = _quantity(text, "pods", _PODS_HINT)
    except FinpodError:
        raise bad from None
    if q.unit or q.scale or q.negative or q.value < 1:
        raise bad
    if q.value.denominator != 1:
        raise FinpodError(f"pods {value!r} is not a whole number of pods", _PODS_HINT)
    return Pods(_whole(q.value, text, "pods", "pods", _PODS_HINT))


# ---------------------------------------------------------------------------- device


_DEVICE_HINT = "use auto, cpu, cuda or cuda:K"


@dataclass(frozen=True)
class Device:
    """Where agents train: ``auto`` (CUDA when there is one), ``cpu``, ``cuda`` or
    ``cuda:K``."""

    kind: str
    """``auto``, ``cpu`` or ``cuda``."""
    index: int | None = None
    """The CUDA device index of ``cuda:K``."""

    def __post_init__(self) -> None:
        if self.kind not in DEVICES:
            raise FinpodError(f"unknown device {self.kind!r}", _DEVICE_HINT)
        if self.index is not None and (
            self.kind != "cuda"
            or isinstance(self.index, bool)
            or not isinstance(self.index, int)
            or not 0 <= self.index <= MAX_DEVICE_INDEX
        ):
            raise FinpodError(f"unknown device {str(self)!r}", _DEVICE_HINT)

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def parse_device(value: Device | str) -> Device:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:K`` (K from 0 to :data:`MAX_DEVICE_INDEX`)."""
    if isinstance(value, Device):
        return value
    if not isinstance(value, str):
        raise FinpodError(f"unknown device {value!r}", _DEVICE_HINT)
    if value in DEVICES:
        return Device(value)
    match = re.fullmatch(r"cuda:(\d{1,4})", value)
    if match is None or int(match[1]) > MAX_DEVICE_INDEX:
        raise FinpodError(f"unknown device {value!r}", _DEVICE_HINT)
    return Device("cuda", int(match[1]))


Budget.parse = staticmethod(parse_budget)  # type: ignore[attr-defined]
Length.parse = staticmethod(parse_length)  # type: ignore[attr-defined]
Seeds.parse = staticmethod(parse_seeds)  # type: ignore[attr-defined]
Pods.parse = staticmethod(parse_pods)  # type: ignore[attr-defined]
Device.parse = staticmethod(parse_device)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ docs


def _short(units: dict[str, Any]) -> list[str]:
    """The first spelling of each unit of ``units`` (``s, min, h, d``)."""
    seen: dict[Any, str] = {}
    for name, value in units.items():
        seen.setdefault(value, name)
    return list(seen.values())


def _spellings(units: dict[str, Any], value: Any) -> str:
    return ", ".join(f"`{name}`" for name, v in units.items() if v == value)


def grammar_table() -> str:
    """The Markdown table of every unit and multiplier, from the spellings above (the
    table of ``docs/grammar.md``)."""
    rows = [
        ("option", "unit", "write", "means"),
        ("--budget, time_cap", "seconds", _spellings(TIME_UNITS, 1), "wall time; a bare number too"),
        ("--budget, time_cap", "minutes", _spellings(TIME_UNITS, 60), "60 s (never `m`, `M`)"),
        ("--budget, time_cap", "hours", _spellings(TIME_UNITS, 3600), "3600 s"),
        ("--budget, time_cap", "days", _spellings(TIME_UNITS, 86400), "86400 s"),
        ("--budget", "env steps", _spellings(COUNT_UNITS, "steps"), "summed over pods; whole"),
        ("--budget", "pods", _spellings(COUNT_UNITS, "pods"), "pods trained; whole"),
        *(
            ("--budget", f"× {v:,}", f"`{k}`", f"before steps or pods only (`2{k} steps`)")
            for k, v in MULTIPLIERS.items()
        ),
        *(
            ("--train, --validation, --backtest", noun, _spellings(LENGTH_UNITS, unit), means)
            for unit, noun, means in (
                ("y", "years", "calendar years; 0.5y = 6mo"),
                ("mo", "months", "calendar months (never `m`)"),
                ("w", "weeks", "calendar weeks"),
                ("d", "days", "calendar days"),
                ("sessions", "sessions", "exchange sessions; a bare number too"),
            )
        ),
        ("--seeds", "count", "`3`", f"seeds 0, 1, 2 (at most {MAX_SEEDS})"),
        ("--seeds", "list", "`0,4,7`, `5,`", f"those seeds, each 0 to {MAX_SEED}"),
        ("--pods, pods", "count", "`auto`, `4`", "most pods at once; whole"),
        ("--device", "device", ", ".join(f"`{d}`" for d in (*DEVICES, "cuda:K")), "where agents train"),
    ]  # fmt: skip
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    return "\n".join(lines) + "\n"


__all__ = [
    "BUDGET_KINDS",
    "DEVICES",
    "MAX_COUNT",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_SEEDS",
    "Budget",
    "Device",
    "Length",
    "Pods",
    "Seconds",
    "Seeds",
    "check_seed",
    "grammar_table",
    "parse_budget",
    "parse_device",
    "parse_duration",
    "parse_length",
    "parse_pods",
    "parse_seeds",
]
