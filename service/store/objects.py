"""A stored object's identity, and the streams that compute and check it.

Every object in the store is named by a SQL row holding its path, size and SHA-256
(``StoredObject``). ``HashingWriter`` computes both as bytes are written, so a streamed upload
is hashed in the one pass that writes it; ``VerifyingReader`` checks them as bytes are read,
and raises at the end of the object rather than hand a caller bytes that are not the ones
recorded (a truncated copy, a bit flip on disk, a file replaced by hand).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import IO, Any

from service.store.errors import ObjectCorrupt


@dataclass(frozen=True, slots=True)
class StoredObject:
    """Where an object is (``path``, relative to the store's root, ``/``-separated) and what
    its bytes are (``size``, ``sha256`` as lowercase hex)."""

    path: str
    size: int
    sha256: str


class HashingWriter:
    """Counts and hashes every byte written through it to ``sink``."""

    def __init__(self, sink: IO[bytes], path: str) -> None:
        self._sink = sink
        self._path = path
        self._digest = hashlib.sha256()
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sink.write(data)
        self._digest.update(data)
        self._size += len(data)
        return len(data)

    @property
    def size(self) -> int:
        return self._size

    def stored(self) -> StoredObject:
        """What has been written so far, as the row that will name it."""
        return StoredObject(self._path, self._size, self._digest.hexdigest())

    # pyarrow's ParquetWriter and other writers ask these of a file-like sink.
    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        self._sink.flush()

    @property
    def closed(self) -> bool:
        return bool(self._sink.closed)

    def writable(self) -> bool:
        return True


class VerifyingReader:
    """Reads ``source`` to its end, checking the bytes against ``expected`` on the way.

    Raises ``ObjectCorrupt`` naming the object when it holds more bytes than recorded (as soon
    as it passes the size) or when the whole object's size or digest differs (at its end).
    """

    def __init__(self, source: IO[bytes], expected: StoredObject) -> None:
        self._source = source
        self._expected = expected
        self._digest = hashlib.sha256()
        self._size = 0
        self._checked = False

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self._digest.update(data)
        self._size += len(data)
        if self._size > self._expected.size:
            raise self._mismatch()
        if not data or (size < 0) or self._size == self._expected.size:
            self._check_end()
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _check_end(self) -> None:
        if self._checked:
            return
        if self._size == self._expected.size and self._source.read(1):
            self._size += 1
        if self._size != self._expected.size or self._digest.hexdigest() != self._expected.sha256:
            raise self._mismatch()
        self._checked = True

    def _mismatch(self) -> ObjectCorrupt:
        return mismatch(self._expected)

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> VerifyingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mismatch(expected: StoredObject) -> ObjectCorrupt:
    """The error for an object whose bytes are not the ones ``expected`` records."""
    return ObjectCorrupt(
        expected.path,
        f"The stored object '{expected.path}' does not match its recorded size "
        f"({expected.size} bytes) and SHA-256; it was changed or damaged after it was "
        "written. Restore it from a backup, or delete what it belongs to and recreate it.",
    )
