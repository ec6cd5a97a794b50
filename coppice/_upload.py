"""What ``Client.upload`` sends for each kind of table, never holding a second copy of it.

A CSV file is read from disk a chunk at a time; a DataFrame or an array is written as CSV a
slice of rows at a time while the request is sent; records, already Python objects, go as
JSON. Columns that are not numbers in the caller's table (strings, booleans, pandas
categoricals) are named in ``categorical``, so the server keeps them as categories even where
every value looks like a number (``"007"`` stays ``"007"``).
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coppice._json import JSON_HEADERS, json_bytes
from coppice._multipart import streaming_form

# Bytes read from a CSV file per chunk, and rows written per CSV slice of a table: large
# enough that per-chunk costs vanish, small enough that a slice is a few MiB at most.
FILE_CHUNK_BYTES = 1 << 20
ROWS_PER_SLICE = 10_000
# Rows of a DataFrame per Parquet row group sent.
PARQUET_ROWS_PER_SLICE = 16_384


@dataclass
class UploadRequest:
    """Keyword arguments for ``httpx.Client.request`` that upload one table."""

    kwargs: dict[str, Any] = field(default_factory=dict)


def upload_request(
    data: Any,
    *,
    name: str | None,
    categorical: Sequence[str] | None,
    columns: Sequence[str] | None,
) -> UploadRequest:
    """The request for ``data``: a CSV path, a DataFrame, a 2-D array or a list of records."""
    forced = list(categorical or [])
    if isinstance(data, str | os.PathLike):
        return _file(Path(data), name, forced)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(data, pandas.DataFrame):
        as_parquet = _parquet_frame(data, name, forced)
        if as_parquet is not None:
            return as_parquet
        names = [str(column) for column in data.columns]
        kinds = [_pandas_is_categorical(data[column]) for column in data.columns]
        return _csv_table(names, kinds, _dataframe_slices(data), name, forced)
    if isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise ValueError(f"an array to upload must be 2-D, not {data.ndim}-D")
        if columns is None or len(columns) != data.shape[1]:
            raise ValueError(
                f"an array needs columns=[...] naming its {data.shape[1]} columns"
                + ("" if columns is None else f" (got {len(columns)} names)")
            )
        kinds = [_array_column_is_categorical(data[:, j]) for j in range(data.shape[1])]
        return _csv_table([str(c) for c in columns], kinds, _array_slices(data), name, forced)
    if isinstance(data, Sequence) and all(isinstance(row, Mapping) for row in data):
        body: dict[str, Any] = {"records": list(data)}
        if name is not None:
            body["name"] = name
        if forced:
            body["categorical"] = forced
        return UploadRequest({"content": json_bytes(body), "headers": JSON_HEADERS})
    raise TypeError(
        "upload takes a CSV path, a pandas DataFrame, a 2-D NumPy array with columns=[...], "
        f"or a list of records (dicts); got {type(data).__name__}"
    )


def _file(path: Path, name: str | None, forced: list[str]) -> UploadRequest:
    """A file as it is on disk: the server tells CSV, Parquet and Arrow apart by its name
    (``.parquet``, ``.arrow``, ``.feather``) or its first bytes."""
    size = path.stat().st_size

    def chunks() -> Iterator[bytes]:
        with path.open("rb") as file:
            while chunk := file.read(FILE_CHUNK_BYTES):
                yield chunk

    return _form(path.name, chunks(), size, name, forced)


def _parquet_frame(frame: Any, name: str | None, forced: list[str]) -> UploadRequest | None:
    """A DataFrame as Parquet, written a slice of rows at a time while the request is sent
    (one slice's Arrow arrays and one row group's bytes in memory); None without pyarrow.

    Columns are typed as the CSV path would have them: booleans and other non-numeric
    columns become strings (``True``/``False`` stay categories, as before), numbers float64.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    names = [str(column) for column in frame.columns]
    textual = [_pandas_is_categorical(frame[column]) for column in frame.columns]
    schema = pa.schema(
        [
            pa.field(n, pa.string() if t else pa.float64())
            for n, t in zip(names, textual, strict=True)
        ]
    )

    def chunks() -> Iterator[bytes]:
        sink = _Drain()
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for start in range(0, len(frame), PARQUET_ROWS_PER_SLICE):
                part = frame.iloc[start : start + PARQUET_ROWS_PER_SLICE]
                arrays = [
                    _arrow_column(part[column], is_text)
                    for column, is_text in zip(frame.columns, textual, strict=True)
                ]
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                yield sink.take()
        yield sink.take()

    return _form(f"{name or 'table'}.parquet", chunks(), None, name, forced)


def _arrow_column(series: Any, is_text: bool) -> Any:
    import pyarrow as pa

    if is_text:
        texts = series.astype(str).where(series.notna(), None)
        return pa.array(texts, type=pa.string(), from_pandas=True)
    return pa.array(series, from_pandas=True).cast(pa.float64())


class _Drain:
    """A write-only file whose bytes are taken out as they are written (a request body)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._size = 0
        self.closed = False

    def write(self, data: Any) -> int:
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


def _csv_table(
    names: list[str],
    categorical_kinds: list[bool],
    slices: Iterator[bytes],
    name: str | None,
    forced: list[str],
) -> UploadRequest:
    forced = forced + [n for n, cat in zip(names, categorical_kinds, strict=True) if cat]
    header = _csv_line(names)

    def chunks() -> Iterator[bytes]:
        yield header
        yield from slices

    return _form(f"{name or 'table'}.csv", chunks(), None, name, list(dict.fromkeys(forced)))


def _form(
    filename: str, chunks: Iterator[bytes], size: int | None, name: str | None, forced: list[str]
) -> UploadRequest:
    fields = {}
    if name is not None:
        fields["name"] = name
    if forced:
        fields["categorical"] = ",".join(forced)
    form = streaming_form(fields, "file", filename, chunks, size)
    return UploadRequest({"content": form.chunks, "headers": form.headers})


def _csv_line(cells: Sequence[Any]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue().encode()


def _pandas_is_categorical(column: Any) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return bool(is_bool_dtype(column.dtype) or not is_numeric_dtype(column.dtype))


def _dataframe_slices(frame: Any) -> Iterator[bytes]:
    # pandas writes floats with full precision and missing values as empty cells.
    for start in range(0, len(frame), ROWS_PER_SLICE):
        text = frame.iloc[start : start + ROWS_PER_SLICE].to_csv(
            header=False, index=False, lineterminator="\n"
        )
        yield text.encode()


def _array_column_is_categorical(column: np.ndarray) -> bool:
    if column.dtype.kind in "iuf":
        return False
    if column.dtype.kind != "O":
        return True  # strings, booleans, dates: categories
    # Numbers (Python's or NumPy's) and None are numeric cells; booleans are categories.
    return any(
        isinstance(value, bool | np.bool_)
        or not (value is None or isinstance(value, int | float | np.number))
        for value in column
    )


def _array_slices(array: np.ndarray) -> Iterator[bytes]:
    for start in range(0, array.shape[0], ROWS_PER_SLICE):
        buffer = io.StringIO()
        # Python floats print as the shortest text that reads back the same; NaN as "nan",
        # which the server reads as missing.
        csv.writer(buffer, lineterminator="\n").writerows(
            array[start : start + ROWS_PER_SLICE].tolist()
        )
        yield buffer.getvalue().encode()
