"""Where inference's seams run, read from the source: no SQL or session of its own, and no
private name borrowed from another domain anywhere in ``service``.

SQL belongs to ``service/db`` and the repositories; a session outside a request comes from
``service.db.session.reading`` or ``transaction``; a domain uses another's public names only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
INFERENCE = sorted((ROOT / "service" / "inference").glob("*.py"))

# Private names still imported across domains, with the reason each is left. Remove an entry
# when its import goes (the test says so when an entry matches nothing).
KNOWN_PRIVATE_IMPORTS: dict[tuple[str, str, str], str] = {}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _domain(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


@pytest.mark.parametrize("path", INFERENCE, ids=lambda path: path.name)
def test_inference_runs_no_sql_and_opens_no_session(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else None
            name = node.func.id if isinstance(node.func, ast.Name) else called
            assert name not in {"Session", "text", "execute", "connect"}, (
                f"{path.name}:{node.lineno} calls {name}(); use service.db (reading, "
                "database_ready) or a repository"
            )


def test_no_private_name_crosses_a_domain() -> None:
    found: set[tuple[str, str, str]] = set()
    for path in sorted((ROOT / "service").rglob("*.py")):
        module = _module(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            if not node.module.startswith("service.") or _domain(node.module) == _domain(module):
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.add((module, node.module, alias.name))
    assert found - set(KNOWN_PRIVATE_IMPORTS) == set(), "private names imported across domains"
    assert set(KNOWN_PRIVATE_IMPORTS) - found == set(), "entries that no longer match: remove"
