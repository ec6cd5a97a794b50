"""HTTP routes of ``/v1/datasets``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from anyio import from_thread, to_thread
from fastapi import APIRouter, Request, Response

from service.bodies import check_declared_length, parse_json, read_limited
from service.datasets import service
from service.datasets.ingest import ParsedTable, parse_csv, parse_json_upload
from service.datasets.schemas import (
    CategoricalDistribution,
    ColumnOut,
    DatasetOut,
    DatasetPage,
    DatasetSummaryOut,
    NumericDistribution,
)
from service.datasets.upload import MAX_FIELD_BYTES, FormStream, multipart_boundary
from service.db.tables import ColumnKind, DatasetColumnRecord, DatasetRecord
from service.deps import SessionDep, SettingsDep
from service.errors import UnsupportedMediaType, problem_responses
from service.paging import Limit, Offset

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
                            "description": "CSV with a header row.",
                        },
                        "name": {"type": "string"},
                        "categorical": {
                            "type": "string",
                            "description": "Comma-separated column names to keep categorical.",
                        },
                    },
                }
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
    request: Request, session: SessionDep, settings: SettingsDep
) -> DatasetOut:
    """Upload a dataset: a CSV file in a form, or JSON rows or records."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "multipart/form-data":
        table, name = await _receive_csv_form(
            request, content_type, settings.max_upload_bytes, settings.max_columns
        )
    elif media_type == "application/json" or media_type.endswith("+json"):
        table, name = await _receive_json(request, settings.max_request_bytes, settings.max_columns)
    else:
        raise UnsupportedMediaType(
            f"POST /v1/datasets takes multipart/form-data (a CSV file) or application/json, "
            f"not '{media_type or 'no Content-Type'}'."
        )
    dataset, columns = await to_thread.run_sync(
        partial(service.create_dataset, session, table, name=name)
    )
    return _dataset_out(dataset, columns)


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
def get_dataset(dataset_id: str, session: SessionDep) -> DatasetOut:
    """One dataset with its columns."""
    dataset, columns = service.get_dataset(session, dataset_id)
    return _dataset_out(dataset, columns)


@router.delete("/{dataset_id}", status_code=204, response_class=Response)
def delete_dataset(dataset_id: str, session: SessionDep) -> None:
    """Delete a dataset; refused (409) while a queued or running job uses it."""
    service.delete_dataset(session, dataset_id)


async def _receive_csv_form(
    request: Request, content_type: str, max_upload_bytes: int, max_columns: int
) -> tuple[ParsedTable, str | None]:
    boundary = multipart_boundary(content_type)
    # The form's envelope and small fields come on top of the file itself.
    check_declared_length(
        request, max_upload_bytes + MAX_FIELD_BYTES + 64 * 1024, setting="COPPICE_MAX_UPLOAD_BYTES"
    )
    stream: AsyncIterator[bytes] = request.stream()

    async def next_chunk() -> bytes | None:
        async for chunk in stream:
            if chunk:
                return chunk
        return None

    def receive() -> bytes | None:
        return from_thread.run(next_chunk)

    def parse() -> tuple[ParsedTable, str | None]:
        form = FormStream(receive, boundary, max_file_bytes=max_upload_bytes)
        table, counted = parse_csv(form.file_chunks(), max_columns=max_columns)
        categorical = [
            name.strip() for name in form.fields.get("categorical", "").split(",") if name.strip()
        ]
        parsed = table.finish(categorical, size_bytes=counted.size, sha256=counted.sha256)
        return parsed, form.fields.get("name") or form.filename

    return await to_thread.run_sync(parse)


async def _receive_json(
    request: Request, max_request_bytes: int, max_columns: int
) -> tuple[ParsedTable, str | None]:
    body = await read_limited(request, max_request_bytes, setting="COPPICE_MAX_REQUEST_BYTES")

    def parse() -> tuple[ParsedTable, str | None]:
        document = parse_json(body)
        return parse_json_upload(
            document,
            max_columns=max_columns,
            size_bytes=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
        )

    return await to_thread.run_sync(parse)


def _dataset_out(dataset: DatasetRecord, columns: list[DatasetColumnRecord]) -> DatasetOut:
    return DatasetOut(
        **_summary_out(dataset).model_dump(),
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
