"""Tables registered where they lie: a Parquet file or a directory of them, never copied.

Only the footers are read (schema, row counts, per-row-group statistics), so registering a
directory of a thousand parts takes seconds whatever their size. Each file's size and
modification stamp (mtime, or an S3 ETag) are recorded with its part row; a read that finds
them changed fails with ``dataset_changed`` (``service.datasets.part_reader``).

The URL must lie under one of ``COPPICE_IMPORT_ROOTS``: a service that may read any path its
process can would hand its files (and its cloud credentials' reach) to every admin key's
holder. Local paths are compared after resolving symbolic links and ``..``; URLs by their
normalised text, on a ``/`` boundary.

Column summaries come from the footers' statistics: missing counts, minima and maxima. The
distinct count is not in a footer; it is recorded as -1 (unknown), the distribution as not
computed, and a job's checks that need it are left to the fit.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from pydantic import BaseModel, ConfigDict, Field

from service.datasets import arrow_ingest
from service.datasets.columns import ColumnSummary
from service.datasets.part_reader import source_options, source_stamp
from service.db.tables import ColumnKind, DatasetPartRecord
from service.errors import Forbidden, InvalidInput
from service.store import DataStore

UNKNOWN = -1


class SourceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="A Parquet file or a directory of them (fsspec URL or path).")


class RegisterIn(BaseModel):
    """``POST /v1/datasets`` with a source: register a table where it lies (admin keys)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    source: SourceIn
    categorical: list[str] = []


@dataclass(frozen=True, slots=True)
class Registered:
    """What registration found: the columns' kinds and summaries, and the parts."""

    kinds: list[tuple[str, ColumnKind]]
    summaries: list[ColumnSummary]
    parts: list[DatasetPartRecord]
    n_rows: int


def check_allowed(url: str, roots: Sequence[str]) -> None:
    """403 unless ``url`` lies under one of ``roots``."""
    if not roots:
        raise Forbidden(
            "Registering tables in place is turned off on this server: set "
            "COPPICE_IMPORT_ROOTS to the directories or URLs tables may be registered from."
        )
    target = _normal(url)
    for root in roots:
        base = _normal(root)
        if target == base or target.startswith(base.rstrip("/") + "/"):
            return
    raise Forbidden(
        f"'{url}' is not under any of the roots this server registers tables from "
        "(COPPICE_IMPORT_ROOTS)."
    )


def _normal(url: str) -> str:
    if "://" in url and not url.startswith("file://"):
        protocol, rest = url.split("://", 1)
        return f"{protocol}://{posixpath.normpath('/' + rest).lstrip('/')}"
    path = url.removeprefix("file://")
    return os.path.realpath(os.path.expanduser(path))


def register(
    url: str, categorical: Sequence[str], *, store: DataStore, max_columns: int
) -> Registered:
    """Read the footers of the Parquet file(s) at ``url``; 422 when there are none or they
    are not Parquet or do not share a schema."""
    filesystem, root = url_to_fs(url, **source_options(url, store))
    files = _parquet_files(filesystem, root, url)
    schema: pa.Schema | None = None
    parts: list[DatasetPartRecord] = []
    footers: list[pq.FileMetaData] = []
    offset = 0
    for index, (path, info) in enumerate(files):
        metadata = _footer(filesystem, path)
        file_schema = metadata.schema.to_arrow_schema()
        if schema is None:
            schema = file_schema
        elif file_schema.names != schema.names or [
            arrow_ingest.kind_of(f) for f in file_schema
        ] != [arrow_ingest.kind_of(f) for f in schema]:
            raise InvalidInput(
                f"The Parquet files under '{url}' do not share one schema: "
                f"'{filesystem.unstrip_protocol(path)}' differs from the first file's."
            )
        parts.append(
            DatasetPartRecord(
                part=index,
                row_offset=offset,
                n_rows=metadata.num_rows,
                path=filesystem.unstrip_protocol(path),
                size=int(info.get("size") or 0),
                sha256=None,
                source_stamp=source_stamp(info),
            )
        )
        footers.append(metadata)
        offset += metadata.num_rows
    assert schema is not None
    plans = arrow_ingest.plan(schema, categorical, max_columns=max_columns, source="Parquet file")
    if offset == 0:
        raise InvalidInput(f"The Parquet data at '{url}' has no rows.")
    kinds = [(plan.name, plan.kind) for plan in plans]
    summaries = [_summary(plan, index, footers, offset) for index, plan in enumerate(plans)]
    return Registered(kinds, summaries, parts, offset)


def _parquet_files(
    filesystem: AbstractFileSystem, root: str, url: str
) -> list[tuple[str, dict[str, Any]]]:
    try:
        if filesystem.isdir(root):
            found = filesystem.find(root, detail=True)
            files = [
                (path, info)
                for path, info in sorted(found.items())
                if info.get("type") != "directory"
                and path.endswith(".parquet")
                # Hidden files and markers (_SUCCESS, _metadata, .crc) are not parts.
                and not posixpath.basename(path).startswith(("_", "."))
            ]
        else:
            files = [(root, filesystem.info(root))]
    except FileNotFoundError:
        raise InvalidInput(f"There is no file or directory at '{url}'.") from None
    if not files:
        raise InvalidInput(f"The directory '{url}' holds no .parquet files.")
    return files


def _footer(filesystem: AbstractFileSystem, path: str) -> pq.FileMetaData:
    try:
        with filesystem.open(path, "rb") as handle:
            return pq.read_metadata(handle)
    except (pa.ArrowException, OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise InvalidInput(
            f"'{filesystem.unstrip_protocol(path)}' is not a Parquet file: {reason}."
        ) from None


def _summary(
    plan: arrow_ingest.ColumnPlan, index: int, footers: list[pq.FileMetaData], n_rows: int
) -> ColumnSummary:
    """Missing count, minimum and maximum from the row groups' statistics, where present."""
    n_missing: int | None = 0
    low: Any = None
    high: Any = None
    for metadata in footers:
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(index).statistics
            if stats is None:
                n_missing = None
                continue
            if n_missing is not None and stats.has_null_count:
                n_missing += stats.null_count
            elif not stats.has_null_count:
                n_missing = None
            if stats.has_min_max and plan.kind == ColumnKind.NUMERIC and not plan.forced:
                low = stats.min if low is None else min(low, stats.min)
                high = stats.max if high is None else max(high, stats.max)
    if plan.kind == ColumnKind.NUMERIC:
        stats_out: dict[str, Any] = {
            "min": _number(low),
            "max": _number(high),
            "mean": None,
            "std": None,
        }
    else:
        stats_out = {"top": []}
    return ColumnSummary(
        n_missing=UNKNOWN if n_missing is None else int(n_missing),
        n_unique=UNKNOWN,
        stats=stats_out,
        distribution=None,
    )


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None
