"""Dataset rules: creating from a parsed upload, reading, deleting, and loading column data.

Functions take the request's (or the worker's) session and only add and flush; the caller
commits. ``load_columns`` is what the training worker calls to get arrays for a job.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from service.datasets import repository
from service.datasets.columns import (
    DATA_FORMAT,
    ColumnData,
    ColumnDataError,
    decode_column,
    take_encoded,
)
from service.datasets.ingest import ParsedTable, is_storable_text
from service.db.tables import DatasetColumnRecord, DatasetRecord, new_id
from service.errors import Conflict, InvalidInput, NotFound, ServiceError

DEFAULT_NAME = "untitled"


class DatasetDataCorrupt(ServiceError):
    """The dataset's stored column data cannot be read back."""


def create_dataset(
    session: Session, table: ParsedTable, *, name: str | None
) -> tuple[DatasetRecord, list[DatasetColumnRecord]]:
    """Store a parsed upload as a dataset and its columns; returns what was stored.

    Consumes ``table.columns`` (``take_encoded``): each column is let go as soon as it is
    encoded, so the upload's data is not held twice (arrays and stored bytes) at the peak.
    """
    name = name if name and name.strip() else DEFAULT_NAME
    if not is_storable_text(name):
        raise InvalidInput(
            "The dataset name holds a NUL character or a lone surrogate, which cannot be stored.",
            errors=[{"loc": ["body", "name"], "msg": "unstorable characters"}],
        )
    dataset = DatasetRecord(
        id=new_id(),
        name=name,
        n_rows=table.n_rows,
        n_columns=len(table.columns),
        size_bytes=table.size_bytes,
        sha256=table.sha256,
    )
    columns = [
        DatasetColumnRecord(
            dataset_id=dataset.id,
            position=position,
            name=encoded.name,
            kind=encoded.kind.value,
            n_missing=encoded.summary.n_missing,
            n_unique=encoded.summary.n_unique,
            stats=encoded.summary.stats,
            distribution=encoded.summary.distribution,
            data_format=DATA_FORMAT,
            data=encoded.data,
        )
        for position, encoded in enumerate(take_encoded(table.columns))
    ]
    repository.add(session, dataset, columns)
    return dataset, columns


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


def load_columns(session: Session, dataset_id: str, names: Sequence[str]) -> dict[str, ColumnData]:
    """The named columns' data, keyed by name in the order asked for.

    Reads only those columns' bytes. Raises ``NotFound`` for an unknown dataset and
    ``InvalidInput`` naming the columns it lacks.
    """
    _get_or_404(session, dataset_id)
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
    try:
        return {
            name: decode_column(
                name, records[name].kind, records[name].data, records[name].data_format
            )
            for name in names
        }
    except ColumnDataError as error:
        raise DatasetDataCorrupt(f"Dataset '{dataset_id}': {error}.") from None


def _get_or_404(session: Session, dataset_id: str, *, for_update: bool = False) -> DatasetRecord:
    dataset = repository.get(session, dataset_id, for_update=for_update)
    if dataset is None:
        raise NotFound(f"There is no dataset with id '{dataset_id}'.")
    return dataset
