"""A module that grows past its line budget says why, or splits along a seam.

Every module of finpod may reach :data:`DEFAULT_BUDGET` lines. One that holds a single
concept and needs more gets an entry in ``tests/line_budgets.toml``: its budget and the
reason it stays one module (docs/style.md). So a module grows past the default only
with a written reason, and nothing is split merely to fit a number.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import finpod

ROOT = Path(finpod.__file__).parent
BUDGETS_FILE = Path(__file__).with_name("line_budgets.toml")
#: Lines any module may reach without an entry in the budget file: a few screens.
DEFAULT_BUDGET = 400


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _lines() -> dict[str, int]:
    return {_name(p): len(p.read_text(encoding="utf-8").splitlines()) for p in ROOT.rglob("*.py")}


def _budgets() -> dict[str, dict]:
    return tomllib.loads(BUDGETS_FILE.read_text(encoding="utf-8"))


def over_budget(lines: dict[str, int], budgets: dict[str, dict]) -> dict[str, str]:
    """Modules longer than their budget (their entry's ``lines``, else the default)."""
    out = {}
    for name, n in lines.items():
        budget = int(budgets.get(name, {}).get("lines", DEFAULT_BUDGET))
        if n > budget:
            hint = "raise its budget, with why" if name in budgets else "split it, or add an entry"
            out[name] = f"{n} lines > budget {budget}: {hint} in {BUDGETS_FILE.name}"
    return out


def stale_entries(lines: dict[str, int], budgets: dict[str, dict]) -> dict[str, str]:
    """Entries that say nothing true: no such module, no reason, or a module that fits
    the default budget (it needs no entry)."""
    out = {}
    for name, entry in budgets.items():
        if name not in lines:
            out[name] = "no such module"
        elif not str(entry.get("why", "")).strip():
            out[name] = "no reason given (why = …)"
        elif lines[name] <= DEFAULT_BUDGET:
            out[name] = f"{lines[name]} lines fit the default {DEFAULT_BUDGET}: remove the entry"
    return out


def test_no_module_grew_past_its_budget():
    assert not over_budget(_lines(), _budgets())


def test_every_budget_entry_names_a_module_that_needs_it_and_says_why():
    assert not stale_entries(_lines(), _budgets())


def test_a_module_past_the_default_passes_only_with_an_entry_that_says_why():
    lines = {"finpod.env.core": DEFAULT_BUDGET + 30}
    assert "finpod.env.core" in over_budget(lines, {})
    entry = {"finpod.env.core": {"lines": DEFAULT_BUDGET + 50, "why": "one concept: the step"}}
    assert not over_budget(lines, entry) and not stale_entries(lines, entry)
    assert stale_entries(lines, {"finpod.env.core": {"lines": DEFAULT_BUDGET + 50}})
    assert "finpod.env.core" in over_budget({"finpod.env.core": DEFAULT_BUDGET + 60}, entry)
