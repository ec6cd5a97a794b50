"""HTTP routes of ``/v1/datasets``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

import itertools
import logging
from typing import Annotated, Any
from urllib.parse import quote

from anyio import to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from service.api_keys import Role
from service.datasets import download, receive, repository, service
from service.datasets.arrow_columns import schema_for_kinds
from service.datasets.download import DownloadFormat
from service.datasets.schemas import (
    CategoricalDistribution,
    ColumnOut,
    DatasetOut,
    DatasetPage,
    DatasetSummaryOut,
    NumericDistribution,
    StorageOut,
)
from service.db.tables import ColumnKind, DatasetColumnRecord, DatasetPartRecord, DatasetRecord
from service.deps import SessionDep, SettingsDep, StoreDep
from service.errors import Conflict, problem_responses
from service.paging import Limit, Offset
from service.store import StoreUnavailable

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], responses=problem_responses())

_CELL = {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}, {"type": "null"}]}
_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "CSV with a header row, Parquet, or Arrow IPC "
                            "(stream or file); told apart by the part's content type, the "
                            "file name or the first bytes.",
                        },
                        "name": {"type": "string"},
                        "categorical": {
                            "type": "string",
                            "description": "Comma-separated column names to keep categorical.",
                        },
                    },
                }
            },
            **{
                media_type: {"schema": {"type": "string", "format": "binary"}}
                for media_type in (
                    "text/csv",
                    "application/vnd.apache.parquet",
                    "application/vnd.apache.arrow.stream",
                    "application/vnd.apache.arrow.file",
                    "application/octet-stream",
                )
            },
            "application/json": {
                "schema": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["columns", "rows"],
                            "properties": {
                                "name": {"type": "string"},
                                "columns": {"type": "array", "items": {"type": "string"}},
                                "rows": {
                                    "type": "array",
                                    "items": {"type": "array", "items": _CELL},
                                },
                                "categorical": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        {
                            "type": "object",
                            "required": ["records"],
                            "properties": {
                                "name": {"type": "string"},
                                "records": {
                                    "type": "array",
                                    "items": {"type": "object", "additionalProperties": _CELL},
                                },
                                "categorical": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                    ]
                }
            },
        },
    }
}


@router.post("", status_code=201, openapi_extra=_UPLOAD_BODY)
async def create_dataset(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    store: StoreDep,
    name: Annotated[
        str | None, Query(description="The dataset's name, for a raw (non-form) body.")
    ] = None,
    categorical: Annotated[
        str | None,
        Query(description="Comma-separated columns to keep categorical, for a raw body."),
    ] = None,
) -> DatasetOut:
    """Upload a dataset: a file in a form (CSV, Parquet, Arrow IPC), JSON rows or records,
    or the file itself as the body (``?name=``)."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "multipart/form-data":
        dataset, columns = await receive.receive_form(
            request, session, settings, store, content_type
        )
    elif media_type == "application/json" or media_type.endswith("+json"):
        dataset, columns = await receive.receive_json(request, session, settings, store)
    else:
        dataset, columns = await receive.receive_body(
            request, session, settings, store, content_type, name, receive.names_list(categorical)
        )
    return _dataset_out(dataset, columns, repository.parts(session, dataset.id), request)


@router.get("")
def list_datasets(
    session: SessionDep,
    limit: Limit = 50,
    offset: Offset = 0,
) -> DatasetPage:
    """List datasets, newest first."""
    records, total = service.list_datasets(session, limit=limit, offset=offset)
    return DatasetPage(items=[_summary_out(record) for record in records], total=total)


@router.get("/{dataset_id}")
def get_dataset(dataset_id: str, request: Request, session: SessionDep) -> DatasetOut:
    """One dataset with its columns, and where its values live."""
    dataset, columns = service.get_dataset(session, dataset_id)
    return _dataset_out(dataset, columns, repository.parts(session, dataset_id), request)


@router.get(
    "/{dataset_id}/data",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The table as one Parquet or CSV file, streamed.",
            "content": {
                "application/vnd.apache.parquet": {
                    "schema": {"type": "string", "format": "binary"}
                },
                "text/csv": {"schema": {"type": "string"}},
            },
        }
    },
)
async def download_dataset(
    dataset_id: str,
    session: SessionDep,
    store: StoreDep,
    format: DownloadFormat = DownloadFormat.PARQUET,
) -> StreamingResponse:
    """The dataset's table, streamed: categories as their strings, missing as null (Parquet)
    or an empty cell (CSV)."""
    dataset, columns = await to_thread.run_sync(service.get_dataset, session, dataset_id)
    parts = await to_thread.run_sync(repository.parts, session, dataset_id)
    if not parts:
        raise Conflict(
            f"Dataset '{dataset_id}' has not been moved into the data store yet; run "
            "'coppice migrate' to move it, then download it."
        )
    schema = schema_for_kinds((column.name, column.kind) for column in columns)
    filename = quote(f"{dataset.name}.{format.value}")
    # What can be known before the first byte is sent is checked first, so it is a problem
    # response (409 for a changed source, 503 for a store away), not a cut-off body.
    await to_thread.run_sync(download.check_sources, store, parts)
    pieces = download.stream(store, parts, schema, format)
    first = await to_thread.run_sync(next, pieces, b"")
    return StreamingResponse(
        itertools.chain([first], pieces),
        media_type=download.MEDIA_TYPES[format],
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{filename}"},
    )


@router.delete("/{dataset_id}", status_code=204, response_class=Response)
def delete_dataset(dataset_id: str, session: SessionDep, store: StoreDep) -> None:
    """Delete a dataset; refused (409) while a queued or running job uses it."""
    dataset, _ = service.get_dataset(session, dataset_id)
    service.delete_dataset(session, dataset_id)
    # The rows first, committed; then the parts (what a failure here leaves, store gc sweeps).
    session.commit()
    try:
        service.delete_parts(store, dataset)
    except StoreUnavailable:
        logger.warning("dataset %s deleted; its parts are left for store gc", dataset_id)


def _dataset_out(
    dataset: DatasetRecord,
    columns: list[DatasetColumnRecord],
    parts: list[DatasetPartRecord],
    request: Request,
) -> DatasetOut:
    return DatasetOut(
        **_summary_out(dataset).model_dump(),
        storage=_storage_out(dataset, parts, request),
        columns=[
            ColumnOut(
                name=c.name,
                kind=ColumnKind(c.kind),
                n_missing=c.n_missing,
                n_unique=c.n_unique,
                distribution=_distribution_out(ColumnKind(c.kind), c.distribution),
            )
            for c in columns
        ],
    )


def _storage_out(
    dataset: DatasetRecord, parts: list[DatasetPartRecord], request: Request
) -> StorageOut | None:
    if not parts:
        return None
    registered = dataset.source_url is not None
    return StorageOut(
        format="parquet",
        n_parts=len(parts),
        bytes=sum(part.size for part in parts),
        registered=registered,
        url=dataset.source_url if registered and is_admin(request) else None,
    )


def is_admin(request: Request) -> bool:
    """Whether the request's key may see admin-only fields (every request, with auth off)."""
    role = getattr(request.state, "key_role", None)
    return role is None or role == Role.ADMIN


def _distribution_out(
    kind: ColumnKind, stored: dict[str, Any] | None
) -> NumericDistribution | CategoricalDistribution | None:
    if stored is None:
        return None
    if kind == ColumnKind.NUMERIC:
        return NumericDistribution.model_validate(stored)
    return CategoricalDistribution.model_validate(stored)


def _summary_out(dataset: DatasetRecord) -> DatasetSummaryOut:
    return DatasetSummaryOut.model_validate(dataset, from_attributes=True)
