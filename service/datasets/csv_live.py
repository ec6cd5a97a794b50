"""A large CSV upload parsed while it arrives: ``ingest_csv``'s first pass behind the spool.

A CSV upload is spooled to disk as it arrives (``csv_spool``: hashed and scanned on the way)
and read from the spool. Once the spool passes ``LIVE_BYTES``, a thread of its own starts
reading it from its first byte as it is written (``_GrowingFile``: a read waits until the
bytes it asks for are written, or the spool has ended), and runs the pass ``ingest_csv``
would run on the finished spool, its parts written on the pass's own writing thread; the
request's thread goes on receiving, hashing, scanning and writing the spool. Receiving and
parsing then overlap instead of following each other.

The pass reads the same bytes, in the same blocks, with the same reader, the same columns'
state and the same store as a pass over the finished spool, so what it gives (parts, kinds,
summaries, a column turning categorical late) is what that pass would give. When the spool
ends, ``ingest_csv`` decides with what only the end tells (``take``): if the scan found
something the two CSV readers read differently, or the forced-categorical names are not the
ones the pass started with (a form may send them after the file), the pass's parts are
deleted and the finished spool is read as before; otherwise its outcome (a table, a column
found to turn categorical late, pyarrow's refusal) is ``ingest_csv``'s first. Anything else
that stops the pass (an error in it, or a spool that failed: a 413, a client gone) deletes
what it wrote; the finished spool is then read as if the pass had never run, so its errors,
if the spool ends, are the ones the reader meets there.

A smaller upload never starts the thread (see ``THREADED_BYTES`` in ``csv_ingest``: a thread
costs a fixed 20-50 MiB, near such an upload's size).
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from service.datasets import csv_blocks
from service.datasets.csv_blocks import InexactRead, TypedRefused
from service.datasets.csv_ingest import (
    THREADED_BLOCK_BYTES,
    THREADED_BYTES,
    ColumnState,
    PassOutcome,
    numeric_so_far,
    read_pass,
)
from service.store import DataStore

LIVE_BYTES = THREADED_BYTES


class _SpoolFailed(Exception):
    """The spool stopped before its end: the pass has nothing to read."""


class _Growth:
    """How much of the spool is written, and whether it has ended."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._size = 0
        self._ended = False
        self._failed = False

    def wrote(self, size: int) -> None:
        with self._changed:
            self._size = size
            self._changed.notify_all()

    def end(self, *, failed: bool) -> None:
        with self._changed:
            self._ended = True
            self._failed = self._failed or failed
            self._changed.notify_all()

    def wait_for(self, size: int) -> int:
        """Bytes written once there are ``size`` of them or the spool has ended."""
        with self._changed:
            while self._size < size and not self._ended:
                self._changed.wait()
            if self._failed:
                raise _SpoolFailed
            return self._size


class _GrowingFile(io.RawIOBase):
    """The spool, read from its start while it is written: a read returns the bytes asked
    for once they are written, fewer only at the spool's end.

    pyarrow's CSV reader reads ahead on an I/O thread of its own, and goes on doing so after
    the pass has stopped wanting blocks (``typed_columns`` reads one and leaves). Closing the
    descriptor while that thread is inside a read would let the next file opened take the
    same descriptor number and lose the bytes the stray read takes from it (a fuzzed upload
    came out with rows missing). So a read and ``close`` exclude each other, and a read
    after ``close`` is the end of the file.
    """

    def __init__(self, path: Path, growth: _Growth) -> None:
        self._file = path.open("rb", buffering=0)
        self._growth = growth
        self._position = 0
        self._reading = threading.Lock()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if self.closed:
            return 0
        wanted = len(buffer)
        available = self._growth.wait_for(self._position + wanted) - self._position
        view = memoryview(buffer)[: max(0, min(wanted, available))]
        done = 0
        with self._reading:
            if self._file.closed:
                return 0
            while done < len(view):  # a regular file's read may be short
                read = self._file.readinto(view[done:])
                if not read:
                    break
                done += read
        self._position += done
        return done

    def close(self) -> None:
        with self._reading:
            self._file.close()
        super().close()


class LiveCsv:
    """The first pass of one CSV upload, started once its spool passes ``start_bytes``.

    ``progress`` is the spool's callback; ``spool_ended`` is called once the spool is
    complete; ``take`` (``ingest_csv``) waits for the pass and hands its outcome over;
    ``close`` (always, last) stops a pass still running and deletes parts nobody took.
    """

    def __init__(
        self,
        dataset_id: str,
        *,
        store: DataStore,
        categorical: Callable[[], Sequence[str]],
        max_columns: int,
        start_bytes: int | None = None,
        block_bytes: int = THREADED_BLOCK_BYTES,
        threaded: bool = True,
    ) -> None:
        self.dataset_id = dataset_id
        self._store = store
        self._categorical = categorical
        self._max_columns = max_columns
        self._start_bytes = LIVE_BYTES if start_bytes is None else start_bytes
        self._block_bytes = block_bytes
        self._threaded = threaded
        self._growth = _Growth()
        self._thread: threading.Thread | None = None
        self._forced: set[str] = set()
        self._outcome: PassOutcome | None = None
        self._taken = False

    @property
    def started(self) -> bool:
        return self._thread is not None

    def progress(self, path: Path, size: int) -> None:
        """The spool at ``path`` holds ``size`` bytes, flushed."""
        self._growth.wrote(size)
        if self._thread is None and size >= self._start_bytes:
            # The names forced so far: a form's field sent before the file, or the query's.
            self._forced = set(self._categorical())
            self._thread = threading.Thread(
                target=self._run, args=(path,), name="csv-live", daemon=True
            )
            self._thread.start()

    def spool_ended(self) -> None:
        self._growth.end(failed=False)

    def take(self, forced: set[str], *, plain: bool) -> PassOutcome | None:
        """The pass's outcome, if the finished spool would be read as the pass read it
        (``plain``, and the same forced names); None otherwise (its parts deleted)."""
        if self._thread is None:
            return None
        self._thread.join()
        outcome, self._outcome = self._outcome, None
        if outcome is None:
            return None
        if plain and forced == self._forced:
            self._taken = True
            return outcome
        _delete(self._store, outcome)
        return None

    def close(self) -> None:
        """Stop the pass if it still runs (the spool failed) and delete what nobody took."""
        self._growth.end(failed=True)
        if self._thread is not None:
            self._thread.join()
        outcome, self._outcome = self._outcome, None
        if outcome is not None and not self._taken:
            _delete(self._store, outcome)

    def _run(self, path: Path) -> None:
        try:
            with _GrowingFile(path, self._growth) as header_source:
                names = csv_blocks.read_header_of(
                    _chunks(header_source), max_columns=self._max_columns
                )
            columns = [ColumnState(name, name in self._forced) for name in names]
            outcome = self._pass(path, names, columns, typed=True)
            if outcome is None:  # a column read as numbers met a text: all as text
                columns = [ColumnState(name, name in self._forced) for name in names]
                outcome = self._pass(path, names, columns, typed=False)
            self._outcome = outcome
        except BaseException:
            # read_pass deleted what it wrote; the finished spool is read again and meets the
            # same error, if the spool ends at all.
            self._outcome = None

    def _pass(
        self, path: Path, names: list[str], columns: list[ColumnState], *, typed: bool
    ) -> PassOutcome | None:
        """One pass over the growing spool, as ``ingest_csv`` runs it; None when reading
        columns as numbers was refused."""
        numeric: set[str] = set()
        if typed:
            with _GrowingFile(path, self._growth) as first:
                numeric = csv_blocks.typed_columns(
                    first, names, self._block_bytes, numeric_so_far(columns)
                )
        with _GrowingFile(path, self._growth) as source:
            blocks = csv_blocks.fast_blocks_of(source, names, self._block_bytes, numeric)
            try:
                table = read_pass(
                    blocks, names, columns, self._store, self.dataset_id, threaded=self._threaded
                )
            except TypedRefused:
                return None
            except InexactRead as error:
                return PassOutcome(columns, None, error, typed=typed)
        return PassOutcome(columns, table, None, typed=typed)


def _chunks(source: io.RawIOBase) -> Iterator[bytes]:
    while chunk := source.read(csv_blocks.READ_BYTES):
        yield chunk


def _delete(store: DataStore, outcome: PassOutcome) -> None:
    if outcome.table is None:
        return
    for part in outcome.table.parts:
        with contextlib.suppress(Exception):  # best effort: what is left, store gc sweeps
            store.delete(part.stored.path)
