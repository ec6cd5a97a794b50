"""A spooled CSV read a block at a time: by ``pyarrow.csv.open_csv`` (the columns as text, or
as numbers where the first block shows only numbers), or by Python's ``csv`` module where the
two could read it differently (``csv_ingest`` says when). A block is a list of columns.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from service.datasets.columns import MISSING_TEXTS
from service.datasets.ingest import csv_rows
from service.datasets.parts import NUMERIC_TYPE

# Bytes pyarrow parses at once (what a block costs is a few times this: measured, a peak 8 MiB
# above the baseline at 256 KiB, 23 MiB at 1 MiB), at most what a row that long grows it to;
# rows the Python reader gathers into one block.
BLOCK_BYTES = 256 * 1024
MAX_BLOCK_BYTES = 64 * 1024 * 1024
EXACT_BLOCK_ROWS = 16384
READ_BYTES = 1024 * 1024
# Python's csv field limit (``ingest._CSV_FIELD_LIMIT``), in characters: a longer cell has at
# least as many bytes, so a block with none longer in bytes has none longer in characters.
FIELD_LIMIT = 1024 * 1024
_MISSING = pa.array(sorted(MISSING_TEXTS), type=pa.string())


class InexactRead(Exception):
    """pyarrow's reading cannot be taken as Python's for this file: read it with Python's."""


class RowTooLong(InexactRead):
    """A row is longer than pyarrow's block: read again in larger blocks."""


class TypedRefused(InexactRead):
    """A column pyarrow read as numbers met a cell it does not read as a finite number (or
    a missing text): read the file again with every column as text."""


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


def exact_blocks(
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


def fast_blocks(
    path: Path, names: Sequence[str], *, block_bytes: int, eligible: Collection[str]
) -> Generator[list[pa.Array], None, None]:
    """Blocks of the file, the ``eligible`` columns ``typed_columns`` picks read as numbers."""
    try:
        # A Python file, read a block at a time: given the path (or an OSFile), pyarrow's
        # reader measured 8x the block size more at its peak (16 MiB on a 20 MiB file).
        source = path.open("rb")
        numeric = set()
        if eligible:
            with path.open("rb") as first:
                numeric = typed_columns(first, names, block_bytes, eligible)
    except OSError:
        raise InexactRead from None
    with source:
        yield from fast_blocks_of(source, names, block_bytes, numeric)


def typed_columns(
    source: BinaryIO | io.RawIOBase,
    names: Sequence[str],
    block_bytes: int,
    eligible: Collection[str],
) -> set[str]:
    """The columns pyarrow may read as numbers: among the ``eligible`` (numeric so far: neither
    forced categorical nor seen to turn), those holding, in the file's first block, nothing but what pyarrow reads as finite
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
        name
        for name, cells in zip(names, first, strict=True)
        if name in eligible and _reads_as_numbers(cells)
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
