"""A dataset's rows as Parquet parts in the data store, written as they arrive.

Layout (``notes/distributed-data.md``): ``datasets/<id>/part-NNNNN.parquet``, each part at
most about ``PART_BYTES`` of uncompressed data, made of row groups of one fixed number of rows
(``row_group_rows``, a power of two, 2^17 unless the rows are wide), and every part but the
last holds the same number of row groups. A part's global row offset is in SQL, so a reader
(a Dask worker) finds rows by position without opening the parts before them, and the row
groups are the blocks that make sampling independent of how the parts are spread.

Column types in the parts: numeric columns are float64 with null for missing; categorical
ones are strings with null for missing, which Parquet dictionary-encodes in each row group
(falling back to plain pages for a column of mostly unique texts), so a part read back, or
downloaded, gives the categories' strings without SQL's help; readers ask pyarrow for them
as dictionary arrays (``read_dictionary``), so codes come without building Python strings.

``PartWriter`` takes Arrow record batches of any size, cuts them into row groups, and streams
each part to the store through the store's hashing writer: memory holds one row group, never a
part or the table. Parts are written before any row names them (the store's rule); ``abort``
removes what was written, and a crash leaves objects no row names, which ``store gc`` sweeps.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from service.store import DataStore, StoredObject
from service.store.objects import HashingWriter

# Uncompressed bytes a part holds at most (about; a single row group may exceed it).
PART_BYTES = 128 * 1024 * 1024
# Row-group sizes: the largest power of two from MAX down to MIN whose group fits GROUP_BYTES.
MAX_ROW_GROUP_ROWS = 1 << 17
MIN_ROW_GROUP_ROWS = 1 << 10
GROUP_BYTES = 32 * 1024 * 1024
CATEGORY_TYPE = pa.string()
NUMERIC_TYPE = pa.float64()


def part_path(dataset_id: str, index: int) -> str:
    """Where part ``index`` of an uploaded dataset lives in the store."""
    return f"datasets/{dataset_id}/part-{index:05d}.parquet"


def dataset_prefix(dataset_id: str) -> str:
    return f"datasets/{dataset_id}/"


@dataclass(frozen=True, slots=True)
class WrittenPart:
    """A part as the row that will name it: which rows, and the stored object."""

    index: int
    row_offset: int
    n_rows: int
    stored: StoredObject


def layout(row_bytes: float) -> tuple[int, int]:
    """``(row_group_rows, groups_per_part)`` for rows of about ``row_bytes`` bytes each."""
    rows = MAX_ROW_GROUP_ROWS
    while rows > MIN_ROW_GROUP_ROWS and rows * row_bytes > GROUP_BYTES:
        rows //= 2
    groups = max(1, int(PART_BYTES // max(1.0, rows * row_bytes)))
    return rows, groups


def row_bytes_of(batch: pa.RecordBatch) -> float:
    """Uncompressed bytes a row of ``batch`` takes (at least 1)."""
    if batch.num_rows == 0:
        return float(max(1, 8 * batch.num_columns))
    size: float = batch.nbytes / batch.num_rows
    return max(1.0, size)


class PartWriter:
    """Writes record batches of one schema as a dataset's parts; ``finish`` lists them."""

    def __init__(
        self,
        store: DataStore,
        dataset_id: str,
        schema: pa.Schema,
        *,
        row_group_rows: int | None = None,
        groups_per_part: int | None = None,
        on_group: Callable[[pa.Table], None] | None = None,
        first_index: int = 0,
        first_row: int = 0,
    ) -> None:
        """``on_group`` sees each row group once it is written (the column summaries are
        merged there: a row group of rows at a time, the rows already in memory).
        ``first_index`` and ``first_row``: the first part's number and global row offset, for
        a writer that writes one stretch of a dataset's parts (a Dask worker scoring a part
        of a batch prediction's input)."""
        self._on_group = on_group
        self._first_index = first_index
        self._first_row = first_row
        self._store = store
        self._dataset_id = dataset_id
        self.schema = schema
        self._group_rows = row_group_rows
        self._groups_per_part = groups_per_part
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._parts: list[WrittenPart] = []
        self._rows_written = 0
        # The part being written: its store writer (a context manager), sink and Parquet writer.
        self._context: AbstractContextManager[HashingWriter] | None = None
        self._sink: HashingWriter | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._part_rows = 0
        self._part_groups = 0

    @property
    def n_rows(self) -> int:
        return self._rows_written + self._pending_rows

    @property
    def row_group_rows(self) -> int:
        return self._group_rows or MAX_ROW_GROUP_ROWS

    def write(self, batch: pa.RecordBatch) -> None:
        """Add rows; full row groups go to the store at once."""
        if batch.num_rows == 0:
            return
        if batch.schema != self.schema:
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        if self._group_rows is None:
            rows, groups = layout(row_bytes_of(batch))
            self._group_rows = rows
            self._groups_per_part = self._groups_per_part or groups
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= self.row_group_rows:
            self._flush_group(self.row_group_rows)

    def finish(self) -> list[WrittenPart]:
        """Write what is left and close the last part; the parts, first to last."""
        if self._pending_rows:
            self._flush_group(self._pending_rows)
        self._close_part()
        return list(self._parts)

    def abort(self) -> None:
        """Give up: the part in progress is discarded and the finished ones deleted."""
        if self._context is not None:
            context, self._context = self._context, None
            # Best effort, as below: what is left, store gc sweeps.
            with contextlib.suppress(Exception):
                context.__exit__(RuntimeError, RuntimeError("aborted"), None)
        for part in self._parts:
            with contextlib.suppress(Exception):
                self._store.delete(part.stored.path)
        self._parts.clear()

    def _flush_group(self, n_rows: int) -> None:
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        group, rest = table.slice(0, n_rows), table.slice(n_rows)
        self._pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows
        if self._parquet is None:
            self._open_part()
        assert self._parquet is not None
        # One row group of exactly n_rows, whatever the batches' sizes were.
        self._parquet.write_table(group, row_group_size=n_rows)
        if self._on_group is not None:
            # After the write: its encoding buffers are gone by now, so the peaks do not add.
            self._on_group(group)
        del group
        self._part_rows += n_rows
        self._part_groups += 1
        if self._part_groups >= (self._groups_per_part or 1):
            self._close_part()

    def _open_part(self) -> None:
        path = part_path(self._dataset_id, self._first_index + len(self._parts))
        context = self._store.writer(path)
        self._sink = context.__enter__()
        self._context = context
        self._parquet = pq.ParquetWriter(
            self._sink,
            self.schema,
            compression="zstd",
            # Dictionaries for the categorical columns only: tried on float columns of
            # mostly distinct values, they cost 5x the write time before falling back.
            use_dictionary=string_columns(self.schema),
            # Statistics let a reader (and Dask) skip row groups by value.
            write_statistics=True,
        )

    def _close_part(self) -> None:
        if self._parquet is None:
            return
        parquet, self._parquet = self._parquet, None
        context, self._context = self._context, None
        sink, self._sink = self._sink, None
        assert context is not None and sink is not None
        try:
            parquet.close()
        except BaseException as error:
            context.__exit__(type(error), error, error.__traceback__)
            raise
        context.__exit__(None, None, None)
        self._parts.append(
            WrittenPart(
                self._first_index + len(self._parts),
                self._first_row + self._rows_written,
                self._part_rows,
                sink.stored(),
            )
        )
        self._rows_written += self._part_rows
        self._part_rows = 0
        self._part_groups = 0


def string_columns(schema: pa.Schema) -> list[str]:
    """The columns worth dictionary-encoding: the categorical (string) ones."""
    return [field.name for field in schema if not pa.types.is_floating(field.type)]


def iter_batches(table: pa.Table, rows: int) -> Iterator[pa.RecordBatch]:
    """``table`` as record batches of at most ``rows`` rows."""
    yield from table.to_batches(max_chunksize=rows)


class PartWriterThread:
    """A ``PartWriter`` fed from another thread, so that Parquet encoding and the summaries
    of one row group run while a CSV parser reads the next blocks (pyarrow and NumPy release
    the GIL in both), as ``pyarrow.csv.read_csv`` keeps two cores busy. At most
    ``QUEUED_BLOCKS`` blocks wait, so what is in flight is the writer's row group and two
    blocks, whatever the file's size. An error in the thread is raised in the caller at its
    next ``write`` or at ``finish``; after one, the thread only drains the queue."""

    QUEUED_BLOCKS = 2

    def __init__(self, writer: PartWriter) -> None:
        self.writer = writer
        self.schema = writer.schema
        self._queue: queue.Queue[pa.RecordBatch | None] = queue.Queue(self.QUEUED_BLOCKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="csv-parts", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self.writer.write(batch)
                except BaseException as error:  # handed to the parsing thread
                    self._error = error
            del batch

    def write(self, batch: pa.RecordBatch) -> None:
        self._raise()
        self._queue.put(batch)

    def finish(self) -> list[WrittenPart]:
        self._stop()
        self._raise()
        return self.writer.finish()

    def abort(self) -> None:
        self._stop()
        self.writer.abort()

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error
