"""Reading a dataset's parts back: verified, part by part, only the columns asked for.

A part in the data store is read whole and checked against its recorded size and SHA-256
before pyarrow parses it (a damaged part is an error naming it, never a wrong answer); memory
holds one part's bytes at a time. A part of a registered table is read where it lies, only
the columns asked for, after its size and modification stamp (or ETag) are checked against
what registration recorded: a source changed since is ``DatasetChanged``, never a silent fit on
different data.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from http import HTTPStatus
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from service.datasets.arrow_columns import ColumnCollector
from service.db.tables import ColumnKind, DatasetPartRecord
from service.errors import ServiceError
from service.models.artifacts import read_artifact
from service.store import DataStore, StoredObject


class DatasetChanged(ServiceError):
    """A registered table's source no longer matches what was registered."""

    # 409: the request is fine; the data it names no longer is what it was.
    status = HTTPStatus.CONFLICT
    code = "dataset_changed"


def source_stamp(info: dict[str, Any]) -> str | None:
    """What identifies a version of a file in a listing: its ETag (S3) or modification time."""
    for key in ("ETag", "etag"):
        if info.get(key):
            return str(info[key]).strip('"')
    for key in ("mtime", "LastModified", "last_modified", "modified"):
        if info.get(key) is not None:
            value = info[key]
            return value.isoformat() if hasattr(value, "isoformat") else repr(value)
    return None


def source_options(url: str, store: DataStore) -> dict[str, Any]:
    """Filesystem options for a source: the store's, when it is on the same kind of store
    (an S3 endpoint and its keys), none otherwise."""
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    store_protocol = store.url.split("://", 1)[0] if "://" in store.url else "file"
    return dict(store.options) if protocol == store_protocol else {}


def open_part(store: DataStore, part: DatasetPartRecord, *, verify: bool = True) -> pq.ParquetFile:
    """The part as a ``ParquetFile``, verified as the module's docstring says.

    ``verify=False`` (a part this process has just written and hashed) reads only what
    pyarrow asks for, the footer and the columns' pages, without checking the digest.
    """
    if part.sha256 is not None and not verify:
        return pq.ParquetFile(store.fs.open(store.full_path(part.path), "rb"))
    if part.sha256 is not None:
        # One buffer of the part's size, filled in place as it is verified: the part's bytes
        # are held once (store.get would join them and copy them again).
        data = read_artifact(store, StoredObject(part.path, part.size, part.sha256))
        return pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
    filesystem, path = check_source(store, part)
    return pq.ParquetFile(filesystem.open(path, "rb"))


def check_source(store: DataStore, part: DatasetPartRecord) -> tuple[Any, str]:
    """A registered part's filesystem and path, once its size and stamp are as registered."""
    filesystem, path = url_to_fs(part.path, **source_options(part.path, store))
    try:
        info = filesystem.info(path)
    except FileNotFoundError:
        raise DatasetChanged(
            f"The registered file '{part.path}' is gone; register the table again."
        ) from None
    if int(info.get("size") or 0) != part.size or source_stamp(info) != part.source_stamp:
        raise DatasetChanged(
            f"The registered file '{part.path}' has changed since it was registered "
            f"(size or modification stamp differ); register the table again to use the new data."
        )
    return filesystem, path


def read_columns(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    columns: Sequence[tuple[str, str]],
    n_rows: int,
    *,
    verify: bool = True,
) -> dict[str, Any]:
    """``{name: ColumnData}`` for ``(name, kind)`` pairs, read part by part."""
    collectors = [ColumnCollector(name, kind, n_rows) for name, kind in columns]
    names = [name for name, _ in columns]
    categorical = [name for name, kind in columns if kind == ColumnKind.CATEGORICAL]
    for part in parts:
        parquet = open_part(store, part, verify=verify)
        table = _read(parquet, names, categorical)
        for collector in collectors:
            collector.add(table.column(collector.name))
        del table
        parquet.close()
        del parquet
        release_part()
    return {collector.name: collector.finish() for collector in collectors}


def iter_part_tables(
    store: DataStore, parts: Sequence[DatasetPartRecord], names: Sequence[str] | None = None
) -> Iterator[pa.Table]:
    """Each part's table (the named columns, or all of them), first part first."""
    for part in parts:
        parquet = open_part(store, part)
        yield parquet.read(columns=list(names) if names is not None else None)


def _read(parquet: pq.ParquetFile, names: Sequence[str], categorical: Sequence[str]) -> pa.Table:
    # Categories as codes and a small dictionary per chunk: no Python string per cell.
    table = parquet.read(columns=list(names))
    if categorical:
        arrays = []
        for name in table.column_names:
            column = table.column(name)
            if name in categorical and not pa.types.is_dictionary(column.type):
                column = pa.chunked_array(
                    [chunk.dictionary_encode() for chunk in column.chunks],
                    type=pa.dictionary(pa.int32(), column.type),
                )
            arrays.append(column)
        table = pa.table(arrays, names=table.column_names)
    return table


def release_part() -> None:
    """Free a closed part's verified bytes now. A ``pyarrow.parquet.ParquetFile`` sits in a
    reference cycle (about 30 objects, pyarrow 26), so its last reference going does not free
    the buffer it reads, the garbage collector's next pass does: measured in
    ``benchmarks.fit_memory``, the next part's 110 MiB were then sometimes read while the
    previous part's were still held, +50 to +110 MiB at the fit's peak in some runs."""
    gc.collect()
