"""Sweep objects that no row names: what a crash between "write bytes" and "commit row" left.

Which columns name store objects is declared where the tables are: a column created with
``info={"store_path": True}`` (``service.db.tables``) holds one object's path per row. The sweep
lists the store, reads every such column, and deletes what is named nowhere and older than
a grace period. The grace period protects writes still in flight — an upload streams its
parts to the store minutes before the row that names them is committed — so it must exceed
the longest upload; a day by default.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, Table, select
from sqlalchemy.orm import Session

from service.db.base import Base
from service.store.store import DataStore, ObjectInfo

logger = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(days=1)


@dataclass
class SweepReport:
    """What a sweep found: objects kept because a row names them or they are recent, and
    objects deleted (or, in a dry run, that would be)."""

    named: int = 0
    recent: int = 0
    swept: list[str] = field(default_factory=list)
    swept_bytes: int = 0
    dry_run: bool = False


def store_path_columns() -> list[tuple[Table, Column[str]]]:
    """Every column of the schema declared to hold a store path."""
    # The tables register with Base.metadata when their module is imported. `coppice store gc`
    # imports nothing else that does, and with no tables known no row names anything: the
    # sweep would delete every object older than the grace.
    import service.db.tables  # noqa: F401

    found: list[tuple[Table, Column[str]]] = []
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            if column.info.get("store_path"):
                found.append((table, column))
    if not found:
        # A sweep that knows no naming column would take every object for an orphan; refuse
        # rather than delete a store's whole contents on a schema it cannot see.
        raise RuntimeError("no column of the schema names store objects; refusing to sweep")
    return found


def named_paths(session: Session) -> set[str]:
    """Every path a row names, across all the declared columns."""
    paths: set[str] = set()
    for _table, column in store_path_columns():
        paths.update(path for path in session.execute(select(column)).scalars() if path)
    return paths


def sweep(
    store: DataStore,
    session: Session,
    *,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    now: datetime | None = None,
) -> SweepReport:
    """Delete the objects no row names that are older than ``grace``; report what it did.

    The store is listed before the rows are read, so an object written and named while the
    sweep runs is always either named in the rows read or younger than the listing.
    """
    listed = list(store.walk())
    named = named_paths(session)
    cutoff = (now or datetime.now(UTC)) - grace
    report = SweepReport(dry_run=dry_run)
    for info in listed:
        if info.path in named:
            report.named += 1
        elif _is_recent(info, cutoff):
            report.recent += 1
        else:
            report.swept.append(info.path)
            report.swept_bytes += info.size
    if not dry_run:
        _delete(store, report.swept)
    return report


def _is_recent(info: ObjectInfo, cutoff: datetime) -> bool:
    # An object whose time the store does not report is kept: never guess a deletion.
    return info.modified is None or info.modified > cutoff


def _delete(store: DataStore, paths: Iterable[str]) -> None:
    for path in paths:
        store.delete(path)
        logger.info("store gc deleted %s", path)
