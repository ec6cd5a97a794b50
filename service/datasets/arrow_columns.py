"""Between the service's columns (``ColumnData``) and Arrow arrays, both ways.

To Arrow (an upload parsed into columns, on its way into parts): numeric values become float64
with null where NaN marked a missing cell; categorical codes become their strings, null for -1.
From Arrow (parts read back for a fit): float64 with NaN for null; strings (read as dictionary
arrays) become int32 codes into the sorted union of the categories, -1 for null, as the
ingest builds them (``CategoricalCells.finish`` sorts categories the same way, by code point).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.datasets.parts import CATEGORY_TYPE, NUMERIC_TYPE
from service.db.tables import ColumnKind


def schema_of(columns: Sequence[ColumnData]) -> pa.Schema:
    """The parts' schema for these columns."""
    return pa.schema(
        [
            pa.field(c.name, NUMERIC_TYPE if isinstance(c, NumericColumn) else CATEGORY_TYPE)
            for c in columns
        ]
    )


def schema_for_kinds(kinds: Iterable[tuple[str, str]]) -> pa.Schema:
    """The parts' schema for ``(name, kind)`` pairs."""
    return pa.schema(
        [
            pa.field(name, NUMERIC_TYPE if kind == ColumnKind.NUMERIC else CATEGORY_TYPE)
            for name, kind in kinds
        ]
    )


def column_batches(columns: Sequence[ColumnData], rows: int) -> Iterator[pa.RecordBatch]:
    """The columns as record batches of at most ``rows`` rows, in the parts' schema."""
    schema = schema_of(columns)
    n_rows = len(
        columns[0].codes if isinstance(columns[0], CategoricalColumn) else columns[0].values
    )
    dictionaries = {
        c.name: pa.array(list(c.categories), type=pa.string())
        for c in columns
        if isinstance(c, CategoricalColumn)
    }
    for start in range(0, n_rows, rows):
        stop = min(n_rows, start + rows)
        arrays = [_slice_to_arrow(c, start, stop, dictionaries.get(c.name)) for c in columns]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _slice_to_arrow(
    column: ColumnData, start: int, stop: int, dictionary: pa.Array | None
) -> pa.Array:
    if isinstance(column, NumericColumn):
        return pa.array(column.values[start:stop], type=NUMERIC_TYPE, from_pandas=True)
    assert dictionary is not None
    codes = column.codes[start:stop]
    indices = pa.array(codes, type=pa.int32(), mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(CATEGORY_TYPE)


class ColumnCollector:
    """Gathers one column's chunks, part by part, into a ``ColumnData``."""

    def __init__(self, name: str, kind: str, n_rows: int) -> None:
        self.name = name
        self.kind = kind
        self._filled = 0
        self._values: npt.NDArray[np.float64] | None = None
        self._chunks: list[tuple[list[str], npt.NDArray[np.int32]]] = []
        if kind == ColumnKind.NUMERIC:
            self._values = np.empty(n_rows, dtype=np.float64)

    def add(self, chunked: pa.ChunkedArray | pa.Array) -> None:
        chunks = chunked.chunks if isinstance(chunked, pa.ChunkedArray) else [chunked]
        for chunk in chunks:
            if self._values is not None:
                self._add_numbers(chunk)
            else:
                self._add_categories(chunk)

    def _add_numbers(self, chunk: pa.Array) -> None:
        assert self._values is not None
        if not pa.types.is_floating(chunk.type):
            chunk = chunk.cast(NUMERIC_TYPE)
        values = chunk.to_numpy(zero_copy_only=False)  # nulls become NaN
        self._values[self._filled : self._filled + len(values)] = values
        self._filled += len(values)

    def _add_categories(self, chunk: pa.Array) -> None:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        dictionary = chunk.dictionary.to_pylist()
        indices = chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        self._chunks.append((dictionary, indices))
        self._filled += len(indices)

    def finish(self) -> ColumnData:
        if self._values is not None:
            return NumericColumn(self.name, self._values[: self._filled])
        categories = sorted({text for dictionary, _ in self._chunks for text in dictionary})
        position = {text: index for index, text in enumerate(categories)}
        codes = np.empty(self._filled, dtype=np.int32)
        filled = 0
        for dictionary, indices in self._chunks:
            # Chunk code -> global code; a trailing -1 entry maps null (-1) to -1.
            mapping = np.array([position[text] for text in dictionary] + [-1], dtype=np.int32)
            codes[filled : filled + len(indices)] = mapping[indices]
            filled += len(indices)
        self._chunks.clear()
        return CategoricalColumn(self.name, codes, tuple(categories))
