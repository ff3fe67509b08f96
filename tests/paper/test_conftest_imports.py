"""Test modules import shared helpers from named modules, never a bare ``from conftest
import``: many test folders have a ``conftest.py``, and in one pytest run over several
folders the name ``conftest`` is whichever folder's was loaded last."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_imports_a_conftest_by_name():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if "conftest" in names:  # a package's ``tests.x.conftest`` is unambiguous
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert offenders == [], f"import from a named module instead: {offenders}"
