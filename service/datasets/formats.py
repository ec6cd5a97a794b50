"""Which format an upload is in, and spooling the ones that must be read from their end.

``POST /v1/datasets`` takes CSV, Parquet and Arrow IPC (stream and file). The format comes from
the request's (or the form part's) content type, then the file name, then the first bytes:
Parquet files start with ``PAR1``, Arrow IPC files with ``ARROW1``, Arrow IPC streams with the
continuation marker ``0xFFFFFFFF``. A form's file part that is none of these is CSV, as every
form upload was before these formats came.

Parquet and Arrow IPC files keep their schema and row-group index at the end, so they are
spooled to a local temporary file as they arrive (memory holds one chunk), hashed in the same
pass, and read from there; the file is deleted once its parts are in the store.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class UploadFormat(StrEnum):
    CSV = "csv"
    PARQUET = "parquet"
    ARROW_STREAM = "arrow_stream"
    ARROW_FILE = "arrow_file"


CONTENT_TYPES = {
    "text/csv": UploadFormat.CSV,
    "application/csv": UploadFormat.CSV,
    "application/vnd.apache.parquet": UploadFormat.PARQUET,
    "application/x-parquet": UploadFormat.PARQUET,
    "application/parquet": UploadFormat.PARQUET,
    "application/vnd.apache.arrow.stream": UploadFormat.ARROW_STREAM,
    "application/vnd.apache.arrow.file": UploadFormat.ARROW_FILE,
}
EXTENSIONS = {
    ".csv": UploadFormat.CSV,
    ".parquet": UploadFormat.PARQUET,
    ".pq": UploadFormat.PARQUET,
    ".arrow": UploadFormat.ARROW_FILE,
    ".feather": UploadFormat.ARROW_FILE,
    ".arrows": UploadFormat.ARROW_STREAM,
}
# Content types that say nothing about the bytes: the first bytes decide, and bytes that
# announce nothing are CSV (``curl --data-binary`` sends x-www-form-urlencoded by default).
GENERIC_TYPES = frozenset(
    {
        "",
        "application/octet-stream",
        "binary/octet-stream",
        "application/x-www-form-urlencoded",
        "text/plain",
    }
)


def sniff(head: bytes) -> UploadFormat | None:
    """The format the first bytes of a file announce, if any."""
    if head.startswith(b"PAR1"):
        return UploadFormat.PARQUET
    if head.startswith(b"ARROW1"):
        return UploadFormat.ARROW_FILE
    if head.startswith(b"\xff\xff\xff\xff"):
        return UploadFormat.ARROW_STREAM
    return None


def form_file_format(content_type: str | None, filename: str | None, head: bytes) -> UploadFormat:
    """A form's file part: its content type, name or first bytes; CSV when none says more."""
    by_type = CONTENT_TYPES.get(_media_type(content_type))
    if by_type is not None and by_type != UploadFormat.CSV:
        return by_type
    if filename:
        by_name = EXTENSIONS.get(Path(filename).suffix.lower())
        if by_name is not None:
            return by_name
    return sniff(head) or UploadFormat.CSV


def body_format(content_type: str, head: bytes) -> UploadFormat | None:
    """A raw request body: its content type, or (a generic one) its first bytes; None for a
    content type that names another format."""
    media_type = _media_type(content_type)
    if media_type in CONTENT_TYPES:
        return CONTENT_TYPES[media_type]
    if media_type in GENERIC_TYPES:
        return sniff(head) or UploadFormat.CSV
    return None


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True, slots=True)
class Spooled:
    """An upload spooled to a local file: where, how big, and its SHA-256."""

    path: Path
    size: int
    sha256: str


SPOOL_PATTERN = "upload-*.spool"


def stale_spools(directory: Path, older_than: float) -> list[Path]:
    """Spooled uploads last written before ``older_than`` (a POSIX time).

    A request deletes its spool when it ends, however it ends; one that outlives its request
    was left by a process killed mid-upload. Age, not ownership, tells them apart, because API
    replicas on one host share the directory (``coppice store gc`` takes its grace period)."""
    if not directory.is_dir():
        return []
    stale = []
    for path in sorted(directory.glob(SPOOL_PATTERN)):
        try:
            if path.stat().st_mtime < older_than:
                stale.append(path)
        except FileNotFoundError:  # its request ended while we looked
            continue
    return stale


def spool(
    chunks: Iterable[bytes],
    directory: Path,
    observe: Callable[[bytes], None] | None = None,
    progress: Callable[[Path, int], None] | None = None,
) -> Spooled:
    """Write ``chunks`` to a new temporary file in ``directory``; the caller deletes it.
    ``observe`` sees each chunk as it is written; ``progress`` is told the file's path and
    size once each chunk is flushed to it (another thread may read it meanwhile)."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle, name = tempfile.mkstemp(prefix="upload-", suffix=".spool", dir=directory)
    try:
        with os.fdopen(handle, "wb") as sink:
            for chunk in chunks:
                sink.write(chunk)
                digest.update(chunk)
                if observe is not None:
                    observe(chunk)
                size += len(chunk)
                if progress is not None:
                    sink.flush()
                    progress(Path(name), size)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Spooled(Path(name), size, digest.hexdigest())


def with_head(chunks: Iterable[bytes], length: int = 8) -> tuple[bytes, Iterator[bytes]]:
    """The first ``length`` bytes (fewer if the input is shorter) and all the chunks again."""
    iterator = iter(chunks)
    taken: list[bytes] = []
    head = b""
    for chunk in iterator:
        taken.append(chunk)
        head += chunk
        if len(head) >= length:
            break

    def again() -> Iterator[bytes]:
        yield from taken
        yield from iterator

    return head[:length], again()
