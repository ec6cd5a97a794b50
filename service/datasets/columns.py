"""A dataset column in memory, how it is built from cells, and its byte format in the database.

Cells arrive one at a time, as text (CSV) or as JSON values. ``ColumnBuilder`` decides the
column's kind as it goes: a column stays numeric while every present cell reads as a finite
number, and turns categorical at the first cell that does not. Numeric cells are kept as
float64 (8 bytes a cell, not a Python string); the few whose text would not be reproduced
from the number (``007``, ``1.50``, ``1e3``) are remembered, so a column that turns
categorical late keeps every category exactly as written.

The stored format (``encode_column`` / ``decode_column``) is zlib-compressed and never pickled:
numeric data is little-endian float64 with NaN for missing; categorical data is a 4-byte
little-endian length, that many bytes of a UTF-8 JSON list of categories, then little-endian
int32 codes with -1 for missing.
"""

from __future__ import annotations

import bisect
import json
import math
import struct
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.datasets.categories import CategoricalCells, category_counts, json_list_bytes
from service.datasets.distributions import (
    count_distinct_sorted,
    histogram,
    top_categories,
)
from service.datasets.texts import Mapped
from service.db.tables import ColumnKind

# Cell texts that mean "no value", compared after surrounding whitespace is removed.
MISSING_TEXTS = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "NULL"})
DATA_FORMAT = 1
_LENGTH = struct.Struct("<I")
_PIECE_BYTES = 65536  # input fed to the compressor at once


class NonFiniteValue(ValueError):
    """A column of numbers holds an infinite one, which no estimator can use."""

    def __init__(self, column: str, row: int, text: str) -> None:
        self.column, self.row, self.text = column, row, text
        super().__init__(
            f"Column '{column}' holds the infinite value '{text}' in row {row}; infinite "
            "numbers are not supported: use a finite number, or leave the cell empty "
            "for a missing value."
        )


@dataclass(frozen=True, slots=True, eq=False)
class NumericColumn:
    """A numeric column: float64 values, shape (n_rows,), NaN where missing."""

    name: str
    values: npt.NDArray[np.float64]

    kind = ColumnKind.NUMERIC

    def as_float(self) -> npt.NDArray[np.float64]:
        """The column as the engine takes it: float64, NaN for missing."""
        return self.values


@dataclass(frozen=True, slots=True, eq=False)
class CategoricalColumn:
    """A categorical column: int32 codes, shape (n_rows,), into ``categories``; -1 is missing.

    ``categories`` is a tuple, or (for many categories, just parsed) a sequence that reads
    them from the parsed texts (``service.datasets.texts``).
    """

    name: str
    codes: npt.NDArray[np.int32]
    categories: Sequence[str]

    kind = ColumnKind.CATEGORICAL

    def as_float(self) -> npt.NDArray[np.float64]:
        """The codes as float64 with NaN for missing, the engine's form of a categorical feature."""
        out = self.codes.astype(np.float64)
        out[self.codes < 0] = np.nan
        return out


ColumnData = NumericColumn | CategoricalColumn


def canonical_text(value: float) -> str:
    """The text a number is written back as when its column turns categorical."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


_NO_VALUES = np.empty(0, dtype=np.float64)
_NO_VALUES.flags.writeable = False


class _OddTexts:
    """Row → text of the numeric cells whose text is not their number's canonical form.

    Such cells are common (``1.50``, ``3.0``, fixed decimals), so they are kept compactly:
    ascending row numbers and end offsets in two int64 arrays, the texts as one UTF-8
    buffer; about 17 bytes plus the text a cell, where a dict of strings took over 100.
    """

    def __init__(self) -> None:
        self._rows = array("q")
        self._ends = array("q")
        self._text = bytearray()

    def add(self, row: int, text: str) -> None:
        """Remember ``text`` for ``row``, which must be beyond every row added so far."""
        self._text += text.encode("utf-8")
        self._rows.append(row)
        self._ends.append(len(self._text))

    def get(self, row: int) -> str | None:
        index = bisect.bisect_left(self._rows, row)
        if index == len(self._rows) or self._rows[index] != row:
            return None
        return self._slice(index)

    def items(self) -> Iterator[tuple[int, str]]:
        """``(row, text)`` in ascending row order."""
        for index, row in enumerate(self._rows):
            yield row, self._slice(index)

    def _slice(self, index: int) -> str:
        start = self._ends[index - 1] if index else 0
        return self._text[start : self._ends[index]].decode("utf-8")


class ColumnBuilder:
    """Collects one column's cells (row by row) and decides its kind."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.n_rows = 0
        # Numeric mode: `_numbers` is an array; categorical mode: it is None.
        self._numbers: array[float] | None = array("d")
        self._odd_texts = _OddTexts()  # texts canonical_text would not reproduce
        self._first_infinite: int | None = None
        self._cells = CategoricalCells()

    def add_text(self, text: str) -> None:
        """Add a cell given as text; surrounding whitespace is not part of the value."""
        text = text.strip()
        if text in MISSING_TEXTS:
            self.add_missing()
            return
        if self._numbers is not None:
            number = _read_number(text)
            if number is not None:
                self.add_number(number, text)
                return
        self._add_category(text)

    def add_number(self, value: float, text: str | None = None) -> None:
        """Add a numeric cell; ``text`` is how it was written, if not its canonical form."""
        if math.isnan(value):
            self.add_missing()
            return
        if self._numbers is None:
            self._add_category(text if text is not None else canonical_text(value))
            return
        if math.isinf(value) and self._first_infinite is None:
            self._first_infinite = self.n_rows
        if text is not None and text != canonical_text(value):
            self._odd_texts.add(self.n_rows, text)
        self._numbers.append(value)
        self.n_rows += 1

    def add_missing(self) -> None:
        if self._numbers is not None:
            self._numbers.append(math.nan)
        else:
            self._cells.add_missing()
        self.n_rows += 1

    def finish(self, *, categorical: bool = False) -> ColumnData:
        """The finished column; ``categorical=True`` keeps even a numeric one as categories.

        Raises ``NonFiniteValue`` for a numeric column that holds an infinite number.
        """
        if categorical and self._numbers is not None:
            self._to_categorical()
        if self._numbers is not None:
            if self._first_infinite is not None:
                row = self._first_infinite
                text = self._odd_texts.get(row) or repr(self._numbers[row])
                raise NonFiniteValue(self.name, row + 1, text)
            self._odd_texts = _OddTexts()  # a numeric column no longer needs them
            # No copy: the array becomes the column's buffer (finish is the builder's end).
            values = np.frombuffer(self._numbers, dtype=np.float64) if self.n_rows else _NO_VALUES
            return NumericColumn(self.name, values)
        codes, categories = self._cells.finish()
        return CategoricalColumn(self.name, codes, categories)

    def _add_category(self, text: str) -> None:
        if self._numbers is not None:
            self._to_categorical()
        self._cells.add(text)
        self.n_rows += 1

    def _to_categorical(self) -> None:
        numbers, self._numbers = self._numbers, None
        odd, self._odd_texts = self._odd_texts, _OddTexts()
        assert numbers is not None
        odd_rows = odd.items()
        next_odd = next(odd_rows, None)
        for row, value in enumerate(numbers):
            if math.isnan(value):
                self._cells.add_missing()
                continue
            if next_odd is not None and next_odd[0] == row:
                text = next_odd[1]
                next_odd = next(odd_rows, None)
            else:
                text = canonical_text(value)
            self._cells.add(text)


def _read_number(text: str) -> float | None:
    """The number ``text`` spells, or None. Infinity spellings count as numbers here."""
    # float() also takes "1_000" and "nan"; neither is a number in a data file.
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


# --- summaries ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnSummary:
    n_missing: int
    n_unique: int
    stats: dict[str, Any]
    # service.datasets.distributions: a histogram (numeric) or the top categories; None when
    # not computed (a registered table: only its footers were read).
    distribution: dict[str, Any] | None


def summarize(column: ColumnData) -> ColumnSummary:
    """Missing and distinct counts, kind-specific statistics and the distribution, JSON-ready."""
    if isinstance(column, NumericColumn):
        present = column.values[~np.isnan(column.values)]
        stats: dict[str, Any] = {"min": None, "max": None, "mean": None, "std": None}
        if present.size:
            # Values near the float64 limit can overflow a mean or a std; such a statistic is
            # left out (None) rather than stored as an infinity JSON cannot spell.
            with np.errstate(over="ignore", invalid="ignore"):
                computed = (present.min(), present.max(), present.mean(), present.std())
            stats = {
                key: float(value) if math.isfinite(value) else None
                for key, value in zip(stats, computed, strict=True)
            }
        # In place: `present` is this function's own copy, and sorted it gives both the
        # distinct count and the histogram without another copy of the column.
        present.sort()
        return ColumnSummary(
            n_missing=int(column.values.size - present.size),
            n_unique=count_distinct_sorted(present),
            stats=stats,
            distribution={"histogram": histogram(present), **stats},
        )
    counts = category_counts(column.codes, len(column.categories))
    distribution = top_categories(counts[:-1], column.categories)
    return ColumnSummary(
        n_missing=int(counts[-1]),
        n_unique=len(column.categories),
        stats={"top": distribution["top"]},
        distribution=distribution,
    )


# --- bytes ----------------------------------------------------------------------------------


class ColumnDataError(ValueError):
    """Stored column bytes cannot be read back."""


def encode_column(column: ColumnData) -> bytes | bytearray:
    """The column's data in the stored format (see the module docstring)."""
    if isinstance(column, NumericColumn):
        return zlib.compress(column.values.astype("<f8", copy=False).data, level=6)
    return _gathered(_categorical_pieces(column.codes, [column.categories]))


@dataclass(frozen=True, slots=True)
class EncodedColumn:
    """A column as it is stored: its name, kind, summary and data."""

    name: str
    kind: ColumnKind
    summary: ColumnSummary
    data: bytes | bytearray


def take_encoded(columns: list[ColumnData]) -> Iterator[EncodedColumn]:
    """Summarise and encode ``columns`` first to last, emptying the list as it goes.

    What an upload does with its parsed columns: each is let go as soon as it is encoded,
    and a categorical one's categories as soon as they are compressed, before its codes are,
    so the upload's data is not held twice (as columns and as stored bytes) at the peak.
    """
    columns.reverse()  # popped from the end: first column first
    while columns:
        column = columns.pop()
        summary = summarize(column)
        name, kind = column.name, column.kind
        if isinstance(column, NumericColumn):
            data = encode_column(column)
            del column
        else:
            codes, categories = column.codes, [column.categories]
            del column
            data = _gathered(_categorical_pieces(codes, categories))
            del codes
        yield EncodedColumn(name, kind, summary, data)
        del data


def _gathered(pieces: Iterator[bytes]) -> bytearray:
    """The pieces as one bytearray, gathered in a memory map first.

    Appending them to a bytearray would reallocate it as it grows, and a reallocation may
    copy it (twice the compressed column for a moment); joining a list of them would leave
    the pieces' memory in the allocator's heap, where glibc keeps it, on top of whatever the
    database driver allocates next. A map grows in place and is unmapped when done with.
    """
    gathered = Mapped()
    for piece in pieces:
        gathered.append(piece)
    with memoryview(gathered.map) as view:
        out = bytearray(view[: gathered.used])
    gathered.map.close()
    # Not copied into bytes: the drivers store a bytearray as it is, and a copy would hold
    # the compressed column twice at the peak.
    return out


def _categorical_pieces(
    codes: npt.NDArray[np.int32], categories: list[Sequence[str]]
) -> Iterator[bytes]:
    """The compressed stored form of a categorical column, in pieces. ``categories`` holds
    the categories and is emptied once they are compressed: if nothing else refers to
    them, they are freed before the codes are compressed."""
    # Fed to the compressor in pieces, so neither the categories' JSON nor a copy of the
    # codes exists whole: with many categories each would cost more than the column.
    compressor = zlib.compressobj(level=6)
    length = sum(len(piece) for piece in json_list_bytes(categories[0]))
    yield compressor.compress(_LENGTH.pack(length))
    pending = bytearray()
    for piece in json_list_bytes(categories.pop()):
        pending += piece
        if len(pending) >= _PIECE_BYTES:
            yield compressor.compress(pending)
            pending.clear()
    yield compressor.compress(pending)
    step = _PIECE_BYTES // 4
    for start in range(0, codes.size, step):
        part = np.ascontiguousarray(codes[start : start + step], dtype="<i4")
        yield compressor.compress(part.data)
    yield compressor.flush()


def decode_column(name: str, kind: str, data: bytes, data_format: int = DATA_FORMAT) -> ColumnData:
    """Read back what ``encode_column`` wrote; raises ``ColumnDataError`` on damaged bytes."""
    if data_format != DATA_FORMAT:
        raise ColumnDataError(f"column '{name}' has unknown data format {data_format}")
    try:
        payload = zlib.decompress(data)
    except zlib.error as error:
        raise ColumnDataError(f"column '{name}' data is not zlib-compressed: {error}") from None
    if kind == ColumnKind.NUMERIC:
        if len(payload) % 8:
            raise ColumnDataError(f"column '{name}' data is not a whole number of float64 values")
        return NumericColumn(name, np.frombuffer(payload, dtype="<f8").astype(np.float64))
    if kind != ColumnKind.CATEGORICAL:
        raise ColumnDataError(f"column '{name}' has unknown kind '{kind}'")
    try:
        (length,) = _LENGTH.unpack_from(payload)
        categories = json.loads(payload[_LENGTH.size : _LENGTH.size + length])
        codes_bytes = payload[_LENGTH.size + length :]
    except (struct.error, ValueError) as error:
        raise ColumnDataError(f"column '{name}' categories are unreadable: {error}") from None
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise ColumnDataError(f"column '{name}' categories are not a list of strings")
    if len(codes_bytes) % 4:
        raise ColumnDataError(f"column '{name}' data is not a whole number of int32 codes")
    codes = np.frombuffer(codes_bytes, dtype="<i4").astype(np.int32)
    if codes.size and (codes.min() < -1 or codes.max() >= len(categories)):
        raise ColumnDataError(f"column '{name}' has codes outside its categories")
    return CategoricalColumn(name, codes, tuple(categories))
