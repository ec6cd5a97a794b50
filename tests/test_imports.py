"""The import graph of engine/, service/ and coppice/: no cycles, and no forbidden dependencies.

The graph is read from the source with :mod:`ast`, so nothing is imported and a broken module
cannot hide an edge. An import inside a function runs when the function is first called
(*deferred*); every other import, including those in class bodies and in module-level ``if``
and ``try`` blocks, runs when the module is imported (*import-time*). Imports under
``if TYPE_CHECKING:`` never run and are left out.

``from package import name`` is an edge to ``package.name`` when that is a module of ours
(Python imports the submodule) and to ``package`` otherwise (the name is read from its
``__init__``). Importing a submodule also runs its parents' ``__init__`` files; those implicit
edges are not drawn, or every package that re-exports its modules would be a cycle.

Two graphs are checked for cycles: the import-time edges alone, with no exception, and all
edges, where a deferred import may only close a cycle if it is listed in
:data:`KNOWN_DEFERRED_CYCLE_EDGES` with the reason. A cycle hidden in a function is still two
modules that cannot be understood, tested or moved apart, so it counts.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "service", "coppice")

# Deferred imports that still close a cycle, with the reason each is left. Remove an entry
# when its cycle is broken (the test says so when an entry no longer matches an import).
KNOWN_DEFERRED_CYCLE_EDGES: dict[tuple[str, str], str] = {}

# What engine may import, beyond itself and the standard library (docs: ARCHITECTURE.md,
# "engine/ — a library first").
ENGINE_DEPENDENCIES = frozenset({"numpy", "numba"})
# distributed, only in engine/parallel's Dask modules (imported only when a Client is given).
ENGINE_DASK_MODULES = ("engine.parallel._dask",)
# Optional packages the engine imports inside functions and never needs: scikit-learn only
# in __sklearn_tags__, which only scikit-learn's own tooling calls; threadpoolctl in
# process_setup, which does without it.
ENGINE_OPTIONAL_DEFERRED = frozenset({"sklearn", "threadpoolctl"})
# The client package must install and import without the server.
COPPICE_FORBIDDEN = frozenset({"engine", "service", "fastapi", "starlette"})
# The one deferred exception: the `coppice` command's serve, worker and migrate verbs hand
# over to the service's CLI when it is installed.
COPPICE_DEFERRED_SERVICE_MODULES = frozenset({"coppice.cli"})


@dataclass(frozen=True)
class Import:
    target: str  # a module of ours, or the top-level name of another package
    line: int
    deferred: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _our_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                modules[_module_name(path)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(
    body: list[ast.stmt], deferred: bool = False, typing: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Import statements with whether each is deferred; with ``typing``, also those under
    ``if TYPE_CHECKING:`` (counted as deferred)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, deferred
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            if typing:
                yield from _import_nodes(node.body, True, typing)
            yield from _import_nodes(node.orelse, deferred, typing)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _import_nodes(node.body, True, typing)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    statements = [c for c in children if isinstance(c, ast.stmt)]
                    nested = [c for c in children if not isinstance(c, ast.stmt)]
                    yield from _import_nodes(statements, deferred, typing)
                    for child in nested:  # except handlers and match cases hold bodies
                        yield from _import_nodes(getattr(child, "body", []), deferred, typing)


def _resolve(name: str, modules: Mapping[str, Path]) -> str:
    """The longest module of ours that ``name`` starts with, or its top-level package."""
    candidate = name
    while candidate:
        if candidate in modules:
            return candidate
        candidate = candidate.rpartition(".")[0]
    return name.partition(".")[0]


def _imports_of(
    module: str, path: Path, modules: Mapping[str, Path], typing: bool = False
) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node, deferred in _import_nodes(tree.body, typing=typing):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            names = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                for alias in node.names
            ]
        for name in names:
            target = _resolve(name, modules)
            if target != module:
                found.append(Import(target, node.lineno, deferred))
    return found


@cache
def _import_graph(typing: bool = False) -> dict[str, list[Import]]:
    """Every module's imports; with ``typing``, those only type checkers read as well."""
    modules = _our_modules()
    return {name: _imports_of(name, path, modules, typing) for name, path in modules.items()}


def _edges(graph: Mapping[str, list[Import]], *, deferred: bool) -> dict[str, set[str]]:
    """Edges between our modules: import-time ones, and deferred ones too if asked."""
    return {
        module: {i.target for i in imports if i.target in graph and (deferred or not i.deferred)}
        for module, imports in graph.items()
    }


def _cycles(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _describe(cycles: list[list[str]], edges: Mapping[str, Set[str]]) -> str:
    lines = []
    for component in cycles:
        lines.append("cycle among " + ", ".join(component) + ":")
        members = set(component)
        for module in component:
            for target in sorted(edges[module] & members):
                lines.append(f"    {module} -> {target}")
    return "\n".join(lines)


def _is_stdlib(name: str) -> bool:
    return name in sys.stdlib_module_names


def test_the_graph_is_read() -> None:
    # Guards against a parser that finds nothing and so passes everything below.
    graph = _import_graph()
    assert len(graph) > 100
    targets = {i.target for i in graph["engine.base"]}
    assert {"engine._params", "numpy"} <= targets
    assert "engine.tree.split.context" in {i.target for i in graph["engine.tree.split.vectorised"]}


def test_cycles_are_found_in_a_small_graph() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_at_import_time() -> None:
    edges = _edges(_import_graph(), deferred=False)
    cycles = _cycles(edges)
    assert not cycles, _describe(cycles, edges)


def test_no_import_cycle_through_deferred_imports() -> None:
    edges = _edges(_import_graph(), deferred=True)
    for importer, imported in KNOWN_DEFERRED_CYCLE_EDGES:
        edges[importer].discard(imported)
    cycles = _cycles(edges)
    assert not cycles, (
        "A deferred import (inside a function) closes a cycle; move the code it needs to "
        "where both sides can import it instead.\n" + _describe(cycles, edges)
    )


# Rooms whose modules may not circle even through imports made for type checking only: a
# circle there is two modules that cannot be read apart, whatever runs at import time.
NO_TYPING_CYCLES = ("engine.tree", "engine.explain")


def test_no_import_cycle_in_the_tree_and_explain_rooms_type_checking_included() -> None:
    edges = _edges(_import_graph(typing=True), deferred=True)
    cycles = [
        cycle
        for cycle in _cycles(edges)
        if any(module.startswith(NO_TYPING_CYCLES) for module in cycle)
    ]
    assert not cycles, _describe(cycles, edges)


def test_type_checking_imports_are_read() -> None:
    # engine.tree.split.gains imports SplitContext for its annotations only.
    typing_only = {i.target for i in _import_graph(typing=True)["engine.tree.split.gains"]} - {
        i.target for i in _import_graph()["engine.tree.split.gains"]
    }
    assert typing_only == {"engine.tree.split.context"}


def test_known_exceptions_are_still_needed() -> None:
    graph = _import_graph()
    deferred_edges = {(m, i.target) for m, imports in graph.items() for i in imports if i.deferred}
    stale = sorted(set(KNOWN_DEFERRED_CYCLE_EDGES) - deferred_edges)
    assert not stale, (
        f"no longer a deferred import; remove from KNOWN_DEFERRED_CYCLE_EDGES: {stale}"
    )
    cycles = _cycles(_edges(graph, deferred=True))
    for importer, imported in KNOWN_DEFERRED_CYCLE_EDGES:
        closes = any(importer in c and imported in c for c in cycles)
        assert closes, f"{importer} -> {imported} closes no cycle; remove it from the list"


def test_engine_imports_only_numpy_numba_and_the_standard_library() -> None:
    wrong = []
    for module, imports in _import_graph().items():
        if not module.startswith("engine"):
            continue
        for i in imports:
            name = i.target.partition(".")[0]
            allowed = (
                name == "engine"
                or _is_stdlib(name)
                or name in ENGINE_DEPENDENCIES
                or (name == "distributed" and module.startswith(ENGINE_DASK_MODULES))
                or (i.deferred and name in ENGINE_OPTIONAL_DEFERRED)
            )
            if not allowed:
                when = "deferred" if i.deferred else "import-time"
                wrong.append(f"{module}:{i.line} imports {i.target} ({when})")
    assert not wrong, "\n".join(wrong)


def test_coppice_imports_neither_the_engine_nor_the_service() -> None:
    wrong = []
    for module, imports in _import_graph().items():
        if module.partition(".")[0] != "coppice":
            continue
        for i in imports:
            name = i.target.partition(".")[0]
            excused = (
                i.deferred and name == "service" and module in COPPICE_DEFERRED_SERVICE_MODULES
            )
            if name in COPPICE_FORBIDDEN and not excused:
                wrong.append(f"{module}:{i.line} imports {i.target}")
    assert not wrong, "\n".join(wrong)
