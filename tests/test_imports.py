"""An import inside a function is a boundary, and only where it is true (docs/style.md).

One fresh interpreter imports every finpod module while recording which modules each
module's top-level code brings in; from that, each module's closure (everything loaded
once it is imported) is known. An import inside a function then fails the test when

- every module it names is already in its own module's closure: it defers nothing and
  belongs at the top;
- its comment names a library the module loads anyway, or one the import does not load:
  the reason it gives is false.

:data:`ALLOWED` lists the exceptions, each with its reason.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "finpod"

#: Libraries a comment may give as the reason an import waits (whole words, any case).
LIBRARIES = (
    "torch",
    "pandas",
    "numpy",
    "ray",
    "matplotlib",
    "scipy",
    "pyarrow",
    "pyfolio",
    "empyrical",
    "tensorboard",
    "statsmodels",
    "yfinance",
    "alpaca",
    "gymnasium",
    "safetensors",
    "exchange_calendars",
)

#: ``(module, imported module)`` in-function imports that stay although the imported module
#: is loaded with their module, each with its reason.
ALLOWED: dict[tuple[str, str], str] = {}

#: Modules not imported by the probe (importing them runs something).
NOT_IMPORTED = {"finpod.__main__"}

PROBE = r"""
import builtins, importlib.util, json, sys
edges, loaded_by, running = {}, {}, []
original = builtins.__import__

def record(importer, target):
    edges.setdefault(importer, set()).add(target)

def hook(name, globals=None, locals=None, fromlist=(), level=0):
    globals = globals or {}
    importer = globals.get("__name__")
    try:
        target = importlib.util.resolve_name("." * level + name, globals.get("__package__")) if level else name
    except (ImportError, ValueError):
        target = name
    fresh = target not in sys.modules
    before = set(sys.modules) if fresh else None
    if fresh:
        running.append(target)
    try:
        module = original(name, globals, locals, fromlist, level)
    finally:
        if fresh:
            running.pop()
    if fresh:
        loaded_by.setdefault(target, set()).update(set(sys.modules) - before)
    if importer in running or importer == "__main__":
        record(importer, target)
        for item in fromlist or ():
            if f"{target}.{item}" in sys.modules:
                record(importer, f"{target}.{item}")
    return module

builtins.__import__ = hook
names = json.loads(sys.argv[1])
for name in names:
    running.append(name)
    try:
        __import__(name)
    finally:
        running.pop()
builtins.__import__ = original
print(json.dumps({
    "edges": {k: sorted(v) for k, v in edges.items() if k},
    "loaded_by": {k: sorted(v) for k, v in loaded_by.items()},
    "modules": sorted(sys.modules),
}))
"""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def finpod_modules() -> dict[str, Path]:
    found = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    return {name: path for name, path in found.items() if name not in NOT_IMPORTED}


def _resolve(name: str, module: str, path: Path, level: int) -> str:
    if not level:
        return name
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{name}" if name else package


def _is_type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _bodies(node: ast.stmt):
    for field in ("body", "orelse", "finalbody"):
        value = getattr(node, field, None)
        if isinstance(value, list):
            yield value
    for handler in getattr(node, "handlers", ()):
        yield handler.body


def _groups(statements: list[ast.stmt], in_function: bool):
    """(import statements on consecutive lines, inside a function?) of a body and those
    below it; a comment above the first import of a group speaks for the group."""
    group: list[ast.stmt] = []
    for node in [*statements, None]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if group and node.lineno > (group[-1].end_lineno or group[-1].lineno) + 1:
                yield group, in_function  # a blank or comment line between: two groups
                group = []
            group.append(node)
            continue
        if group:
            yield group, in_function
            group = []
        if node is None or (isinstance(node, ast.If) and _is_type_checking(node)):
            continue
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for body in _bodies(node):
            yield from _groups(body, inside)


def _names(node: ast.stmt, module: str, path: Path) -> list[str]:
    """The modules an import statement may name: ``import a.b`` → a.b; ``from a import
    b`` → a and a.b (a.b counts where it is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = _resolve(node.module or "", module, path, node.level)
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def _imports(tree: ast.Module, module: str, path: Path):
    """(import statements of one group with the names each imports, inside a function?)."""
    for group, in_function in _groups(tree.body, False):
        yield [(node, _names(node, module, path)) for node in group], in_function


def _comment(lines: list[str], group: list[ast.stmt]) -> str:
    """The comment lines right above a group of imports and their trailing comments."""
    text = []
    for node in group:
        for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            line = lines[number - 1]
            if "#" in line:
                text.append(line.split("#", 1)[1])
    number = group[0].lineno - 1
    while number >= 1 and lines[number - 1].strip().startswith("#"):
        text.append(lines[number - 1].strip()[1:])
        number -= 1
    return " ".join(text)


def probe(names: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def closures(modules: dict[str, Path], seen: dict) -> Closures:
    """Each finpod module's closure: its top-level imports (read from its source, so a
    module imported first by someone else still counts them), its packages, and what
    the probe saw each module load."""
    graph: dict[str, set[str]] = {k: set(v) for k, v in seen["edges"].items()}
    for name, more in seen["loaded_by"].items():
        graph.setdefault(name, set()).update(more)
    loaded = set(seen["modules"])
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for group, in_function in _imports(tree, name, path):
            for _, names in group if not in_function else ():
                graph.setdefault(name, set()).update(n for n in names if n in loaded)
    return Closures(graph)


class Closures(dict):
    """``closures[name]``: the modules loaded once ``name`` is imported (computed when asked)."""

    def __init__(self, graph: dict[str, set[str]]) -> None:
        super().__init__()
        self.graph = graph

    def __missing__(self, name: str) -> set[str]:
        todo, reach = [name], {name}
        while todo:
            current = todo.pop()
            parent = current.rpartition(".")[0]  # a module's packages load before it
            for nxt in [*self.graph.get(current, ()), *([parent] if parent else [])]:
                if nxt not in reach:
                    reach.add(nxt)
                    todo.append(nxt)
        self[name] = reach
        return reach


def in_function_imports(modules: dict[str, Path], loaded: set[str]):
    """(module, [(line, imported module names)], comment) of each group of imports inside
    a function."""
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for group, in_function in _imports(ast.parse(text), name, path):
            if in_function:
                # ``from a import b``: a, and a.b where b is a module.
                named = [
                    (node.lineno, [names[0], *(n for n in names[1:] if n in loaded)])
                    for node, names in group
                ]
                yield name, named, _comment(lines, [node for node, _ in group])


def problems(modules: dict[str, Path], seen: dict) -> list[str]:
    loaded = set(seen["modules"])
    reach = closures(modules, seen)
    out = []
    for module, group, comment in in_function_imports(modules, loaded):
        for line, named in group:
            if all(n in reach[module] for n in named) and (module, named[0]) not in ALLOWED:
                out.append(
                    f"{module}:{line}: {named[0]} is loaded with {module}: import it at the top"
                )
        where = f"{module}:{group[0][0]}"
        for library in LIBRARIES:
            if not re.search(rf"\b{library}\b", comment, re.IGNORECASE):
                continue
            if library in reach[module]:
                out.append(f"{where}: the comment names {library}, which {module} loads anyway")
            elif all(n in loaded for _, named in group for n in named) and not any(
                library in reach[n] for _, named in group for n in named
            ):  # (what a module the probe never loaded would load is not known)
                out.append(f"{where}: the comment names {library}, which these imports do not load")
    return out


def test_every_in_function_import_defers_something_and_says_why_truly():
    modules = finpod_modules()
    seen = probe(sorted(modules))
    assert problems(modules, seen) == []


def test_the_allowlist_names_real_modules_and_gives_reasons():
    modules = finpod_modules()
    for (module, imported), why in ALLOWED.items():
        assert module in modules, module
        assert imported and len(why.split()) >= 4, (module, imported)
