"""A dataset's table streamed back as one Parquet or CSV file, part by part.

Parquet: pyarrow's ``ParquetWriter`` writes into a ``_Drain``, whose bytes the response sends
and forgets after every row group: memory holds one part's table and the bytes of one row
group, never the file. Parquet never seeks back (its footer comes last), so a forward-only sink
is all it needs. A dataset of one part in the store is sent as that part's bytes, verified as
they go.

CSV: pyarrow's ``csv.write_csv`` turns slices of ``CSV_ROWS`` rows into text on
``CSV_THREADS`` threads (it releases the GIL; formatting doubles as their shortest round-trip
text is nearly all of a download's work), sent in order: the bytes are those one
``CSVWriter`` would write, header first. At most ``CSV_THREADS + 1`` slices' texts are in
flight. Categories are their strings and missing cells null (Parquet) or empty (CSV).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from service.datasets.part_reader import check_source, iter_part_tables
from service.datasets.parts import string_columns
from service.db.tables import DatasetPartRecord
from service.store import DataStore, StoredObject


class DownloadFormat(StrEnum):
    PARQUET = "parquet"
    CSV = "csv"


# Rows formatted at once (about 6 MiB of text for ten float columns), and the threads doing it.
CSV_ROWS = 1 << 15
CSV_THREADS = 2
_NO_HEADER = pa_csv.WriteOptions(include_header=False)

MEDIA_TYPES = {
    DownloadFormat.PARQUET: "application/vnd.apache.parquet",
    DownloadFormat.CSV: "text/csv; charset=utf-8",
}


class _Drain:
    """A write-only file whose bytes are taken out as they come."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._size = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buffer += data
        self._size += len(data)
        return len(data)

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def check_sources(store: DataStore, parts: Sequence[DatasetPartRecord]) -> None:
    """Raise ``DatasetChanged`` unless every registered part is as registered."""
    for part in parts:
        if part.sha256 is None:
            check_source(store, part)


def stream(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    schema: pa.Schema,
    fmt: DownloadFormat,
) -> Iterator[bytes]:
    """The table's bytes in ``fmt``, in pieces."""
    if fmt == DownloadFormat.PARQUET and len(parts) == 1 and parts[0].sha256 is not None:
        part = parts[0]
        assert part.sha256 is not None
        yield from store.chunks(StoredObject(part.path, part.size, part.sha256))
        return
    if fmt == DownloadFormat.PARQUET:
        yield from _parquet(store, parts, schema, _Drain())
    else:
        yield from _csv(store, parts, schema)


def _parquet(
    store: DataStore, parts: Sequence[DatasetPartRecord], schema: pa.Schema, drain: _Drain
) -> Iterator[bytes]:
    writer = pq.ParquetWriter(
        drain, schema, compression="zstd", use_dictionary=string_columns(schema)
    )
    for table in _tables(store, parts, schema):
        for batch in table.to_batches(max_chunksize=1 << 17):
            writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=schema))
            yield drain.take()
    writer.close()
    yield drain.take()


def _csv(
    store: DataStore, parts: Sequence[DatasetPartRecord], schema: pa.Schema
) -> Iterator[bytes]:
    plain = pa.schema([pa.field(f.name, _plain(f.type)) for f in schema])
    yield _csv_text(plain.empty_table(), header=True)
    with ThreadPoolExecutor(CSV_THREADS, thread_name_prefix="csv-download") as pool:
        pending: deque[Future[bytes]] = deque()
        try:
            for table in _tables(store, parts, schema):
                for batch in table.to_batches(max_chunksize=CSV_ROWS):
                    columns = [
                        column.cast(field.type) if column.type != field.type else column
                        for column, field in zip(batch.columns, plain, strict=True)
                    ]
                    rows = pa.RecordBatch.from_arrays(columns, schema=plain)
                    pending.append(pool.submit(_csv_text, rows))
                    if len(pending) > CSV_THREADS:
                        yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # a client gone: nothing more is formatted
                future.cancel()


def _csv_text(rows: pa.RecordBatch | pa.Table, *, header: bool = False) -> bytes:
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(rows, sink, None if header else _NO_HEADER)
    text: bytes = sink.getvalue().to_pybytes()
    return text


def _tables(
    store: DataStore, parts: Sequence[DatasetPartRecord], schema: pa.Schema
) -> Iterator[pa.Table]:
    # A registered table's files hold their own types (integers, large strings): each part is
    # cast to the dataset's (float64 numbers, strings).
    for table in iter_part_tables(store, parts, schema.names):
        yield table if table.schema == schema else table.cast(schema)


def _plain(kind: pa.DataType) -> pa.DataType:
    # The CSV writer takes no dictionaries: categories are written as their strings.
    return kind.value_type if pa.types.is_dictionary(kind) else kind
