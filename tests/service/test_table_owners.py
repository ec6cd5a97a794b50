"""One owner per table: the service's SQL writes and sessions are where the layout says.

Each domain's ``repository.py`` is the only writer of its tables (the rule Polar's codebase
keeps; README "Project layout"), with two owners named for what they are: the job queue
(``worker/queue.py``, ``worker/recovery.py``: the lease-guarded transitions of a running job)
and the searches' out-of-fold predictions (``searches/predictions.py``, that table's module).
Every session outside a request is opened by ``service.db.session``; a request's by
``service.deps``. A new writer or a private ``Session(...)`` elsewhere fails here, naming the
line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "service"

WRITERS = {"repository.py"}
OTHER_OWNERS = {"worker/queue.py", "worker/recovery.py", "searches/predictions.py"}
SESSION_OPENERS = {"db/session.py", "deps.py"}
SQL_STATEMENTS = {"insert", "update", "delete"}
SESSION_WRITES = {"add", "add_all", "delete", "merge"}


def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(SERVICE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(SERVICE.rglob("*.py"))
    ]


def _sqlalchemy_names(tree: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
        for alias in node.names
    }


def _writes(tree: ast.Module) -> list[tuple[int, str]]:
    statements = _sqlalchemy_names(tree) & SQL_STATEMENTS
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in statements:
            found.append((node.lineno, f"{function.id}(...)"))
        elif (
            isinstance(function, ast.Attribute)
            and function.attr in SESSION_WRITES
            and isinstance(function.value, ast.Name)
            and function.value.id == "session"
        ):
            found.append((node.lineno, f"session.{function.attr}(...)"))
    return found


def _owns_tables(path: str) -> bool:
    return Path(path).name in WRITERS or path in OTHER_OWNERS


def test_only_table_owners_write() -> None:
    strays = [
        f"service/{path}:{line} {what}"
        for path, tree in _sources()
        if not _owns_tables(path)
        for line, what in _writes(tree)
    ]
    assert strays == [], "writes outside a table's owner:\n" + "\n".join(strays)


def test_the_owners_are_found_writing() -> None:
    # The test above would pass on a detector that finds nothing.
    writers = {path for path, tree in _sources() if _writes(tree)}
    assert {
        "models/repository.py",
        "jobs/repository.py",
        "worker/queue.py",
        "searches/predictions.py",
    } <= writers


def test_sessions_are_opened_in_one_place() -> None:
    openers = {
        f"service/{path}:{node.lineno}"
        for path, tree in _sources()
        if path not in SESSION_OPENERS
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Session"
    }
    assert openers == set(), "use service.db.session.reading / transaction"
