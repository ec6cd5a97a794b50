"""Dataset rules: creating from a parsed upload, reading, deleting, and loading column data.

Functions take the request's (or the worker's) session and only add and flush; the caller
commits. A dataset's values are Parquet parts in the data store (``service.datasets.parts``),
written before the rows that name them. ``load_columns`` is what the training worker calls to
get arrays for a job: it reads only the columns the job uses, part by part.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from service.config import Settings
from service.datasets import arrow_ingest, repository
from service.datasets.arrow_columns import column_batches, schema_of
from service.datasets.columns import (
    ColumnData,
    ColumnDataError,
    ColumnSummary,
    decode_column,
    summarize,
)
from service.datasets.csv_ingest import ingest_csv
from service.datasets.csv_live import LiveCsv
from service.datasets.csv_spool import SpooledCsv
from service.datasets.formats import Spooled, UploadFormat
from service.datasets.ingest import ParsedTable, is_storable_text
from service.datasets.part_reader import read_columns
from service.datasets.parts import PartWriter, WrittenPart, dataset_prefix
from service.datasets.register import RegisterIn, check_allowed, register
from service.datasets.summaries import add_batch, count_histograms, summary_for
from service.db.tables import (
    ColumnKind,
    DatasetColumnRecord,
    DatasetPartRecord,
    DatasetRecord,
    new_id,
)
from service.errors import Conflict, FieldError, InvalidInput, NotFound, ServiceError
from service.store import DataStore, ObjectCorrupt

DEFAULT_NAME = "untitled"
# dataset_columns.data_format of a column whose values are in the dataset's parts.
PARTS_FORMAT = 2


class DatasetDataCorrupt(ServiceError):
    """The dataset's stored column data cannot be read back."""


def check_name(name: str | None) -> str:
    """The name a dataset gets; 422 for one no database can store."""
    name = name if name and name.strip() else DEFAULT_NAME
    if not is_storable_text(name):
        raise InvalidInput(
            "The dataset name holds a NUL character or a lone surrogate, which cannot be stored.",
            errors=[{"loc": ["body", "name"], "msg": "unstorable characters"}],
        )
    return name


def create_dataset(
    session: Session, table: ParsedTable, *, name: str | None, store: DataStore
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """Store a parsed upload as a dataset: its parts in the store, then its rows.

    Consumes ``table.columns``: they are summarised and written to parts, then let go.
    """
    name = check_name(name)
    dataset_id = new_id()
    summaries = [summarize(column) for column in table.columns]
    writer = PartWriter(store, dataset_id, schema_of(table.columns))
    try:
        for batch in column_batches(table.columns, writer.row_group_rows):
            writer.write(batch)
        parts = writer.finish()
    except BaseException:
        writer.abort()
        raise
    kinds = [(column.name, column.kind) for column in table.columns]
    table.columns.clear()
    dataset = DatasetRecord(
        id=dataset_id,
        name=name,
        n_rows=table.n_rows,
        n_columns=len(kinds),
        size_bytes=table.size_bytes,
        sha256=table.sha256,
    )
    columns = column_records(dataset_id, kinds, summaries)
    repository.add(session, dataset, columns, part_records(dataset_id, parts))
    return dataset, columns


def create_from_file(
    session: Session,
    spooled: Spooled,
    fmt: UploadFormat,
    *,
    name: str | None,
    categorical: Sequence[str],
    store: DataStore,
    max_columns: int,
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """Store a spooled Parquet or Arrow upload as a dataset, batch by batch."""
    name = check_name(name)
    source = arrow_ingest.SOURCE_NAMES[fmt]
    schema, batches = arrow_ingest.open_source(str(spooled.path), fmt)
    plans = arrow_ingest.plan(schema, categorical, max_columns=max_columns, source=source)
    dataset_id = new_id()
    summaries = [summary_for(plan.kind) for plan in plans]
    writer = PartWriter(
        store,
        dataset_id,
        arrow_ingest.parts_schema(plans),
        on_group=partial(add_batch, summaries),
    )
    try:
        for batch in batches:
            writer.write(arrow_ingest.normalize(batch, plans, writer.schema, writer.n_rows))
        parts = writer.finish()
        if writer.n_rows == 0:
            raise InvalidInput(f"The {source} has no rows; upload at least one row.")
        kinds = [(plan.name, plan.kind) for plan in plans]
        parts_rows = part_records(dataset_id, parts)
        finished = count_histograms(store, parts_rows, [plan.name for plan in plans], summaries)
    except BaseException:
        writer.abort()
        raise
    return _add_uploaded(
        session, dataset_id, name, writer.n_rows, kinds, finished, parts_rows, spooled
    )


def create_from_csv(
    session: Session,
    spooled: SpooledCsv,
    *,
    name: str | None,
    categorical: Sequence[str],
    store: DataStore,
    max_columns: int,
    live: LiveCsv | None = None,
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """Store a spooled CSV upload as a dataset, a block at a time (``csv_ingest``); ``live``
    may have read it while it was spooled (``csv_live``; the caller closes it)."""
    name = check_name(name)
    dataset_id = live.dataset_id if live is not None else new_id()
    first = live.take(set(categorical), plain=spooled.plain) if live is not None else None
    table = ingest_csv(
        spooled,
        categorical=categorical,
        store=store,
        dataset_id=dataset_id,
        max_columns=max_columns,
        first=first,
    )
    try:
        parts_rows = part_records(dataset_id, table.parts)
        finished = count_histograms(store, parts_rows, table.names, table.summaries)
    except BaseException:
        for part in table.parts:
            with contextlib.suppress(Exception):  # best effort: store gc sweeps the rest
                store.delete(part.stored.path)
        raise
    kinds = list(zip(table.names, table.kinds, strict=True))
    return _add_uploaded(
        session, dataset_id, name, table.n_rows, kinds, finished, parts_rows, spooled
    )


def _add_uploaded(
    session: Session,
    dataset_id: str,
    name: str,
    n_rows: int,
    kinds: Sequence[tuple[str, ColumnKind]],
    summaries: Sequence[ColumnSummary],
    parts: list[DatasetPartRecord],
    spooled: Spooled | SpooledCsv,
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """The rows of a dataset whose parts are written: the dataset, its columns, its parts."""
    dataset = DatasetRecord(
        id=dataset_id,
        name=name,
        n_rows=n_rows,
        n_columns=len(kinds),
        size_bytes=spooled.size,
        sha256=spooled.sha256,
    )
    columns = column_records(dataset_id, kinds, summaries)
    repository.add(session, dataset, columns, parts)
    return dataset, columns


def register_dataset(
    session: Session, document: dict[str, Any], *, store: DataStore, settings: Settings
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """Register the Parquet table a JSON body's ``source.url`` names (``service.datasets.
    register``); 403 outside ``COPPICE_IMPORT_ROOTS``, 422 for what is not Parquet."""
    try:
        request = RegisterIn.model_validate(document)
    except ValidationError as error:
        errors: list[FieldError] = [
            {"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in error.errors()
        ]
        where = ".".join(str(part) for part in errors[0]["loc"])
        raise InvalidInput(f"{where}: {errors[0]['msg']}.", errors=errors) from None
    url = request.source.url.strip()
    check_allowed(url, settings.import_roots)
    name = check_name(request.name)
    found = register(url, request.categorical, store=store, max_columns=settings.max_columns)
    dataset_id = new_id()
    identity = hashlib.sha256()
    for part in found.parts:
        part.dataset_id = dataset_id
        identity.update(f"{part.path}\t{part.size}\t{part.source_stamp}\n".encode())
    dataset = DatasetRecord(
        id=dataset_id,
        name=name,
        n_rows=found.n_rows,
        n_columns=len(found.kinds),
        # A registered table's "upload" is its files: their total size, and a digest of
        # their names, sizes and stamps (which says whether two registrations are the same).
        size_bytes=sum(part.size for part in found.parts),
        sha256=identity.hexdigest(),
        source_url=url,
    )
    columns = column_records(dataset_id, found.kinds, found.summaries)
    repository.add(session, dataset, columns, found.parts)
    return dataset, columns


def column_records(
    dataset_id: str,
    kinds: Sequence[tuple[str, ColumnKind]],
    summaries: Sequence[ColumnSummary],
) -> list[DatasetColumnRecord]:
    return [
        DatasetColumnRecord(
            dataset_id=dataset_id,
            position=position,
            name=column_name,
            kind=kind.value,
            n_missing=summary.n_missing,
            n_unique=summary.n_unique,
            stats=summary.stats,
            distribution=summary.distribution,
            data_format=PARTS_FORMAT,
            data=b"",
        )
        for position, ((column_name, kind), summary) in enumerate(
            zip(kinds, summaries, strict=True)
        )
    ]


def part_records(dataset_id: str, parts: Sequence[WrittenPart]) -> list[DatasetPartRecord]:
    """The rows naming written parts."""
    return [
        DatasetPartRecord(
            dataset_id=dataset_id,
            part=part.index,
            row_offset=part.row_offset,
            n_rows=part.n_rows,
            path=part.stored.path,
            size=part.stored.size,
            sha256=part.stored.sha256,
        )
        for part in parts
    ]


def get_dataset(
    session: Session, dataset_id: str
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """The dataset and its columns with their distributions (without their data); 404 when
    there is no such dataset."""
    dataset = _get_or_404(session, dataset_id)
    return dataset, repository.columns(session, dataset_id, distributions=True)


def list_datasets(session: Session, *, limit: int, offset: int) -> tuple[list[DatasetRecord], int]:
    return repository.list_page(session, limit=limit, offset=offset)


def delete_dataset(session: Session, dataset_id: str) -> None:
    """Delete a dataset; 409 while a queued or running job uses it."""
    _get_or_404(session, dataset_id, for_update=True)
    active = repository.count_active_jobs(session, dataset_id)
    if active:
        raise Conflict(
            f"Dataset '{dataset_id}' is used by {active} queued or running "
            f"job{'s' if active != 1 else ''}; cancel {'them' if active != 1 else 'it'} or "
            "wait until they finish, then delete it."
        )
    repository.delete_dataset(session, dataset_id)


def delete_parts(store: DataStore, dataset: DatasetRecord) -> None:
    """Remove an uploaded dataset's parts from the store (after its rows are gone; what this
    misses, store gc sweeps). A registered table's source is never touched."""
    if dataset.source_url is None:
        store.delete_prefix(dataset_prefix(dataset.id))


def load_columns(
    session: Session,
    dataset_id: str,
    names: Sequence[str],
    store: DataStore,
) -> dict[str, ColumnData]:
    """The named columns' data, keyed by name in the order asked for.

    Reads only those columns, part by part. Raises ``NotFound`` for an unknown dataset,
    ``InvalidInput`` naming the columns it lacks, ``DatasetDataCorrupt`` for a damaged part and
    ``DatasetChanged`` for a registered table whose source has changed.
    """
    dataset = _get_or_404(session, dataset_id)
    records = {
        record.name: record for record in repository.columns_with_data(session, dataset_id, names)
    }
    missing = [name for name in names if name not in records]
    if missing:
        raise InvalidInput(
            f"Dataset '{dataset_id}' has no column named "
            + ", ".join(f"'{name}'" for name in missing)
            + ".",
            errors=[
                {"loc": ["body", "features"], "msg": f"unknown column '{name}'"} for name in missing
            ],
        )
    in_parts = [(name, records[name].kind) for name in names if _in_parts(records[name])]
    loaded: dict[str, ColumnData] = {}
    if in_parts:
        parts = repository.parts(session, dataset_id)
        try:
            loaded = read_columns(store, parts, in_parts, dataset.n_rows)
        except ObjectCorrupt as error:
            raise DatasetDataCorrupt(f"Dataset '{dataset_id}': {error.detail}") from None
    try:
        return {
            name: loaded[name]
            if name in loaded
            else decode_column(
                name, records[name].kind, records[name].data, records[name].data_format
            )
            for name in names
        }
    except ColumnDataError as error:
        raise DatasetDataCorrupt(f"Dataset '{dataset_id}': {error}.") from None


def parts_of_columns(
    session: Session, dataset_id: str, names: Sequence[str]
) -> tuple[dict[str, str], list[DatasetPartRecord], int] | None:
    """The named columns' kinds, the dataset's parts and its row count, when every one of
    those columns is in the parts; None otherwise (then :func:`load_columns` reads them, and
    says what is wrong with them)."""
    dataset = _get_or_404(session, dataset_id)
    records = {r.name: r for r in repository.columns_with_data(session, dataset_id, names)}
    if any(name not in records or not _in_parts(records[name]) for name in names):
        return None
    kinds = {name: str(records[name].kind) for name in names}
    return kinds, repository.parts(session, dataset_id), int(dataset.n_rows)


def _in_parts(record: DatasetColumnRecord) -> bool:
    return record.data_format == PARTS_FORMAT


def _get_or_404(session: Session, dataset_id: str, *, for_update: bool = False) -> DatasetRecord:
    dataset = repository.get(session, dataset_id, for_update=for_update)
    if dataset is None:
        raise NotFound(f"There is no dataset with id '{dataset_id}'.")
    return dataset
