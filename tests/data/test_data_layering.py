"""The data layer reads sources → cleaning → features → dataset, with no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import finpod.data

ROOT = Path(finpod.data.__file__).parent


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(module_level_only: bool = False) -> dict[str, set[str]]:
    """finpod.data.* module → finpod.data.* modules it imports (any scope, or only the
    imports that run when the module is imported)."""
    mods = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = tree.body if module_level_only else ast.walk(tree)
        for node in nodes:
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            deps |= {t for t in targets if t in mods and t != name}
        graph[name] = deps
    return graph


def test_no_import_cycle_in_the_data_layer():
    # Every import, function-scope ones included.
    graph = _imports()
    # The package __init__ re-exports everything; leave it out of the cycle search.
    graph = {k: v - {"finpod.data"} for k, v in graph.items() if k != "finpod.data"}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " → ".join([*stack, node, dep]))
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_sources_never_import_the_dataset_module():
    graph = _imports()
    for name, deps in graph.items():
        if name.startswith("finpod.data.sources") or name in (
            "finpod.data.clean",
            "finpod.data.features",
            "finpod.data.benchmark",
        ):
            assert "finpod.data.dataset" not in deps, name


def test_each_source_has_its_own_module():
    from finpod.data.sources import LOADERS

    assert {fn.__module__ for fn in LOADERS.values()} == {
        "finpod.data.sources.sample",
        "finpod.data.sources.yahoo",
        "finpod.data.sources.alpaca",
        "finpod.data.sources.files",
        "finpod.data.sources.synthetic",
    }
