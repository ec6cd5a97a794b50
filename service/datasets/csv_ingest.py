"""CSV uploads streamed into parts: pyarrow reads, the service's rules decide.

The upload is spooled to disk as it arrives (hashed, and scanned for what pyarrow's reader
would read otherwise than Python's ``csv`` module, below), then read a block at a time, every
column as text, by ``pyarrow.csv.open_csv``. Each block's cells are turned into the parts'
columns by the rules ``ColumnBuilder`` (``service.datasets.columns``) applies cell by cell:
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
import io
import queue
import threading
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from service.datasets.columns import MISSING_TEXTS, NonFiniteValue, _read_number
from service.datasets.formats import spool
from service.datasets.ingest import check_categorical_names, csv_rows
from service.datasets.parts import CATEGORY_TYPE, NUMERIC_TYPE, PartWriter, WrittenPart
from service.datasets.summaries import Summary, add_batch, summary_for
from service.db.tables import ColumnKind
from service.errors import InvalidInput
from service.store import DataStore

if TYPE_CHECKING:
    from service.datasets.csv_live import LiveCsv

# Bytes pyarrow parses at once (what a block costs is a few times this: measured, a peak 8 MiB
# above the baseline at 256 KiB, 23 MiB at 1 MiB), at most what a row that long grows it to;
# rows the Python reader gathers into one block.
BLOCK_BYTES = 256 * 1024
MAX_BLOCK_BYTES = 64 * 1024 * 1024
EXACT_BLOCK_ROWS = 16384
# Files of at least this many bytes are written by a thread of their own beside the parser,
# in blocks of ``THREADED_BLOCK_BYTES``: the thread, its allocator arena and the blocks in
# flight cost a fixed 20-50 MiB, which is noise beside such a file but would double the peak
# of a 20 MiB upload (measured: 2.73x the upload, tests/e2e/test_upload_memory.py).
THREADED_BYTES = 64 * 1024 * 1024
THREADED_BLOCK_BYTES = 1024 * 1024
READ_BYTES = 1024 * 1024
# Python's csv field limit (``ingest._CSV_FIELD_LIMIT``), in characters: a longer cell has at
# least as many bytes, so a block with none longer in bytes has none longer in characters.
FIELD_LIMIT = 1024 * 1024
# What str.strip() removes: every character str.isspace() calls whitespace.
_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_MISSING = pa.array(sorted(MISSING_TEXTS), type=pa.string())
_NAN_SPELLING = "^[+-]?[nN][aA][nN]$"
# Decimal numbers in ASCII, which pyarrow's cast and float() read alike (correctly rounded).
_SIMPLE_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_OK_AROUND_QUOTES = np.array([ord(","), ord("\n"), ord("\r"), ord('"')], dtype=np.uint8)
# The bytes a quote may have beside it, as a table indexed by byte (a gather, not np.isin's sort).
_OK_AROUND = np.zeros(256, dtype=bool)
_OK_AROUND[_OK_AROUND_QUOTES] = True


class InexactRead(Exception):
    """pyarrow's reading cannot be taken as Python's for this file: read it with Python's."""


class RowTooLong(InexactRead):
    """A row is longer than pyarrow's block: read again in larger blocks."""


class TypedRefused(InexactRead):
    """A column pyarrow read as numbers met a cell it does not read as a finite number (or
    a missing text): read the file again with every column as text."""


class _LateFlip(Exception):
    """A column turned categorical after numbers of it were written."""


# --- spooling, with the scan for what the readers disagree on -----------------------------


@dataclass(slots=True)
class SpooledCsv:
    path: Path
    size: int
    sha256: str
    plain: bool  # pyarrow and Python's csv module read it alike, as far as the scan sees


class _Scan:
    """Lone carriage returns and quotes placed where only Python's reader would object.

    In a file both readers take alike, a quote with an even number of quotes before it opens a
    field (after a comma, a line end or the file's start) or is the second of a doubled quote;
    one with an odd number closes a field (a comma, a line end or the file's end after it) or
    is the first of a doubled quote. Anything else, and the file goes to Python's reader.
    """

    def __init__(self) -> None:
        self.plain = True
        self._inside = False  # an odd number of quotes so far
        self._previous: int | None = None  # the last byte of the previous chunk
        self._check_next = False  # the previous chunk ended with a closing quote or a CR
        self._cr_pending = False

    def add(self, chunk: bytes) -> None:
        if not self.plain or not chunk:
            return
        data = np.frombuffer(chunk, dtype=np.uint8)
        if self._cr_pending and data[0] != ord("\n"):
            self.plain = False
        if self._check_next and data[0] not in _OK_AROUND_QUOTES:
            self.plain = False
        # bytes.find is a memchr, many times faster than a NumPy pass: most files have no
        # carriage return at all, and many no quote.
        self._cr_pending = False
        if chunk.find(b"\r") >= 0:
            returns = np.flatnonzero(data == ord("\r"))
            inner = returns[returns < data.size - 1]
            if inner.size and np.any(data[inner + 1] != ord("\n")):
                self.plain = False
            self._cr_pending = bool(returns.size) and returns[-1] == data.size - 1
        if chunk.find(b'"') < 0:
            self._check_next = False
            self._previous = int(data[-1])
            return
        quotes = np.flatnonzero(data == ord('"'))
        self._check_next = False
        if quotes.size:
            # Every other quote opens, from the first if an even number came before it.
            first_closing = 0 if self._inside else 1
            opening = quotes[1 - first_closing :: 2]
            closing = quotes[first_closing::2]
            before = data[np.maximum(opening - 1, 0)]
            at_start = opening[:1] == 0  # only the first quote can be the chunk's first byte
            if at_start.any():
                if self._previous is None:
                    before[0] = ord(",")  # the file's start
                else:
                    before[0] = self._previous
            last = closing[-1:] == data.size - 1
            after = data[np.minimum(closing + 1, data.size - 1)]
            if last.any():
                after[-1] = ord(",")  # whatever the next chunk starts with: checked then
            if not (_OK_AROUND[before].all() and _OK_AROUND[after].all()):
                self.plain = False
            self._check_next = bool(last.any())
            self._inside ^= bool(quotes.size % 2)
        self._previous = int(data[-1])

    def finish(self) -> bool:
        return self.plain and not self._inside


def spool_csv(
    chunks: Iterable[bytes], directory: Path, *, live: LiveCsv | None = None
) -> SpooledCsv:
    """Write the upload to a temporary file in ``directory``; the caller deletes it.
    ``live`` (``csv_live``) is told of the spool's progress, and may parse it meanwhile."""
    scan = _Scan()
    try:
        spooled = spool(
            chunks, directory, observe=scan.add, progress=live.progress if live else None
        )
    except BaseException:
        if live is not None:
            live.close()
        raise
    if live is not None:
        live.spool_ended()
    return SpooledCsv(spooled.path, spooled.size, spooled.sha256, scan.finish())


# --- reading blocks of text cells -----------------------------------------------------------


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while chunk := source.read(READ_BYTES):
            yield chunk


def read_header(path: Path, *, max_columns: int) -> list[str]:
    """The header row as Python's reader reads it (its errors, if the header has any)."""
    return read_header_of(_file_chunks(path), max_columns=max_columns)


def read_header_of(chunks: Iterable[bytes], *, max_columns: int) -> list[str]:
    rows = csv_rows(chunks, max_columns=max_columns)
    try:
        return next(rows)
    finally:
        rows.close()


def _exact_blocks(
    path: Path, *, max_columns: int, block_rows: int
) -> Generator[list[pa.Array], None, None]:
    rows = csv_rows(_file_chunks(path), max_columns=max_columns)
    next(rows)  # the header
    block: list[list[str]] = []
    for row in rows:
        block.append(row)
        if len(block) == block_rows:
            yield [pa.array(column, type=pa.string()) for column in zip(*block, strict=True)]
            block = []
    if block:
        yield [pa.array(column, type=pa.string()) for column in zip(*block, strict=True)]


def _fast_blocks(
    path: Path, names: Sequence[str], *, block_bytes: int, columns: Sequence[ColumnState] | None
) -> Generator[list[pa.Array], None, None]:
    """``columns``: read those ``typed_columns`` picks as numbers (None: all as text)."""
    try:
        # A Python file, read a block at a time: given the path (or an OSFile), pyarrow's
        # reader measured 8x the block size more at its peak (16 MiB on a 20 MiB file).
        source = path.open("rb")
        numeric = set()
        if columns is not None:
            with path.open("rb") as first:
                numeric = typed_columns(first, names, block_bytes, columns)
    except OSError:
        raise InexactRead from None
    with source:
        yield from fast_blocks_of(source, names, block_bytes, numeric)


def typed_columns(
    source: BinaryIO | io.RawIOBase,
    names: Sequence[str],
    block_bytes: int,
    columns: Sequence[ColumnState],
) -> set[str]:
    """The columns pyarrow may read as numbers: numeric so far (neither forced categorical nor
    seen to turn) and, in the file's first block, nothing but what pyarrow reads as finite
    numbers and the missing texts. Read so, a column costs pyarrow's number parsing alone,
    not a column of texts and a cast; a later cell it cannot read so refuses the pass
    (``TypedRefused``), and the file is read again as text."""
    blocks = fast_blocks_of(source, names, block_bytes)
    try:
        first = next(blocks, None)
    except InexactRead:
        return set()
    finally:
        blocks.close()
    if first is None:
        return set()
    return {
        column.name
        for column, cells in zip(columns, first, strict=True)
        if not column.forced and column.flip is None and _reads_as_numbers(cells)
    }


def _reads_as_numbers(cells: pa.Array) -> bool:
    # At least one number: a column missing throughout the first block may well hold texts.
    present = cells.filter(pc.invert(pc.is_in(cells, value_set=_MISSING)))
    try:
        values = pc.cast(present, NUMERIC_TYPE).to_numpy(zero_copy_only=False)
    except pa.ArrowException:
        return False
    return bool(values.size) and bool(np.isfinite(values).all())


def fast_blocks_of(
    source: BinaryIO | io.RawIOBase,
    names: Sequence[str],
    block_bytes: int,
    numeric: Collection[str] = (),
) -> Generator[list[pa.Array], None, None]:
    """Blocks of the columns: text, or float64 for the ``numeric`` ones (the missing texts
    null; any other cell pyarrow cannot read as a number refuses the pass)."""
    types = {name: NUMERIC_TYPE if name in numeric else pa.string() for name in names}
    try:
        reader = pa_csv.open_csv(
            source,
            read_options=pa_csv.ReadOptions(block_size=block_bytes, use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                column_types=types,
                # Text columns never hold a null (strings_can_be_null): only numeric ones.
                null_values=sorted(MISSING_TEXTS) if numeric else [],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=True,
            ),
        )
        if reader.schema.names != list(names):
            raise InexactRead
        for batch in reader:
            columns = list(batch.columns)
            # Only a batch of more bytes than the limit can hold a cell over it.
            if batch.nbytes > FIELD_LIMIT:
                for column in columns:
                    if (
                        len(column)
                        and column.type == pa.string()
                        and pc.max(pc.binary_length(column)).as_py() > FIELD_LIMIT
                    ):
                        raise InexactRead
            yield columns
    except (pa.ArrowException, OSError, ValueError) as error:
        if "straddling" in str(error):
            raise RowTooLong from None
        if numeric:
            raise TypedRefused from None
        raise InexactRead from None


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
            return _exact_blocks(spooled.path, max_columns=max_columns, block_rows=block_rows)
        return _fast_blocks(
            spooled.path, names, block_bytes=block_bytes, columns=columns if typed else None
        )

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


class _WritingThread:
    """A ``PartWriter`` fed from another thread, so that Parquet encoding and the summaries
    of one row group run while the parser reads the next blocks (pyarrow and NumPy release
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
    writer: PartWriter | _WritingThread | None = None
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
                    writer = _WritingThread(writer)
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
