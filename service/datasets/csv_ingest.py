"""CSV uploads streamed into parts: pyarrow reads, the service's rules decide.

The upload is spooled to disk as it arrives (``csv_spool``: hashed, and scanned for what
pyarrow's reader would read otherwise than Python's ``csv`` module, below), then read a block
at a time by ``pyarrow.csv.open_csv`` (``csv_blocks``): as text, but as float64 the columns
whose first block holds only numbers and missing texts (a later cell pyarrow cannot read as a
finite number, and the file is read again as text). A large upload's first pass runs while it
is still arriving (``csv_live``). Each block's cells are turned into the parts' columns by the rules ``ColumnBuilder`` (``service.datasets.columns``) applies cell by cell:
surrounding whitespace (``str.strip``'s) is not part of a value; the ``MISSING_TEXTS`` are
missing; a column is numeric while every present cell reads as a number (``float``, no ``_``)
and categorical from its first cell that does not, its categories the cells' texts as written;
a number spelling NaN is missing while the column is still numeric; an infinite number in a
column that stays numeric is a 422 naming its row.

A column that turns categorical after rows of it were written as numbers is caught late: its
earlier cells' texts are gone from what was written. The pass then goes on reading, without
writing, to find every such column, and a second pass writes all of them as categorical from
the start (the spooled file is read again). A column whose first block already decides it,
which is nearly every text column, costs nothing.

Where pyarrow and Python's reader could disagree, Python's reader (``ingest.csv_rows``) is the
reference: a lone carriage return (a line end to pyarrow, an error to Python), a quote after a
closing quote's field (``"a"b``: joined by pyarrow, an error to Python's strict mode), an
unterminated quote, a cell over the field limit. The spooling scan sees the first three; any of
them, or any error pyarrow raises, and the file is read by Python's reader instead, still a
block of rows at a time: same cells, and the same error messages (the row and line numbers,
the byte offset of undecodable bytes) as before. That reader is slower, not larger.

A file of ``THREADED_BYTES`` or more is written by a thread beside the parser (Parquet encoding
and the row groups' summaries there, parsing and converting here, as ``pyarrow.csv.read_csv``
keeps two cores busy), with at most two blocks queued between them; a smaller one stays on one
thread, whose fixed cost (the thread's allocator arena, the blocks in flight) would be near its
size. Either way the parts, kinds, summaries and errors are the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from service.datasets.columns import MISSING_TEXTS, NonFiniteValue, _read_number
from service.datasets.csv_blocks import (
    BLOCK_BYTES,
    EXACT_BLOCK_ROWS,
    MAX_BLOCK_BYTES,
    InexactRead,
    RowTooLong,
    TypedRefused,
    exact_blocks,
    fast_blocks,
    read_header,
)
from service.datasets.csv_spool import SpooledCsv
from service.datasets.ingest import check_categorical_names
from service.datasets.parts import (
    CATEGORY_TYPE,
    NUMERIC_TYPE,
    PartWriter,
    PartWriterThread,
    WrittenPart,
)
from service.datasets.summaries import Summary, add_batch, summary_for
from service.db.tables import ColumnKind
from service.errors import InvalidInput
from service.store import DataStore

# Files of at least this many bytes are written by a thread of their own beside the parser,
# in blocks of ``THREADED_BLOCK_BYTES``: the thread, its allocator arena and the blocks in
# flight cost a fixed 20-50 MiB, which is noise beside such a file but would double the peak
# of a 20 MiB upload (measured: 2.73x the upload, tests/e2e/test_upload_memory.py).
THREADED_BYTES = 64 * 1024 * 1024
THREADED_BLOCK_BYTES = 1024 * 1024
# What str.strip() removes: every character str.isspace() calls whitespace.
_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_MISSING = pa.array(sorted(MISSING_TEXTS), type=pa.string())
_NAN_SPELLING = "^[+-]?[nN][aA][nN]$"
# Decimal numbers in ASCII, which pyarrow's cast and float() read alike (correctly rounded).
_SIMPLE_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


class _LateFlip(Exception):
    """A column turned categorical after numbers of it were written."""


# --- cells to the parts' columns ------------------------------------------------------------


@dataclass(slots=True)
class ColumnState:
    name: str
    forced: bool
    flip: int | None = None  # the row of the first present cell that is not a number
    infinite: tuple[int, str] | None = None  # the first infinite number's row and text
    kind: ColumnKind = field(default=ColumnKind.NUMERIC)

    def start_pass(self) -> None:
        self.infinite = None
        self.kind = (
            ColumnKind.CATEGORICAL if self.forced or self.flip is not None else ColumnKind.NUMERIC
        )


def numeric_so_far(columns: Sequence[ColumnState]) -> set[str]:
    """The columns a pass may read as numbers: neither forced categorical nor seen to turn."""
    return {column.name for column in columns if not column.forced and column.flip is None}


def _numbers(
    column: ColumnState, cells: pa.Array, start: int
) -> tuple[npt.NDArray[np.float64], int | None]:
    """The cells as numbers (NaN for missing) up to the first present cell that is not one,
    whose position in the block comes second (None if every present cell is a number)."""
    values, flip, _ = _numbers_and_array(column, cells, start)
    return values, flip


def _numbers_and_array(
    column: ColumnState, cells: pa.Array, start: int
) -> tuple[npt.NDArray[np.float64], int | None, pa.Array | None]:
    """As :func:`_numbers`, with, when every cell read as a finite number, pyarrow's own
    array of them (the parts' column as it is: no copy, no mask of missing cells)."""
    try:
        # Most numeric blocks: every cell reads as pyarrow reads numbers. Whatever it reads as
        # NaN or an infinity (the missing spellings among them) is decided by float() below.
        cast = pc.cast(cells, NUMERIC_TYPE)
        values = cast.to_numpy(zero_copy_only=False)  # no nulls: a read-only view
        odd = np.flatnonzero(~np.isfinite(values))
        if not odd.size:
            return values, None, cast
        values = values.copy()
        text = cells
    except pa.ArrowException:
        text = pc.utf8_trim(cells, characters=_WHITESPACE)
        missing = pc.is_in(text, value_set=_MISSING).to_numpy(zero_copy_only=False)
        simple = pc.match_substring_regex(text, _SIMPLE_NUMBER).to_numpy(zero_copy_only=False)
        values = np.full(len(cells), np.nan)
        plain = np.flatnonzero(simple & ~missing)
        if plain.size:
            values[plain] = pc.cast(text.take(pa.array(plain)), NUMERIC_TYPE).to_numpy(
                zero_copy_only=False
            )
        odd = np.flatnonzero(~simple & ~missing)
    flip = None
    for position in odd.tolist():
        cell = str(text[position].as_py()).strip()
        number = None if cell in MISSING_TEXTS else _read_number(cell)
        if number is None and cell not in MISSING_TEXTS:
            flip = position
            break
        values[position] = np.nan if number is None else number
    if column.infinite is None:
        infinite = np.flatnonzero(np.isinf(values[: len(values) if flip is None else flip]))
        if infinite.size:
            row = int(infinite[0])
            column.infinite = (start + row, str(cells[row].as_py()).strip())
    return values, flip, None


def _convert(column: ColumnState, cells: pa.Array, start: int, *, written: bool) -> pa.Array:
    """One block of a column in the parts' type. ``written``: rows before ``start`` are in
    parts already; a numeric column turning categorical then raises ``_LateFlip``."""
    if cells.type == NUMERIC_TYPE:
        return _typed_numbers(cells)
    scan = column.flip is None and (column.kind == ColumnKind.NUMERIC or column.forced)
    stop = len(cells)
    if scan:
        values, position, finite = _numbers_and_array(column, cells, start)
        if position is None and column.kind == ColumnKind.NUMERIC:
            if finite is not None:
                return finite
            return pa.array(values, type=NUMERIC_TYPE, mask=np.isnan(values))
        if position is not None:
            column.flip = start + position
            if column.kind == ColumnKind.NUMERIC:
                if written:
                    raise _LateFlip
                column.kind = ColumnKind.CATEGORICAL
    if column.flip is not None:
        stop = min(max(column.flip - start, 0), len(cells))
    text = pc.utf8_trim(cells, characters=_WHITESPACE)
    missing = pc.is_in(text, value_set=_MISSING)
    if stop:
        # Before the column's first text, a number spelling NaN was a missing number.
        nan = pc.match_substring_regex(text.slice(0, stop), _NAN_SPELLING)
        if len(cells) > stop:
            nan = pa.concat_arrays([nan, pa.array(np.zeros(len(cells) - stop, dtype=bool))])
        missing = pc.or_(missing, nan)
    return pc.if_else(missing, pa.scalar(None, CATEGORY_TYPE), text).cast(CATEGORY_TYPE)


def _typed_numbers(cells: pa.Array) -> pa.Array:
    """A block pyarrow read as numbers, null for the missing texts: as it is, but a number
    spelling NaN is missing too, and an infinite one refuses the pass (its message names the
    cell's text, which only a reading as text has)."""
    values = cells.to_numpy(zero_copy_only=False)  # nulls as NaN
    if cells.null_count == 0 and np.isfinite(values).all():
        return cells
    if np.isinf(values).any():
        raise TypedRefused
    nan = np.isnan(values)
    if np.count_nonzero(nan) == cells.null_count:
        return cells
    return pa.array(values, type=NUMERIC_TYPE, mask=nan)


def _scan_only(columns: Sequence[ColumnState], cells: Sequence[pa.Array], start: int) -> None:
    for column, block in zip(columns, cells, strict=True):
        if block.type == NUMERIC_TYPE:
            continue  # read as numbers: a text would have refused the pass
        if column.flip is None and column.kind == ColumnKind.NUMERIC and not column.forced:
            _, position = _numbers(column, block, start)
            if position is not None:
                column.flip = start + position


# --- the passes -----------------------------------------------------------------------------


@dataclass(slots=True)
class CsvTable:
    """What a streamed CSV became: its columns' kinds, parts and summaries (to be finished)."""

    names: list[str]
    kinds: list[ColumnKind]
    parts: list[WrittenPart]
    summaries: list[Summary]
    n_rows: int


@dataclass(slots=True)
class PassOutcome:
    """How a pass ended: a table, or None after a column turned categorical late
    (``columns`` then say which), or pyarrow's refusal (``error``); ``typed``: whether a
    next pass may read columns as numbers (no pass has been refused for it)."""

    columns: list[ColumnState]
    table: CsvTable | None
    error: InexactRead | None
    typed: bool = True


def ingest_csv(
    spooled: SpooledCsv,
    *,
    categorical: Sequence[str],
    store: DataStore,
    dataset_id: str,
    max_columns: int,
    block_bytes: int | None = None,
    block_rows: int = EXACT_BLOCK_ROWS,
    threaded: bool | None = None,
    first: PassOutcome | None = None,
) -> CsvTable:
    """Read the spooled CSV into the dataset's parts. On any error, nothing is left written.

    ``block_bytes`` is what pyarrow reads at once, ``block_rows`` what Python's reader
    gathers, ``threaded`` whether the parts are written on a thread beside the parser (by
    default, for files of ``THREADED_BYTES`` or more); none changes what the file becomes.
    ``first``: the first pass's outcome, when it ran while the file was spooled
    (``csv_live``), in pyarrow's blocks of ``block_bytes``.
    """
    if threaded is None:
        threaded = spooled.size >= THREADED_BYTES
    if block_bytes is None:
        block_bytes = THREADED_BLOCK_BYTES if threaded else BLOCK_BYTES
    names = read_header(spooled.path, max_columns=max_columns)

    def blocks(exact: bool, typed: bool) -> Generator[list[pa.Array], None, None]:
        if exact:
            return exact_blocks(spooled.path, max_columns=max_columns, block_rows=block_rows)
        eligible = numeric_so_far(columns) if typed else set()
        return fast_blocks(spooled.path, names, block_bytes=block_bytes, eligible=eligible)

    forced = set(categorical)
    columns = [ColumnState(name, name in forced) for name in names]
    exact = not spooled.plain
    typed = True
    while True:
        try:
            if first is not None:
                columns, table, refused = first.columns, first.table, first.error
                typed, first = first.typed, None
                if refused is not None:
                    raise refused
            else:
                table = read_pass(
                    blocks(exact, typed), names, columns, store, dataset_id, threaded=threaded
                )
        except InexactRead as error:
            if isinstance(error, RowTooLong) and block_bytes < MAX_BLOCK_BYTES:
                block_bytes *= 8
            elif isinstance(error, TypedRefused):
                typed = False
            else:
                exact = True
            # Python's reader may cut rows elsewhere: what pyarrow's rows said counts no more.
            columns = [ColumnState(name, name in forced) for name in names]
            continue
        if table is not None:
            break
    _check_finished(categorical, columns, table, store)
    return table


def read_pass(
    blocks: Generator[list[pa.Array], None, None],
    names: list[str],
    columns: list[ColumnState],
    store: DataStore,
    dataset_id: str,
    *,
    threaded: bool,
) -> CsvTable | None:
    """One reading of the file; None when a late flip asks for another."""
    for column in columns:
        column.start_pass()
    writer: PartWriter | PartWriterThread | None = None
    summaries: list[Summary] = []
    start = 0
    late = False
    try:
        for cells in blocks:
            if late:
                _scan_only(columns, cells, start)
                start += len(cells[0])
                continue
            try:
                arrays = [
                    _convert(column, block, start, written=start > 0)
                    for column, block in zip(columns, cells, strict=True)
                ]
            except _LateFlip:
                late = True
                if writer is not None:
                    writer.abort()
                    writer = None
                _scan_only(columns, cells, start)
                start += len(cells[0])
                continue
            if writer is None:
                schema = pa.schema(
                    [pa.field(name, array.type) for name, array in zip(names, arrays, strict=True)]
                )
                summaries = [summary_for(column.kind) for column in columns]
                writer = PartWriter(
                    store, dataset_id, schema, on_group=partial(add_batch, summaries)
                )
                if threaded:
                    writer = PartWriterThread(writer)
            batch = pa.RecordBatch.from_arrays(arrays, schema=writer.schema)
            del arrays
            writer.write(batch)
            start += batch.num_rows
            del batch
        if late:
            return None
        parts = writer.finish() if writer is not None else []
    except BaseException:
        blocks.close()
        if writer is not None:
            writer.abort()
        raise
    kinds = [column.kind for column in columns]
    if writer is None:
        summaries = [summary_for(kind) for kind in kinds]
    return CsvTable(names, kinds, parts, summaries, start)


def _check_finished(
    categorical: Sequence[str], columns: Sequence[ColumnState], table: CsvTable, store: DataStore
) -> None:
    """The checks ``TableBuilder.finish`` makes once a file is read, in its order; the parts
    are deleted if one fails."""
    try:
        check_categorical_names(categorical, table.names)
        if table.n_rows == 0:
            raise InvalidInput("The dataset has a header but no rows; upload at least one row.")
        for column in columns:
            if column.kind == ColumnKind.NUMERIC and column.infinite is not None:
                row, text = column.infinite
                error = NonFiniteValue(column.name, row + 1, text)
                raise InvalidInput(
                    str(error), errors=[{"loc": ["body", column.name], "msg": "infinite value"}]
                )
    except BaseException:
        for part in table.parts:
            with contextlib.suppress(Exception):  # best effort: what is left, store gc sweeps
                store.delete(part.stored.path)
        raise
