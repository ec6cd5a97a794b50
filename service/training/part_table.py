"""A fit's view of a dataset kept as Parquet parts: the columns it uses, read part by part.

A histogram fit never needs the float table: it needs the values of the few rows that place
its bin edges (``engine.tree.BinningPlan``), then every row's bin codes. :class:`PartTable`
gives both without holding more than one part's values at a time: :meth:`PartTable.gather`
reads only the asked rows (sorted global row indices, found through each part's row offset),
:meth:`PartTable.bin` bins each part's rows into preallocated ``uint8`` code matrices. Only the
feature columns are read (pyarrow column projection), and each part is verified against its
SHA-256 as every read of the store is (:mod:`service.datasets.part_reader`).

Categorical features are floats of their dataset-wide codes, as ``ColumnData.as_float`` gives
them: codes into the sorted union of the parts' categories, NaN for missing. The union is
learnt in the same pass that reads the target (:meth:`PartTable.first_pass`).

It is also a ``Mapping`` of whole columns (each read on first use), so code written for the
columns in memory keeps working on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from engine.process_setup import trim_freed_memory
from engine.tree._binning import BinMapper
from service.datasets.arrow_columns import ColumnCollector
from service.datasets.columns import ColumnData
from service.datasets.part_reader import open_part, read_columns, release_part
from service.db.tables import ColumnKind, DatasetPartRecord
from service.store import DataStore

Rows = npt.NDArray[np.intp]
# Rows of a row group turned into floats at a time (PartTable._selected), and columns of it
# decoded and binned at a time (PartTable.bin).
FLOAT_ROWS = 1 << 14
BIN_COLUMNS = 4


class PartTable(Mapping[str, ColumnData]):
    """The named columns of a dataset's parts (``kinds``: name → ``ColumnKind``)."""

    def __init__(
        self,
        store: DataStore,
        parts: Sequence[DatasetPartRecord],
        kinds: Mapping[str, str],
        n_rows: int,
    ) -> None:
        self.store = store
        self.parts = sorted(parts, key=lambda part: part.row_offset)
        self.kinds = dict(kinds)
        self.n_rows = n_rows
        self._columns: dict[str, ColumnData] = {}
        # Per categorical feature: its categories (sorted union) and each one's code.
        self.categories: dict[str, tuple[str, ...]] = {}
        self._positions: dict[str, dict[str, float]] = {}
        self.parts_read = 0  # how many parts this table has opened (tests count passes)

    # -- the Mapping of whole columns ----------------------------------------------------

    def __getitem__(self, name: str) -> ColumnData:
        if name not in self._columns:
            if name not in self.kinds:
                raise KeyError(name)
            loaded = read_columns(self.store, self.parts, [(name, self.kinds[name])], self.n_rows)
            self.parts_read += len(self.parts)
            self._columns[name] = loaded[name]
        return self._columns[name]

    def __contains__(self, name: object) -> bool:  # without reading the column
        return name in self.kinds

    def __iter__(self) -> Iterator[str]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    # -- part by part ----------------------------------------------------------------------

    def first_pass(
        self,
        target: str,
        features: Sequence[str],
        answers: Sequence[PassAnswer] | None = None,
    ) -> ColumnData:
        """The target column, whole, and the categories of the categorical ``features``, in
        one pass over the parts (the categories are the dictionaries only, no cells). The
        column is the caller's: the table does not keep it.

        ``answers``: each part's :func:`pass_answer`, in part order, when the parts were read
        elsewhere (on the Dask workers, ``service.training.worker_parts``); this process then
        opens none of them.
        """
        categorical = [n for n in features if self.kinds[n] == ColumnKind.CATEGORICAL]
        if answers is None:
            answers = []
            for part in self.parts:
                answers.append(pass_answer(self._open(part), target, categorical))
                release_part()
            give_back_read_buffers()
        if len(answers) != len(self.parts):
            raise ValueError(f"{len(answers)} first-pass answers for {len(self.parts)} parts")
        collector = ColumnCollector(target, self.kinds[target], self.n_rows)
        dictionaries: dict[str, list[list[str]]] = {name: [] for name in categorical}
        for column, per_part in answers:
            collector.add(column)
            for name in categorical:
                dictionaries[name].append(per_part[name])
        for name, found in dictionaries.items():
            union = sorted({text for dictionary in found for text in dictionary})
            self.categories[name] = tuple(union)
            self._positions[name] = {text: float(code) for code, text in enumerate(union)}
        # Not kept in the table's columns: the run keeps its labels or values (TrainingData.y),
        # and the column (4 or 8 bytes a row) would sit beside them through the fit.
        return collector.finish()

    def gather(self, rows: Rows, features: Sequence[str]) -> npt.NDArray[np.float64]:
        """``X[rows]`` of the ``features`` (sorted global rows), a row group at a time."""
        out = np.empty((rows.size, len(features)))
        for spans, columns, values in self._selected([rows], features, columns_at_once=BIN_COLUMNS):
            (start, stop) = spans[0]
            out[start:stop, columns] = values
        give_back_read_buffers()
        return out

    def bin(
        self,
        mapper: BinMapper,
        groups: Sequence[Rows],
        features: Sequence[str],
        *,
        feature_major: bool = False,
    ) -> list[npt.NDArray[np.unsignedinteger[Any]]]:
        """``mapper.transform(X[rows])`` for each group of sorted global rows, in one pass.

        Each row group's selected rows are read as floats, binned into the preallocated codes
        and dropped before the next: the float table never exists, and of the parts only the
        one being read (its verified bytes) and one row group's floats are held.
        ``feature_major``: the codes laid out column by column (Fortran order, the same
        values), for a fit whose kernels read them so (``engine.tree._memo.feature_major``
        then takes their transpose as it is instead of copying the matrix).
        """
        dtype = np.uint8 if int(mapper.n_bins_.max(initial=1)) <= 255 else np.uint16
        order: Literal["C", "F"] = "F" if feature_major else "C"
        outputs = [
            np.empty((group.size, len(features)), dtype=dtype, order=order) for group in groups
        ]
        # A few columns of a row group decoded and binned at a time (each feature is binned
        # on its own): Arrow's decoded columns and their floats are then 4 MiB, not 20 + 20
        # MiB of a row group's 2^17 rows × 20 features, beside the part's bytes.
        for spans, columns, values in self._selected(groups, features, columns_at_once=BIN_COLUMNS):
            codes = mapper.transform(values, columns)
            del values
            taken = 0
            for out, (start, stop) in zip(outputs, spans, strict=True):
                out[start:stop, columns] = codes[taken : taken + stop - start]
                taken += stop - start
        give_back_read_buffers()
        return outputs

    def use_categories(self, categories: Mapping[str, Sequence[str]]) -> None:
        """Take the categorical features' dataset-wide categories as :meth:`first_pass` learnt
        them elsewhere (a Dask worker reading one part codes its categories as the whole)."""
        for name, union in categories.items():
            self.categories[name] = tuple(union)
            self._positions[name] = {text: float(code) for code, text in enumerate(union)}

    def part_values(
        self, part: DatasetPartRecord, features: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """Every row of one part as floats: numbers as they are, categories as codes."""
        return self._values(part, np.arange(part.n_rows, dtype=np.intp), features)

    def part_rows(
        self, part: DatasetPartRecord, features: Sequence[str], column: str
    ) -> tuple[npt.NDArray[np.float64], pa.ChunkedArray]:
        """Every row of one part as :meth:`part_values` gives them, and its ``column`` as
        stored, from one open of the part (a row group's columns at a time)."""
        parquet = self._open(part)
        out = np.empty((part.n_rows, len(features)))
        chunks: list[pa.Array] = []
        names = list(dict.fromkeys([*features, column]))
        start = 0
        for index in range(parquet.num_row_groups):
            table = parquet.read_row_group(index, columns=names)
            n = table.num_rows
            out[start : start + n] = self._floats(table, np.arange(n, dtype=np.intp), features)
            chunks.extend(table.column(column).chunks)
            start += n
        kind = parquet.schema_arrow.field(column).type
        # The part's bytes go now, not at the collector's next pass (release_part): a
        # worker reads its parts one after another, and each read's buffer piled up.
        parquet.close()
        del parquet
        release_part()
        if start != part.n_rows:
            raise ValueError(f"The part '{part.path}' holds {start} rows, not {part.n_rows}.")
        return out, pa.chunked_array(chunks, type=kind)

    # -- reading ---------------------------------------------------------------------------

    def _selected(
        self,
        groups: Sequence[Rows],
        features: Sequence[str],
        parts: Sequence[DatasetPartRecord] | None = None,
        *,
        columns_at_once: int | None = None,
    ) -> Iterator[tuple[list[tuple[int, int]], slice, npt.NDArray[np.float64]]]:
        """For each row group holding some of the groups' rows: where they sit in each group
        (``(start, stop)`` spans), which of the ``features`` (a slice of them, all of them
        unless ``columns_at_once`` is set) and their float values, the groups' rows one after
        another, at most ``FLOAT_ROWS`` of them at a time."""
        width = len(features) if columns_at_once is None else max(1, columns_at_once)
        for part in self.parts if parts is None else parts:
            low, high = part.row_offset, part.row_offset + part.n_rows
            if all(np.searchsorted(g, low) == np.searchsorted(g, high) for g in groups):
                continue
            parquet = self._open(part)
            first = low
            for index in range(parquet.num_row_groups):
                last = first + parquet.metadata.row_group(index).num_rows
                spans = [
                    (int(np.searchsorted(g, first)), int(np.searchsorted(g, last))) for g in groups
                ]
                if any(start < stop for start, stop in spans):
                    local = np.concatenate(
                        [g[a:b] - first for g, (a, b) in zip(groups, spans, strict=True)]
                    )
                    for column in range(0, len(features), width):
                        names = list(features[column : column + width])
                        table = parquet.read_row_group(index, columns=names)
                        # A slice of the rows at a time: 2.5 MiB of floats of 20 features,
                        # not the 20 MiB of a row group's 2^17 rows at once.
                        for low_at in range(0, local.size, FLOAT_ROWS):
                            high_at = min(low_at + FLOAT_ROWS, local.size)
                            yield (
                                _piece_spans(spans, low_at, high_at),
                                slice(column, column + len(names)),
                                self._floats(table, local[low_at:high_at], names),
                            )
                        del table
                first = last
            # The part's verified bytes go now, before the next part's are read: left to the
            # reader's last reference they were sometimes still held when the next came.
            parquet.close()
            del parquet
            release_part()

    def _open(self, part: DatasetPartRecord) -> pq.ParquetFile:
        self.parts_read += 1
        return open_part(self.store, part)

    def _read(self, part: DatasetPartRecord, names: Sequence[str]) -> pa.Table:
        return self._open(part).read(columns=list(names))

    def _values(
        self, part: DatasetPartRecord, local: Rows, features: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """The float rows ``local`` (sorted, of this part) of one part."""
        out = np.empty((local.size, len(features)))
        for spans, columns, values in self._selected([local + part.row_offset], features, [part]):
            out[spans[0][0] : spans[0][1], columns] = values
        return out

    def _floats(
        self, table: pa.Table, local: Rows, features: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """Rows ``local`` of a row group's table as floats: numbers as they are, categories
        as their dataset-wide codes, NaN for missing."""
        if (
            local.size
            and local[-1] - local[0] + 1 == local.size
            and bool(np.all(local[1:] > local[:-1]))
        ):
            # Consecutive rows in order: a slice, no copy.
            table = table.slice(int(local[0]), local.size)
        else:
            table = table.take(pa.array(local))
        out = np.empty((local.size, len(features)))
        for j, name in enumerate(features):
            column = table.column(name)
            if self.kinds[name] == ColumnKind.CATEGORICAL:
                column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
                out[:, j] = self._category_codes(name, column)
            else:
                if not pa.types.is_floating(column.type):
                    column = column.cast(pa.float64())
                out[:, j] = column.to_numpy()  # nulls are NaN
        return out

    def _category_codes(self, name: str, chunk: pa.Array) -> npt.NDArray[np.float64]:
        """Dataset-wide codes of a categorical chunk as floats, NaN for missing."""
        if name not in self._positions:
            raise RuntimeError(f"first_pass has not read the categories of '{name}'.")
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        position = self._positions[name]
        # The chunk's dictionary positions → codes; a trailing NaN for the null index -1.
        known = np.array(
            [np.nan if t is None else position.get(t, np.nan) for t in chunk.dictionary.to_pylist()]
            + [np.nan]
        )
        indices = chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.intp)
        result: npt.NDArray[np.float64] = known[indices]
        return result


def _piece_spans(spans: list[tuple[int, int]], low_at: int, high_at: int) -> list[tuple[int, int]]:
    """The groups' spans of rows ``low_at:high_at`` of a row group's selected rows (the
    groups' rows one after another, each group's ``spans`` entry in order)."""
    pieces = []
    offset = 0
    for start, stop in spans:
        low = min(max(low_at - offset, 0), stop - start)
        high = min(max(high_at - offset, 0), stop - start)
        pieces.append((start + low, start + high))
        offset += stop - start
    return pieces


# One part's first pass: its target column as stored, and each categorical feature's
# distinct strings.
PassAnswer = tuple[pa.ChunkedArray, dict[str, list[str]]]


def pass_answer(parquet: pq.ParquetFile, target: str, categorical: Sequence[str]) -> PassAnswer:
    """One part's share of :meth:`PartTable.first_pass`, read from the opened part."""
    names = list(dict.fromkeys([target, *categorical]))
    table = parquet.read(columns=names)
    return table.column(target), {name: _dictionary(table.column(name)) for name in categorical}


def _dictionary(column: pa.ChunkedArray) -> list[str]:
    """The distinct strings of a part's categorical column."""
    texts: set[str] = set()
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            texts.update(t for t in chunk.dictionary.to_pylist() if t is not None)
        else:
            texts.update(t for t in chunk.unique().to_pylist() if t is not None)
    return sorted(texts)


def give_back_read_buffers() -> None:
    """After a pass over the parts: return the memory its reads freed to the system, Arrow's
    pool (mimalloc keeps freed segments) and glibc's heap both, so that what the fit allocates
    next (the codes, the boosting rounds' per-row state) does not sit on top of it in the fit
    process's peak. Measured on 2 M × 20 (``benchmarks.fit_memory``): −50 MiB of peak."""
    pa.default_memory_pool().release_unused()
    trim_freed_memory()
