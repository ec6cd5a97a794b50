"""A column of many distinct texts: kept as parsed, then sorted and numbered with NumPy.

Beyond a few thousand categories (an id column, say) a table from text to code costs more than
the texts themselves: a Python dict about 100 bytes a category, even a packed open-addressing
table 14 bytes a row on top of the text. So ``RawTexts`` keeps no table: every cell's UTF-8
bytes go into one buffer, their end offsets into another, in row order (an empty text is a
missing cell: no category is empty, as surrounding whitespace is not part of a value).

``finish`` sorts the rows by their bytes, which is the order ``sorted()`` gives the strings
(UTF-8 keeps code point order under bytewise comparison: RFC 3629, section 1), and numbers the
distinct texts in that order. Each text, zero-padded to the longest, is written with its row
number (big-endian, so it sorts as a number) into one fixed-width record, and NumPy sorts the
records in place as ``S`` strings: no index array, no copy. The sorted records are then read
once, a slice at a time, giving each row its code and the distinct texts, in order, to a
compact array of their own; every slice read is handed back to the system. Zero padding
cannot be told from a text's own trailing NULs, and uneven widths would make the records far
larger than the texts: such columns (texts holding NUL, or a longest text more than 4 bytes
beyond the mean) are sorted by a merge of sorted runs in Python instead, slower but as lean.

The buffers are anonymous memory maps, not ``bytearray``s or NumPy arrays: a map grows in
place (``mremap``) where growing a bytearray may copy it for a moment, and the pages of a map
already read can be handed back (``madvise``) while what replaces them is written. glibc's
allocator would otherwise keep such memory for reuse, and it would count towards the peak.
"""

from __future__ import annotations

import heapq
import mmap
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

# Cells gathered as strings before their bytes are appended at once.
BATCH = 4096
# Rows handled at once by the loops over records, and sorted at once by the Python merge:
# bounds the temporaries they create.
RUN = 4096
_FIRST_MAP_BYTES = 1 << 20  # address space only: untouched pages take no memory
_UINT32_MAX = 2**32 - 1
_CAN_RELEASE = hasattr(mmap, "MADV_DONTNEED")


class Mapped:
    """A growing byte buffer in an anonymous memory map; ``used`` bytes of it are written."""

    def __init__(self) -> None:
        self.map = mmap.mmap(-1, _FIRST_MAP_BYTES, flags=mmap.MAP_PRIVATE)
        self.used = 0
        self._released = 0

    def append(self, data: bytes) -> None:
        end = self.used + len(data)
        self.reserve(end)
        self.map[self.used : end] = data
        self.used = end

    def reserve(self, size: int) -> None:
        """Room for ``size`` bytes in all; pages not yet written read as zeros."""
        if size > len(self.map):
            self._grow(size)

    def _grow(self, at_least: int) -> None:
        size = max(at_least, 2 * len(self.map))
        try:
            self.map.resize(size)
        except (OSError, SystemError):  # no mremap (not Linux): copy, as a bytearray would
            bigger = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
            bigger[: self.used] = self.map[: self.used]
            self.map.close()
            self.map = bigger

    def release(self, end: int) -> None:
        """Hand the pages before byte ``end`` back to the system; they read as zeros after."""
        end -= end % mmap.PAGESIZE
        if _CAN_RELEASE and end > self._released:
            self.map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
            self._released = end

    def view(self, dtype: npt.DTypeLike, count: int) -> npt.NDArray[Any]:
        return np.frombuffer(self.map, dtype=dtype, count=count)


def mapped_zeros(size: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """A zeroed array in an anonymous memory map of its own, unmapped when the array goes.

    For a column-sized array: from ``malloc``, glibc may serve it from its heap once its
    adaptive mmap threshold has risen (it does as large blocks are freed), and a freed block
    there stays in the process's memory, on top of whatever is allocated next.
    """
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes < mmap.PAGESIZE:
        return np.zeros(size, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE), dtype=dtype, count=size)


class RawTexts:
    """Every cell's text in row order: one UTF-8 buffer and the texts' end offsets."""

    def __init__(self) -> None:
        self._text = Mapped()
        self._ends = Mapped()  # native uint32 (uint64 once the text passes 4 GiB)
        self._ends_type: type[np.uint32] | type[np.uint64] = np.uint32
        self._batch: list[str] = []
        self.n_rows = 0  # flushed to the buffers
        self.n_missing = 0
        self.max_length = 0  # in bytes
        self.has_nul = False

    def add(self, text: str) -> None:
        """A present cell's text (not empty), or ``""`` for a missing one."""
        batch = self._batch
        batch.append(text)
        if len(batch) >= BATCH:
            self._flush()

    def extend(self, texts: Sequence[str], codes: array[int]) -> None:
        """The cells ``texts[code]`` for each code; -1 reads ``texts[-1]``, which must be ``""``."""
        for start in range(0, len(codes), BATCH):
            self._batch.extend(map(texts.__getitem__, codes[start : start + BATCH]))
            self._flush()

    def _flush(self) -> None:
        batch = self._batch
        if not batch:
            return
        joined = "".join(batch)
        encoded = joined.encode("utf-8")
        if len(encoded) == len(joined):  # ASCII: a text's length is its byte count
            lengths = np.fromiter(map(len, batch), dtype=np.uint64, count=len(batch))
        else:
            sizes = (len(text.encode("utf-8")) for text in batch)
            lengths = np.fromiter(sizes, dtype=np.uint64, count=len(batch))
        batch.clear()
        self.has_nul = self.has_nul or "\x00" in joined
        self.n_missing += int(np.count_nonzero(lengths == 0))
        self.max_length = max(self.max_length, int(lengths.max()))
        ends = np.cumsum(lengths)
        ends += np.uint64(self._text.used)
        self._text.append(encoded)
        if self._text.used > _UINT32_MAX and self._ends_type is np.uint32:
            wider = Mapped()
            wider.append(self._ends.view(np.uint32, self.n_rows).astype(np.uint64).tobytes())
            self._ends.map.close()
            self._ends, self._ends_type = wider, np.uint64
        self._ends.append(ends.astype(self._ends_type).tobytes())
        self.n_rows += lengths.size

    def finish(self) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
        """Codes (-1 for missing) into the sorted distinct texts, and those texts. Spent after."""
        self._flush()
        n_present = self.n_rows - self.n_missing
        mean = self._text.used / max(n_present, 1)
        if self.has_nul or self.max_length > mean + 4:
            return self._merged()
        return self._sorted_records()

    # --- fixed-width records, sorted by NumPy ---------------------------------------------

    def _sorted_records(self) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
        n, width = self.n_rows, self.max_length
        row_bytes = 4 if n < 2**32 else 8
        records = self._records(width, row_bytes)
        record = width + row_bytes
        np.frombuffer(records.map, dtype=f"S{record}", count=n).sort()  # in place, no buffer
        table = records.view(np.uint8, n * record).reshape(n, record)
        row_type = np.dtype(">u4" if row_bytes == 4 else ">u8")
        codes: npt.NDArray[np.int32] = mapped_zeros(n, np.int32)
        distinct = Mapped()
        # Missing cells have empty (all-zero) texts, which sort first.
        next_code, previous = 0, np.bytes_(b"")
        for start in range(0, n, RUN):
            block = table[start : start + RUN]
            keys = np.ascontiguousarray(block[:, :width]).view(f"S{width}").ravel()
            rows = np.ascontiguousarray(block[:, width:]).view(row_type).ravel()
            new = np.empty(keys.size, dtype=bool)
            new[0] = keys[0] != previous
            np.not_equal(keys[1:], keys[:-1], out=new[1:])
            numbers = np.cumsum(new, dtype=np.int64)
            numbers += next_code - 1
            present = keys != b""
            codes[rows] = np.where(present, numbers, -1)
            distinct.append(keys[new & present].tobytes())
            next_code = int(numbers[-1]) + 1 if present[-1] else 0
            previous = keys[-1]
            del block
            records.release((start + RUN) * record)
        del table
        records.map.close()
        return codes, FixedWidthTexts(distinct.view(f"S{width}", next_code))

    def _records(self, width: int, row_bytes: int) -> Mapped:
        """Each row's text, zero-padded to ``width``, then its number in ``row_bytes`` big-
        endian bytes, as one record a row; the text and offset buffers are spent on the way."""
        n, record = self.n_rows, width + row_bytes
        records = Mapped()
        records.reserve(n * record)  # fresh pages read as zeros: the padding
        flat = records.view(np.uint8, n * record)
        text = self._text.view(np.uint8, self._text.used)
        ends = self._ends.view(self._ends_type, n)
        row_type = np.dtype(">u4" if row_bytes == 4 else ">u8")
        for start in range(0, n, RUN):
            stop = min(n, start + RUN)
            first = int(ends[start - 1]) if start else 0
            last = int(ends[stop - 1])
            chunk_ends = ends[start:stop].astype(np.int64)
            lengths = np.diff(chunk_ends, prepend=first)
            # Each byte's record (within the chunk) and its place in that record.
            places = np.repeat(np.arange(start, stop, dtype=np.int64) * record, lengths)
            places += np.arange(last - first)
            places -= np.repeat(chunk_ends - lengths - first, lengths)
            flat[places] = text[first:last]
            numbers = np.arange(start, stop, dtype=row_type).view(np.uint8)
            flat[start * record : stop * record].reshape(-1, record)[:, width:] = numbers.reshape(
                -1, row_bytes
            )
            self._text.release(last)
            self._ends.release((stop - 1) * ends.itemsize)  # the next chunk reads ends[stop - 1]
        del flat, text, ends
        self._text.map.close()
        self._ends.map.close()
        return records

    # --- the merge in Python, for texts the records cannot hold -----------------------------

    def _merged(self) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
        n = self.n_rows
        size = np.dtype(self._ends_type).itemsize
        ends = memoryview(self._ends.map)[: n * size].cast("I" if size == 4 else "Q")
        texts = _RowTexts(self._text.map, ends)
        runs = []
        for start in range(0, n, RUN):
            stop = min(n, start + RUN)
            run_texts = texts.bytes_of(range(start, stop))
            run = sorted(range(stop - start), key=run_texts.__getitem__)
            runs.append(np.asarray(run, dtype=np.int32) + np.int32(start))
            del run_texts
        codes: npt.NDArray[np.int32] = mapped_zeros(n, np.int32)
        firsts = array("q")  # a row of each category, in code order
        rows, numbers = array("q"), array("i")
        code, previous = -1, b""  # the empty text (missing) sorts first and stays -1
        for text, row in heapq.merge(*(_keyed(texts, run) for run in runs)):
            if text != previous:
                code, previous = code + 1, text
                firsts.append(row)
            rows.append(row)
            numbers.append(code)
            if len(rows) == RUN:
                codes[np.frombuffer(rows, dtype=np.int64)] = np.frombuffer(numbers, np.int32)
                rows, numbers = array("q"), array("i")
        if rows:
            codes[np.frombuffer(rows, dtype=np.int64)] = np.frombuffer(numbers, np.int32)
        texts.rows = np.frombuffer(firsts, dtype=np.int64)
        return codes, texts


def _keyed(texts: _RowTexts, run: npt.NDArray[np.int32]) -> Iterator[tuple[bytes, int]]:
    # A slice at a time: every run's generator starts at once, so a whole run as a list of
    # ints would put each row's Python int in memory together.
    for start in range(0, run.size, 256):
        rows = run[start : start + 256].tolist()
        yield from zip(texts.bytes_of(rows), rows, strict=True)


class _TextSequence(Sequence[str]):
    """What the two forms of sorted categories share: indexing, slicing and equality."""

    def _at(self, index: int) -> str:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("category index out of range")
        return self._at(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class FixedWidthTexts(_TextSequence):
    """Sorted texts as zero-padded ``S`` values (they hold no NUL of their own)."""

    def __init__(self, values: npt.NDArray[np.bytes_]) -> None:
        self._values = values

    def __len__(self) -> int:
        return int(self._values.size)

    def _at(self, index: int) -> str:
        return bytes(self._values[index]).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        for start in range(0, self._values.size, RUN):  # few Python strings alive at once
            for value in self._values[start : start + RUN].tolist():
                yield value.decode("utf-8")


class _RowTexts(_TextSequence):
    """Texts in a UTF-8 buffer, row r's ending at ``ends[r]``; as a sequence, the texts of
    ``rows`` in that order (set once they are known)."""

    def __init__(self, buffer: mmap.mmap, ends: memoryview) -> None:
        self._buffer, self._ends = buffer, ends
        self.rows = np.empty(0, dtype=np.int64)

    def bytes_of(self, rows: Iterator[int] | Sequence[int]) -> list[bytes]:
        buffer, ends = self._buffer, self._ends
        return [buffer[ends[row - 1] if row else 0 : ends[row]] for row in rows]

    def __len__(self) -> int:
        return int(self.rows.size)

    def _at(self, index: int) -> str:
        return self.bytes_of([int(self.rows[index])])[0].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        for start in range(0, self.rows.size, RUN):
            for text in self.bytes_of(self.rows[start : start + RUN].tolist()):
                yield text.decode("utf-8")
