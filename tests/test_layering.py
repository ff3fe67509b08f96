"""Facts read from finpod's imports and source: layers import downwards only (the map is
:data:`finpod.layers.LAYERS`), no import circle, and the run directory is written by one
package (:mod:`finpod.runs`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import finpod
from finpod.layers import LAYERS, layer_of

ROOT = Path(finpod.__file__).parent

#: File and folder names of a run directory; only finpod.runs spells them.
RUN_DIRECTORY_NAMES = {
    "run.json",
    "strategy.toml",
    "leaderboard.json",
    "metrics.csv",
    "learning_curves.png",
    "candidates.bin",
    "checkpoints",
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in ROOT.rglob("*.py")}


def _runtime_nodes(tree: ast.Module):
    """Every node except what sits under ``if TYPE_CHECKING:`` (never imported at run time)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imports(name: str, type_only_too: bool = False) -> set[str]:
    """finpod modules ``name`` imports at run time (any scope); with ``type_only_too`` also
    those it imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree) if type_only_too else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            modules = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            names = [a.name for a in node.names if f"{base}.{a.name}" not in MODULES]
            out |= modules
            if base in MODULES and name.startswith(base + ".") and not _defines_code(base):
                # A name from a package that only re-exports comes from one of its
                # modules: the edge runs to that module, not to the package.
                out |= {_reexported_from(base, n) for n in names}
            elif names or not modules:
                out.add(base)
        elif (target := _dynamic_target(node)) is not None:
            out.add(target)
    return {m for m in out if m in MODULES and m != name}


def _is_reexport(node: ast.stmt) -> bool:
    """Whether a top-level statement of a package's ``__init__`` only re-exports: an
    import, the docstring, ``if TYPE_CHECKING:`` or a dunder name (``__all__``,
    ``__version__``)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        return True
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return isinstance(node, ast.Assign | ast.AnnAssign) and all(
        isinstance(t, ast.Name) and t.id.startswith("__") for t in targets
    )


def _defines_code(package: str) -> bool:
    """Whether a package's ``__init__`` holds code of its own (a function, a class, a
    value) beyond the names it re-exports: a module of the package that imports it then
    depends on it, and the edge counts."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    return not all(_is_reexport(node) for node in tree.body)


def _reexported_from(package: str, attr: str) -> str:
    """The module whose import in ``package``'s ``__init__`` gives it ``attr`` (the package
    itself when none does)."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == attr for a in node.names
        ):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            return base if base in MODULES else package
    return package


#: Calls that import a module named at run time (``importlib.import_module("finpod.x")``,
#: ``__import__``, loading from a spec) and the modules that offer them.
DYNAMIC_CALLS = {"import_module", "__import__", "spec_from_file_location", "module_from_spec"}
DYNAMIC_CALLS |= {"find_spec", "exec_module", "load_module", "reload", "run_module", "run_path"}
DYNAMIC_MODULES = {"importlib", "importlib.util", "importlib.machinery", "runpy", "pkgutil"}


def _dynamic_call(node: ast.AST) -> str | None:
    """The name of a dynamic-import call at ``node`` (``import_module``, ``__import__`` …)."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return called if called in DYNAMIC_CALLS else None


def _dynamic_target(node: ast.AST) -> str | None:
    """The finpod module a dynamic import at ``node`` names with a literal, or None."""
    if _dynamic_call(node) and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    return None


def _floor(module: str) -> int:
    return layer_of(module)


def test_every_module_has_a_floor():
    named = {name for layer in LAYERS for name in layer} - {"finpod"}
    for name in set(MODULES) - {"finpod"}:
        assert any(name == k or name.startswith(k + ".") for k in named), name


def test_every_layer_names_a_module_that_exists():
    missing = [name for layer in LAYERS for name in layer if name not in MODULES]
    assert not missing, missing


def test_the_package_docstring_draws_the_layers_of_the_map():
    # The drawing in finpod/__init__.py names the packages above the foundations, top down.
    drawn = re.findall(r"``(\w+)``", finpod.__doc__ or "")
    mapped = [name.removeprefix("finpod.") for layer in LAYERS[::-1][:-1] for name in layer]
    assert drawn == [m for m in mapped if m != "__main__"]


def test_no_import_runs_back_up():
    upward = [
        f"{name} → {dep}"
        for name in MODULES
        for dep in _imports(name)
        if dep != "finpod" and _floor(dep) > _floor(name)
    ]
    assert not upward, upward


def test_the_runs_package_imports_only_the_floor_below_it():
    for name in MODULES:
        if name.startswith("finpod.runs"):
            deps = {d for d in _imports(name) if not d.startswith("finpod.runs")}
            assert deps <= {"finpod.errors", "finpod.atomic"}, (name, deps)


@pytest.mark.parametrize("type_only_too", [False, True], ids=["run time", "type hints too"])
def test_no_import_circle(type_only_too):
    # Every edge counts: a module that imports its own package depends on that package's
    # __init__ when it defines code, and on the re-exporting module when it does not.
    graph = {name: _imports(name, type_only_too) for name in MODULES}
    state: dict[str, int] = {}
    circles: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = [*stack, node]
                circles.append(" → ".join([*cycle[cycle.index(dep) :], dep]))
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_only_the_runs_package_spells_the_run_directory_files():
    spelled = []
    for name, path in MODULES.items():
        # A backtest's reports folder has a metrics.csv of its own (the metrics table).
        if name.startswith("finpod.runs") or name == "finpod.backtest.result":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in RUN_DIRECTORY_NAMES:
                spelled.append(f"{name}:{node.lineno} {node.value!r}")
    assert not spelled, spelled


def test_the_backtest_result_does_not_import_its_renderer():
    assert "finpod.backtest.tearsheet" not in _imports("finpod.backtest.result")


def test_no_module_imports_another_modules_private_names():
    # A name with a leading underscore is its module's own business; a module that needs
    # it from elsewhere means the name is public (or the code belongs beside it).
    borrowed = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("finpod")
            ):
                borrowed += [
                    f"{name}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not borrowed, borrowed


def test_no_module_imports_dynamically():
    # The floors above are read from import statements; a module named at run time
    # (importlib.import_module, __import__, a spec loaded from a path) would not be seen,
    # so none is allowed. importlib.metadata (the installed version) imports no code.
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if called := _dynamic_call(node):
                found.append(f"{name}:{node.lineno} {called}()")
            elif isinstance(node, ast.Import):
                found += [
                    f"{name}:{node.lineno} import {a.name}"
                    for a in node.names
                    if a.name in DYNAMIC_MODULES
                ]
            elif isinstance(node, ast.ImportFrom) and node.module in DYNAMIC_MODULES:
                found += [
                    f"{name}:{node.lineno} from {node.module} import {a.name}"
                    for a in node.names
                    if a.name != "metadata"
                ]
    assert not found, found


def test_a_dynamic_import_is_read_as_an_import_of_its_module():
    tree = ast.parse(
        'importlib.import_module("finpod.tournament.launch")\n__import__("finpod.cli")'
    )
    targets = {_dynamic_target(node) for node in ast.walk(tree)} - {None}
    assert targets == {"finpod.tournament.launch", "finpod.cli"}


def test_an_import_of_its_own_package_runs_to_the_init_with_code_or_the_reexported_module():
    assert _defines_code("finpod.cli") and _defines_code("finpod.backtest")  # set_renderers()
    assert not _defines_code("finpod.agents") and not _defines_code("finpod")
    assert _reexported_from("finpod.agents", "make_agent") == "finpod.agents.registry"
