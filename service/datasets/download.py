"""A dataset's table streamed back as one Parquet or CSV file, part by part.

The writers (pyarrow's ``ParquetWriter`` and ``csv.CSVWriter``) write into a ``_Drain``, whose
bytes the response sends and forgets after every row group: memory holds one part's table and
the bytes of one row group, never the file. Parquet never seeks back (its footer comes last),
so a forward-only sink is all it needs. Categories are their strings and missing cells null
(Parquet) or empty (CSV). A dataset of one part in the store is sent as that part's bytes,
verified as they go.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
    drain = _Drain()
    if fmt == DownloadFormat.PARQUET:
        yield from _parquet(store, parts, schema, drain)
    else:
        yield from _csv(store, parts, schema, drain)


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
    store: DataStore, parts: Sequence[DatasetPartRecord], schema: pa.Schema, drain: _Drain
) -> Iterator[bytes]:
    plain = pa.schema([pa.field(f.name, _plain(f.type)) for f in schema])
    writer = pa_csv.CSVWriter(drain, plain)
    for table in _tables(store, parts, schema):
        for batch in table.to_batches(max_chunksize=1 << 16):
            columns = [
                column.cast(field.type) if column.type != field.type else column
                for column, field in zip(batch.columns, plain, strict=True)
            ]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=plain))
            yield drain.take()
    writer.close()
    yield drain.take()


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
