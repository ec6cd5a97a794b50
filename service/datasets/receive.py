"""Receiving an upload's bytes: a multipart form, a raw body, or JSON, into a dataset.

The body is read chunk by chunk as the client sends it, in a worker thread that asks the event
loop for each next chunk (``_chunk_receiver``), so a file is parsed, or spooled, as it arrives
and the limit (``COPPICE_MAX_UPLOAD_BYTES``) is enforced at the chunk that passes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator

from anyio import from_thread, to_thread
from fastapi import Request
from sqlalchemy.orm import Session

from service.bodies import check_declared_length, parse_json, read_limited
from service.config import Settings
from service.datasets import service
from service.datasets.csv_live import LiveCsv
from service.datasets.csv_spool import spool_csv
from service.datasets.formats import UploadFormat, body_format, form_file_format, spool, with_head
from service.datasets.ingest import parse_json_upload
from service.datasets.upload import MAX_FIELD_BYTES, FormStream, multipart_boundary
from service.db.tables import DatasetColumnRecord, DatasetRecord, new_id
from service.errors import PayloadTooLarge, UnsupportedMediaType
from service.store import DataStore

Created = tuple[DatasetRecord, list[DatasetColumnRecord]]


def names_list(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


# Body bytes gathered on the event loop for each call from the worker thread. The server hands
# the body over in pieces of at most 64 KiB; a thread-to-loop round trip for each (16,000 for a
# GiB), and the spool's hashing and scanning of each, cost more than the pieces' bytes.
RECEIVE_BYTES = 256 * 1024


def _chunk_receiver(request: Request, limit: int) -> Callable[[], bytes | None]:
    """A function a worker thread calls for the body's next chunk (None at its end): the
    pieces that arrived, joined up to ``RECEIVE_BYTES``, and never one more once the body
    has passed ``limit`` bytes (the reader refuses it at that chunk or the next piece)."""
    stream: AsyncIterator[bytes] = request.stream()
    received = 0

    async def next_chunk() -> bytes | None:
        nonlocal received
        pieces: list[bytes] = []
        size = 0
        async for chunk in stream:
            if chunk:
                pieces.append(chunk)
                size += len(chunk)
                received += len(chunk)
                if size >= RECEIVE_BYTES or received > limit:
                    break
        if not pieces:
            return None
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def receive() -> bytes | None:
        return from_thread.run(next_chunk)

    return receive


def _store_file(
    session: Session,
    settings: Settings,
    store: DataStore,
    fmt: UploadFormat,
    chunks: Iterable[bytes],
    name: Callable[[], str | None],
    categorical: Callable[[], list[str]],
) -> Created:
    """Any format's bytes into a dataset (runs in a worker thread). ``name`` and
    ``categorical`` are asked for once the file is read: a form may send them after it."""
    if fmt == UploadFormat.CSV:
        # Spooled: the file is read again if a column turns categorical late, and a form's
        # fields (the forced-categorical names) may come after the file. A large one is read
        # meanwhile, as it is spooled (csv_live).
        live = LiveCsv(
            new_id(), store=store, categorical=categorical, max_columns=settings.max_columns
        )
        spooled_csv = spool_csv(chunks, settings.data_dir / "uploads", live=live)
        try:
            return service.create_from_csv(
                session,
                spooled_csv,
                name=name(),
                categorical=categorical(),
                store=store,
                max_columns=settings.max_columns,
                live=live,
            )
        finally:
            live.close()
            spooled_csv.path.unlink(missing_ok=True)
    spooled = spool(chunks, settings.data_dir / "uploads")
    try:
        return service.create_from_file(
            session,
            spooled,
            fmt,
            name=name(),
            categorical=categorical(),
            store=store,
            max_columns=settings.max_columns,
        )
    finally:
        spooled.path.unlink(missing_ok=True)


async def receive_form(
    request: Request, session: Session, settings: Settings, store: DataStore, content_type: str
) -> Created:
    boundary = multipart_boundary(content_type)
    max_upload_bytes = settings.max_upload_bytes
    # The form's envelope and small fields come on top of the file itself.
    check_declared_length(
        request, max_upload_bytes + MAX_FIELD_BYTES + 64 * 1024, setting="COPPICE_MAX_UPLOAD_BYTES"
    )
    receive = _chunk_receiver(request, max_upload_bytes)

    def ingest() -> Created:
        form = FormStream(receive, boundary, max_file_bytes=max_upload_bytes)
        head, chunks = with_head(form.file_chunks())
        fmt = form_file_format(form.file_content_type, form.filename, head)
        return _store_file(
            session,
            settings,
            store,
            fmt,
            chunks,
            lambda: form.fields.get("name") or form.filename,
            lambda: names_list(form.fields.get("categorical")),
        )

    return await to_thread.run_sync(ingest)


async def receive_body(
    request: Request,
    session: Session,
    settings: Settings,
    store: DataStore,
    content_type: str,
    name: str | None,
    categorical: list[str],
) -> Created:
    limit = settings.max_upload_bytes
    check_declared_length(request, limit, setting="COPPICE_MAX_UPLOAD_BYTES")
    receive = _chunk_receiver(request, limit)

    def limited() -> Iterator[bytes]:
        size = 0
        while (chunk := receive()) is not None:
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(
                    f"The file is larger than this server accepts: at most {limit} bytes "
                    "(COPPICE_MAX_UPLOAD_BYTES)."
                )
            yield chunk

    def ingest() -> Created:
        head, chunks = with_head(limited())
        fmt = body_format(content_type, head)
        if fmt is None:
            media_type = content_type.split(";", 1)[0].strip().lower()
            raise UnsupportedMediaType(
                "POST /v1/datasets takes multipart/form-data (a file), application/json, or a "
                "file as the body: text/csv, application/vnd.apache.parquet, "
                "application/vnd.apache.arrow.stream or application/vnd.apache.arrow.file, "
                f"not '{media_type or 'no Content-Type'}'."
            )
        return _store_file(session, settings, store, fmt, chunks, lambda: name, lambda: categorical)

    return await to_thread.run_sync(ingest)


async def receive_json(
    request: Request, session: Session, settings: Settings, store: DataStore
) -> Created:
    """A JSON body: rows or records to store, or a source to register in place."""
    body = await read_limited(
        request, settings.max_request_bytes, setting="COPPICE_MAX_REQUEST_BYTES"
    )

    def ingest() -> Created:
        document = parse_json(body)
        if isinstance(document, dict) and "source" in document:
            return service.register_dataset(session, document, store=store, settings=settings)
        table, name = parse_json_upload(
            document,
            max_columns=settings.max_columns,
            size_bytes=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
        )
        return service.create_dataset(session, table, name=name, store=store)

    return await to_thread.run_sync(ingest)
