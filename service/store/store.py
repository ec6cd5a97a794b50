"""The data store: one fsspec root that holds every byte the database only names.

MLflow pairs a backend store (metadata, SQL) with an artifact store (bytes, a directory or a
bucket); Coppice does the same. ``COPPICE_STORE_URL`` is any fsspec URL — a local directory by
default, ``s3://bucket/prefix`` for several hosts — and ``COPPICE_STORE_OPTIONS`` its
filesystem options (``endpoint_url``, ``key``, ``secret``, ...). Objects are named by what they
hold (``datasets/<id>/part-00000.parquet``, ``models/<id>/model.cpm``), so an operator can find
them.

The rule every caller follows: write the object first, commit the row that names it after.
A crash between the two leaves an object no row names, which ``service.store.gc`` sweeps; it
never leaves a row naming bytes that are not there. On a local disk an object is written under
a temporary name and renamed when complete, so no reader ever sees half of one; S3 makes an
object visible only when its (multipart) upload completes.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from service.config import Settings
from service.store.errors import ObjectMissing, StoreUnavailable
from service.store.objects import HashingWriter, StoredObject, VerifyingReader, mismatch

# What failing to reach a store raises: OSError from local disks and most fsspec backends;
# botocore's own errors from s3fs when the endpoint is down or refuses the keys.
_STORE_FAILURES: tuple[type[BaseException], ...] = (OSError, TimeoutError)
try:  # pragma: no cover - botocore comes with s3fs
    from botocore.exceptions import BotoCoreError, ClientError

    _STORE_FAILURES = (*_STORE_FAILURES, BotoCoreError, ClientError)
except ImportError:  # pragma: no cover
    pass

# Written objects are renamed into place from this suffix on a local disk; gc ignores nothing
# by suffix, so a partial file a crash left behind is swept like any unnamed object.
_PARTIAL = ".partial-"
# Reads stream in pieces of this many bytes.
READ_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object as a listing of the store sees it."""

    path: str
    size: int
    modified: datetime | None


class DataStore:
    """Reads and writes the objects under one root. Safe to share between threads."""

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.options = dict(options or {})
        filesystem, root = url_to_fs(url, **self.options)
        self.fs: fsspec.AbstractFileSystem = filesystem
        self.root = root.rstrip("/")
        protocol = filesystem.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        self.is_local = "file" in protocols or "local" in protocols
        if self.is_local:
            Path(self.root).mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        # Never the options: they may hold keys.
        return f"DataStore({self.url!r})"

    # --- names ------------------------------------------------------------------------------

    def full_path(self, path: str) -> str:
        """``path`` (relative, ``/``-separated) as the filesystem names it; for pyarrow."""
        relative = posixpath.normpath(path)
        if relative.startswith(("/", "..")) or relative == ".":
            raise ValueError(f"store paths are relative and stay under the root: {path!r}")
        return f"{self.root}/{relative}"

    def relative(self, full_path: str) -> str:
        """The inverse of ``full_path`` for a name a listing returned."""
        full_path = full_path.rstrip("/")
        root = self.root.lstrip("/") if not full_path.startswith("/") else self.root
        return full_path[len(root) :].lstrip("/")

    # --- writing ----------------------------------------------------------------------------

    @contextmanager
    def writer(self, path: str) -> Iterator[HashingWriter]:
        """Stream an object to ``path``; ``writer.stored()`` after the block names it.

        If the block raises, the object is not left behind (best effort: a crash still may,
        and then gc sweeps it). Raises ``StoreUnavailable`` when the store cannot be written.
        """
        target = self.full_path(path)
        staging = f"{target}{_PARTIAL}{uuid.uuid4().hex}" if self.is_local else target
        try:
            if self.is_local:
                self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
            sink = self.fs.open(staging, "wb")
        except _STORE_FAILURES as error:
            raise self._unavailable("write", path, error) from error
        writer = HashingWriter(sink, path)
        completed = False
        try:
            yield writer
            completed = True
        finally:
            try:
                if completed:
                    sink.close()
                    if self.is_local:
                        self.fs.mv(staging, target)
                else:
                    _discard(sink)
                    self._remove_quietly(staging)
            except _STORE_FAILURES as error:
                self._remove_quietly(staging)
                if completed:
                    raise self._unavailable("write", path, error) from error

    def put(self, path: str, data: bytes | bytearray | memoryview) -> StoredObject:
        """Write ``data`` as the whole object at ``path``."""
        with self.writer(path) as writer:
            view = memoryview(data)
            # In pieces, so a multi-GiB artifact is not copied whole into the upload buffer.
            for start in range(0, len(view), 64 * READ_CHUNK_BYTES):
                writer.write(view[start : start + 64 * READ_CHUNK_BYTES])
        return writer.stored()

    # --- reading ----------------------------------------------------------------------------

    @contextmanager
    def open(self, stored: StoredObject) -> Iterator[VerifyingReader]:
        """A reader over the object that raises ``ObjectCorrupt`` if it is not as recorded."""
        try:
            source = self.fs.open(self.full_path(stored.path), "rb")
        except FileNotFoundError as error:
            raise self._missing(stored) from error
        except _STORE_FAILURES as error:
            raise self._unavailable("read", stored.path, error) from error
        with VerifyingReader(source, stored) as reader:
            yield reader

    def check_size(self, stored: StoredObject) -> None:
        """Raise ``ObjectMissing`` unless the object is there, ``ObjectCorrupt`` unless it has
        the recorded size: from the store's own metadata (a stat, an S3 HEAD), no byte read.
        Not a check of its SHA-256, which every read makes."""
        full = self.full_path(stored.path)
        try:
            self.fs.invalidate_cache(full)  # s3fs may answer from a listing it cached earlier
            info = self.fs.info(full)
        except FileNotFoundError as error:
            raise self._missing(stored) from error
        except _STORE_FAILURES as error:
            raise self._unavailable("read", stored.path, error) from error
        if info.get("type") == "directory" or int(info.get("size") or 0) != stored.size:
            raise mismatch(stored)

    def get(self, stored: StoredObject) -> bytes:
        """The whole object, verified."""
        with self.open(stored) as reader:
            buffer = bytearray()
            try:
                while chunk := reader.read(16 * READ_CHUNK_BYTES):
                    buffer += chunk
            except _STORE_FAILURES as error:
                raise self._unavailable("read", stored.path, error) from error
            return bytes(buffer)

    def chunks(self, stored: StoredObject, size: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
        """The object's bytes in pieces, verified (the last piece raises if they differ)."""
        with self.open(stored) as reader:
            try:
                while chunk := reader.read(size):
                    yield chunk
            except _STORE_FAILURES as error:
                raise self._unavailable("read", stored.path, error) from error

    # --- listing and deleting ---------------------------------------------------------------

    def walk(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (all of them by default), in no particular order."""
        base = self.full_path(prefix) if prefix else self.root
        try:
            if not self.fs.exists(base):
                return
            found = self.fs.find(base, detail=True)
        except _STORE_FAILURES as error:
            raise self._unavailable("list", prefix or "/", error) from error
        for name, info in found.items():
            if info.get("type") == "directory":
                continue
            yield ObjectInfo(self.relative(name), int(info.get("size") or 0), _modified(info))

    def delete(self, path: str) -> None:
        """Remove the object at ``path``; nothing happens if it is not there."""
        try:
            self.fs.rm_file(self.full_path(path))
        except FileNotFoundError:
            pass
        except _STORE_FAILURES as error:
            raise self._unavailable("delete", path, error) from error

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under ``prefix`` (a dataset's parts, a model's files)."""
        for info in list(self.walk(prefix)):
            self.delete(info.path)

    def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the root can be listed (readiness, start-up)."""
        try:
            if self.is_local:
                Path(self.root).mkdir(parents=True, exist_ok=True)
            self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return  # an empty bucket prefix lists as missing; the bucket answered
        except _STORE_FAILURES as error:
            raise self._unavailable("reach", "/", error) from error

    # --- helpers ----------------------------------------------------------------------------

    def _remove_quietly(self, full_path: str) -> None:
        # Best effort: gc sweeps whatever is left.
        with contextlib.suppress(Exception):
            self.fs.rm_file(full_path)

    def _missing(self, stored: StoredObject) -> ObjectMissing:
        return ObjectMissing(
            stored.path,
            f"The stored object '{stored.path}' is missing from the data store ({self.url}); "
            "restore it from a backup, or delete what it belongs to and recreate it.",
        )

    def _unavailable(self, action: str, path: str, error: BaseException) -> StoreUnavailable:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return StoreUnavailable(
            f"The data store ({self.url}) could not {action} '{path}': {reason}. "
            "Try again shortly; if it persists, check COPPICE_STORE_URL and the store's health."
        )


def _discard(sink: Any) -> None:
    """Abandon a half-written object: an S3 upload is aborted, a local file closed."""
    try:
        if hasattr(sink, "discard"):
            sink.discard()
            # fsspec closes a buffered file when it is collected; a discarded one has no
            # buffer left to upload, so mark it closed now.
            sink.closed = True
        else:
            sink.close()
    except Exception:  # best effort
        pass


def _modified(info: Mapping[str, Any]) -> datetime | None:
    """An object's modification time from a listing (local: ``mtime``; S3: ``LastModified``)."""
    stamp = info.get("mtime", info.get("LastModified"))
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(stamp, int | float):
        return datetime.fromtimestamp(stamp, tz=UTC)
    return None


def store_from_settings(settings: Settings) -> DataStore:
    """The store ``settings`` configure (``COPPICE_STORE_URL``, ``COPPICE_STORE_OPTIONS``)."""
    return DataStore(settings.resolved_store_url, settings.store_options)
