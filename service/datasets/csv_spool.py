"""A CSV upload spooled to disk as it arrives: hashed, and scanned for what pyarrow's reader
would read otherwise than Python's ``csv`` module (``csv_ingest`` says why it matters).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from service.datasets.formats import spool

if TYPE_CHECKING:
    from service.datasets.csv_live import LiveCsv

_OK_AROUND_QUOTES = np.array([ord(","), ord("\n"), ord("\r"), ord('"')], dtype=np.uint8)
# The bytes a quote may have beside it, as a table indexed by byte (a gather, not np.isin's sort).
_OK_AROUND = np.zeros(256, dtype=bool)
_OK_AROUND[_OK_AROUND_QUOTES] = True


@dataclass(slots=True)
class SpooledCsv:
    path: Path
    size: int
    sha256: str
    plain: bool  # pyarrow and Python's csv module read it alike, as far as the scan sees


class _Scan:
    """Lone carriage returns and quotes placed where only Python's reader would object.

    In a file both readers take alike, a quote with an even number of quotes before it opens a
    field (after a comma, a line end or the file's start) or is the second of a doubled quote;
    one with an odd number closes a field (a comma, a line end or the file's end after it) or
    is the first of a doubled quote. Anything else, and the file goes to Python's reader.
    """

    def __init__(self) -> None:
        self.plain = True
        self._inside = False  # an odd number of quotes so far
        self._previous: int | None = None  # the last byte of the previous chunk
        self._check_next = False  # the previous chunk ended with a closing quote or a CR
        self._cr_pending = False

    def add(self, chunk: bytes) -> None:
        if not self.plain or not chunk:
            return
        data = np.frombuffer(chunk, dtype=np.uint8)
        if self._cr_pending and data[0] != ord("\n"):
            self.plain = False
        if self._check_next and data[0] not in _OK_AROUND_QUOTES:
            self.plain = False
        # bytes.find is a memchr, many times faster than a NumPy pass: most files have no
        # carriage return at all, and many no quote.
        self._cr_pending = False
        if chunk.find(b"\r") >= 0:
            returns = np.flatnonzero(data == ord("\r"))
            inner = returns[returns < data.size - 1]
            if inner.size and np.any(data[inner + 1] != ord("\n")):
                self.plain = False
            self._cr_pending = bool(returns.size) and returns[-1] == data.size - 1
        if chunk.find(b'"') < 0:
            self._check_next = False
            self._previous = int(data[-1])
            return
        quotes = np.flatnonzero(data == ord('"'))
        self._check_next = False
        if quotes.size:
            # Every other quote opens, from the first if an even number came before it.
            first_closing = 0 if self._inside else 1
            opening = quotes[1 - first_closing :: 2]
            closing = quotes[first_closing::2]
            before = data[np.maximum(opening - 1, 0)]
            at_start = opening[:1] == 0  # only the first quote can be the chunk's first byte
            if at_start.any():
                if self._previous is None:
                    before[0] = ord(",")  # the file's start
                else:
                    before[0] = self._previous
            last = closing[-1:] == data.size - 1
            after = data[np.minimum(closing + 1, data.size - 1)]
            if last.any():
                after[-1] = ord(",")  # whatever the next chunk starts with: checked then
            if not (_OK_AROUND[before].all() and _OK_AROUND[after].all()):
                self.plain = False
            self._check_next = bool(last.any())
            self._inside ^= bool(quotes.size % 2)
        self._previous = int(data[-1])

    def finish(self) -> bool:
        return self.plain and not self._inside


def spool_csv(
    chunks: Iterable[bytes], directory: Path, *, live: LiveCsv | None = None
) -> SpooledCsv:
    """Write the upload to a temporary file in ``directory``; the caller deletes it.
    ``live`` (``csv_live``) is told of the spool's progress, and may parse it meanwhile."""
    scan = _Scan()
    try:
        spooled = spool(
            chunks, directory, observe=scan.add, progress=live.progress if live else None
        )
    except BaseException:
        if live is not None:
            live.close()
        raise
    if live is not None:
        live.spool_ended()
    return SpooledCsv(spooled.path, spooled.size, spooled.sha256, scan.finish())
