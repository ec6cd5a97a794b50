"""The import-graph tests of ``tests/test_imports.py`` fail when they should.

Each case adds one import to the real graph (as read from the source) and runs the real
test on it: a new cycle, at import time or through a deferred import, and an engine import
outside the engine's allowed dependencies, must each be reported. Without this, a graph
reader that silently missed an edge kind, or a check loosened by mistake, would pass
everything.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests import test_imports
from tests.test_imports import Import

CYCLE_TESTS = {
    "import-time": test_imports.test_no_import_cycle_at_import_time,
    "deferred": test_imports.test_no_import_cycle_through_deferred_imports,
}


def with_import(monkeypatch: pytest.MonkeyPatch, module: str, extra: Import) -> None:
    """Make the tests read the real graph plus ``module`` importing ``extra.target``."""
    graph = {name: list(imports) for name, imports in test_imports._import_graph().items()}
    assert module in graph
    graph[module].append(extra)
    monkeypatch.setattr(test_imports, "_import_graph", lambda: graph)


def fails(check: Callable[[], None], *needles: str) -> None:
    with pytest.raises(AssertionError) as raised:
        check()
    for needle in needles:
        assert needle in str(raised.value)


@pytest.mark.parametrize(
    ("kind", "importer", "target"),
    [
        # The tree's common module importing a module that imports it.
        ("import-time", "engine.tree._common", "engine.tree._histograms"),
        # The two cycles cut in issue 17, back again.
        ("deferred", "engine.parallel._backend_protocols", "engine.parallel._backend"),
        ("deferred", "engine.parallel._dask_cluster", "engine.parallel._dask"),
    ],
)
def test_a_new_cycle_fails(
    monkeypatch: pytest.MonkeyPatch, kind: str, importer: str, target: str
) -> None:
    CYCLE_TESTS[kind]()  # the real graph has no cycle
    with_import(monkeypatch, importer, Import(target, 1, deferred=kind == "deferred"))
    fails(CYCLE_TESTS[kind], importer, target)
    if kind == "import-time":  # an import-time cycle is a cycle of all edges too
        fails(CYCLE_TESTS["deferred"], importer, target)


@pytest.mark.parametrize(
    ("importer", "target", "deferred"),
    [
        ("engine.tree._histograms", "pandas", False),
        ("engine.tree._common", "sklearn", False),  # scikit-learn only inside functions
        ("engine.parallel._backend", "distributed", False),  # only the Dask modules
        ("engine.base", "service.config", True),  # the engine never imports the service
    ],
)
def test_an_engine_import_outside_its_dependencies_fails(
    monkeypatch: pytest.MonkeyPatch, importer: str, target: str, deferred: bool
) -> None:
    check = test_imports.test_engine_imports_only_numpy_numba_and_the_standard_library
    check()
    with_import(monkeypatch, importer, Import(target, 1, deferred))
    fails(check, f"{importer}:1 imports {target}")
