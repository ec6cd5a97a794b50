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
        return _csv_file(Path(data), name, forced)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(data, pandas.DataFrame):
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


def _csv_file(path: Path, name: str | None, forced: list[str]) -> UploadRequest:
    size = path.stat().st_size

    def chunks() -> Iterator[bytes]:
        with path.open("rb") as file:
            while chunk := file.read(FILE_CHUNK_BYTES):
                yield chunk

    return _form(path.name, chunks(), size, name, forced)


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
