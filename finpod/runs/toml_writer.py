"""The one TOML writer of finpod: a resolved strategy as the run's ``strategy.toml``.

Python's ``tomllib`` reads TOML but does not write it; strategies need only scalars,
lists, inline tables (search ranges ``{ low, high, log }``) and nested tables.
"""

from __future__ import annotations

import json
import math
from typing import Any


def toml_dumps(obj: dict[str, Any]) -> str:
    """TOML text of ``obj``: scalars, lists, inline and nested tables (``None`` left out)."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "nan"
            if math.isinf(value):
                return "inf" if value > 0 else "-inf"
            return repr(value)
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(scalar(v) for v in value if v is not None) + "]"
        if isinstance(value, dict):
            return (
                "{ "
                + ", ".join(f"{_key(k)} = {scalar(v)}" for k, v in value.items() if v is not None)
                + " }"
            )
        raise TypeError(f"cannot write {type(value).__name__} to TOML")

    def table(prefix: str, body: dict[str, Any]) -> None:
        def inline(v: Any) -> bool:
            return not isinstance(v, dict) or _is_leaf_spec(v)

        plain = {k: v for k, v in body.items() if v is not None and inline(v)}
        nested = {k: v for k, v in body.items() if v is not None and not inline(v)}
        header = bool(prefix) and (bool(plain) or not nested)
        if header:
            lines.append(f"[{prefix}]")
        for k, v in plain.items():
            lines.append(f"{_key(k)} = {scalar(v)}")
        if header or plain:
            lines.append("")
        for k, v in nested.items():
            table(f"{prefix}.{_key(k)}" if prefix else _key(k), v)

    table("", obj)
    return "\n".join(lines).rstrip() + "\n"


def _is_leaf_spec(value: dict[str, Any]) -> bool:
    """A search range ``{ low, high[, log] }``, written inline."""
    return set(value) <= {"low", "high", "log"} and {"low", "high"} <= set(value)


def _key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)
