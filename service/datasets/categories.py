"""A categorical column's categories while it is built: text → code, in little memory.

A Python dict of strings costs about 100 bytes a category on top of the text (the ``str``
object, the ``int`` code, the table slot): a CSV column of unique ids held that way took about
7× its bytes. ``CategoryIndex`` keeps such a dict only while a column has few categories;
beyond ``DICT_LIMIT`` it packs the texts into one UTF-8 buffer with their end offsets, finds
them through an open-addressing table of int32 codes, and checks a one-byte fingerprint before
it decodes a text to compare. That is about 12-20 bytes a category beyond its text.
``PackedStrings`` is the finished, sorted form: the same buffer read through an order.

The buffer is an anonymous memory map, not a ``bytearray``: growing a bytearray may copy it
(the whole column's text twice, for a moment), where a map grows in place (``mremap``).
"""

from __future__ import annotations

import heapq
import mmap
from array import array
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii
from typing import overload

import numpy as np
import numpy.typing as npt

# Categories kept in a plain dict (fast, and small in absolute terms) before packing.
DICT_LIMIT = 4096
# Texts sorted at once (as Python strings) by the final sort; more are sorted in runs this
# long and merged, so the strings alive at once stay bounded.
SORT_RUN = 4096
_EMPTY = -1
_OFFSET_LIMIT = 2**32 - 1  # 'I' end offsets, until the buffer outgrows them
_FIRST_MAP_BYTES = 1 << 20  # address space only: untouched pages take no memory


class PackedStrings(Sequence[str]):
    """Strings in one UTF-8 buffer, ``ends[i]`` the end of the i-th; read through ``order``."""

    def __init__(
        self, text: mmap.mmap, ends: array[int], order: npt.NDArray[np.int32] | None = None
    ) -> None:
        self._text = text
        self._ends = ends
        self._order = order

    def __len__(self) -> int:
        return len(self._ends) if self._order is None else int(self._order.size)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("category index out of range")
        return self.stored(index if self._order is None else int(self._order[index]))

    def __iter__(self) -> Iterator[str]:
        text, ends, n = self._text, self._ends, len(self)
        for start in range(0, n, 1024):  # positions a slice at a time: few ints alive
            stop = min(n, start + 1024)
            positions = (
                range(start, stop) if self._order is None else self._order[start:stop].tolist()
            )
            for position in positions:
                yield text[ends[position - 1] if position else 0 : ends[position]].decode()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def stored(self, position: int) -> str:
        """The text stored at ``position`` (insertion order, not sorted order)."""
        start = self._ends[position - 1] if position else 0
        return self._text[start : self._ends[position]].decode("utf-8")


def json_list_bytes(categories: Sequence[str]) -> Iterator[bytes]:
    """``json.dumps(list(categories))`` encoded, in pieces, without building the list."""
    separator = ""
    batch: list[str] = []
    yield b"["
    for category in categories:
        # The C function json.dumps itself uses for a str (ensure_ascii), minus its overhead.
        batch.append(encode_basestring_ascii(category))
        if len(batch) == 1024:
            yield (separator + ", ".join(batch)).encode("ascii")
            separator = ", "
            batch.clear()
    if batch:
        yield (separator + ", ".join(batch)).encode("ascii")
    yield b"]"


class CategoryIndex:
    """Codes for category texts, numbered in order of first appearance."""

    def __init__(self) -> None:
        self._lookup: dict[str, int] | None = {}
        self._text: mmap.mmap | None = None
        self._ends: array[int] = array("I")
        # A byte of each text's hash, compared before its bytes are.
        self._fingerprints = array("B")
        self._table: array[int] = array("i")

    def __len__(self) -> int:
        return len(self._lookup) if self._lookup is not None else len(self._ends)

    def code(self, text: str) -> int:
        """The code of ``text``, given it a new one if it is new."""
        if self._lookup is not None:
            code = self._lookup.setdefault(text, len(self._lookup))
            if len(self._lookup) > DICT_LIMIT:
                self._pack()
            return code
        return self._packed_code(text)

    def finish(self, codes: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
        """``codes`` renumbered (in place) so that categories are sorted, and the sorted
        categories. Sorted categories make the codes independent of row order. The index is
        spent."""
        if self._lookup is not None:
            categories: Sequence[str] = tuple(sorted(self._lookup))
            order = np.fromiter(
                (self._lookup[c] for c in categories), dtype=np.int32, count=len(categories)
            )
            self._lookup = None
        else:
            self._table = array("i")  # not needed to sort, and the largest part
            self._fingerprints = array("B")
            order = self._sorted_order()
            assert self._text is not None
            categories = PackedStrings(self._text, self._ends, order)
        remap = np.empty(order.size + 1, dtype=np.int32)
        remap[-1] = -1  # index -1 keeps missing missing
        remap[order] = np.arange(order.size, dtype=np.int32)
        # In place, a slice at a time: a renumbered copy would be a second column of codes.
        for start in range(0, codes.size, SORT_RUN):
            part = codes[start : start + SORT_RUN]
            part[:] = remap[part]
        return codes, categories

    # --- packed mode ----------------------------------------------------------------------

    def _pack(self) -> None:
        assert self._lookup is not None
        lookup, self._lookup = self._lookup, None
        self._text = mmap.mmap(-1, _FIRST_MAP_BYTES, flags=mmap.MAP_PRIVATE)
        self._table = array("i", [_EMPTY]) * (2 * len(lookup))
        for text in lookup:  # dicts keep insertion order: code order
            self._packed_code(text)

    def _packed_code(self, text: str) -> int:
        # Once a cell: locals rather than attribute lookups in the probing loop. The UTF-8
        # bytes are hashed and compared, not the str: a resize then rehashes stored bytes
        # without decoding them.
        table, fingerprints, ends = self._table, self._fingerprints, self._ends
        buffer = self._text
        assert buffer is not None
        encoded = text.encode("utf-8")
        digest = hash(encoded)
        fingerprint = (digest >> 56) & 0xFF  # top bits: the slot is taken from the bottom
        size = len(table)
        slot = digest % size
        code = table[slot]
        while code != _EMPTY:
            if fingerprints[code] == fingerprint:
                start = ends[code - 1] if code else 0
                if buffer[start : ends[code]] == encoded:
                    return code
            slot = slot + 1 if slot + 1 < size else 0
            code = table[slot]
        code = len(ends)
        used = ends[-1] if code else 0
        end = used + len(encoded)
        if end > len(buffer):
            buffer = self._grow(end)
        buffer[used:end] = encoded
        if end > _OFFSET_LIMIT and ends.typecode == "I":
            self._ends = ends = array("q", ends)
        ends.append(end)
        fingerprints.append(fingerprint)
        table[slot] = code
        # Linear probing stays short up to two thirds full; growing by half (not doubling)
        # keeps the table between 1.5 and 2.25 slots a category.
        if 3 * (code + 1) > 2 * size:
            del table  # this frame's reference too: the old table goes before the new one
            self._resize(size + size // 2)
        return code

    def _resize(self, size: int) -> None:
        self._table = array("i")  # let the old table go before the new one is made
        table = array("i", [_EMPTY]) * size
        start = 0
        buffer = self._text
        assert buffer is not None
        for code, end in enumerate(self._ends):
            slot = hash(buffer[start:end]) % size  # a map's slice is bytes
            start = end
            while table[slot] != _EMPTY:
                slot = slot + 1 if slot + 1 < size else 0
            table[slot] = code
        self._table = table

    def _grow(self, at_least: int) -> mmap.mmap:
        buffer = self._text
        assert buffer is not None
        size = max(at_least, 2 * len(buffer))
        try:
            buffer.resize(size)
        except (OSError, SystemError):  # no mremap (not Linux): copy, as a bytearray would
            bigger = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
            bigger[: len(buffer)] = buffer[:]
            buffer.close()
            self._text = buffer = bigger
        return buffer

    def _stored(self, code: int) -> str:
        assert self._text is not None
        start = self._ends[code - 1] if code else 0
        return self._text[start : self._ends[code]].decode("utf-8")

    def _sorted_order(self) -> npt.NDArray[np.int32]:
        """Codes in sorted text order; sorted in runs of ``SORT_RUN`` and merged, so only a
        run's worth of texts exists as Python strings at once (plus a few per run merging)."""
        n = len(self._ends)
        runs = []
        for start in range(0, n, SORT_RUN):
            texts = [self._stored(code) for code in range(start, min(start + SORT_RUN, n))]
            run = sorted(range(len(texts)), key=texts.__getitem__)
            runs.append(np.asarray(run, dtype=np.int32) + np.int32(start))
            del texts
        if len(runs) == 1:
            return runs[0]
        merged = heapq.merge(*(self._keyed(run) for run in runs))
        return np.fromiter((code for _, code in merged), dtype=np.int32, count=n)

    def _keyed(self, run: npt.NDArray[np.int32]) -> Iterator[tuple[str, int]]:
        # A slice at a time: every run's generator starts at once, so a whole run as a list
        # of ints would put each code's Python int in memory together.
        for start in range(0, run.size, 256):
            for code in run[start : start + 256].tolist():
                yield self._stored(code), code


# --- summaries, lean on memory: int32 counts, no full-length sort ------------------------------


def category_counts(codes: npt.NDArray[np.int32], n_categories: int) -> npt.NDArray[np.int32]:
    """Rows per category, shape (n_categories + 1,): the last entry counts the missing (-1)."""
    counts = np.zeros(n_categories + 1, dtype=np.int32)
    np.add.at(counts, codes, 1)
    return counts


def top_indices(counts: npt.NDArray[np.int32], k: int) -> npt.NDArray[np.intp]:
    """The ``k`` largest counts' indices, largest first, ties in index order: what a stable
    argsort of ``-counts`` starts with, without sorting (or copying) every count."""
    n = counts.size
    if n <= k:
        return np.argsort(-counts.astype(np.int64), kind="stable")
    kth = np.partition(counts, n - k)[n - k]  # an int32 copy; argpartition's are int64
    greater = np.flatnonzero(counts > kth)  # fewer than k, by the choice of kth
    greater = greater[np.argsort(-counts[greater].astype(np.int64), kind="stable")]
    ties: list[npt.NDArray[np.intp]] = []
    need = k - greater.size
    for start in range(0, n, SORT_RUN):
        if need <= 0:
            break
        found = np.flatnonzero(counts[start : start + SORT_RUN] == kth)[:need] + start
        ties.append(found)
        need -= found.size
    return np.concatenate([greater, *ties])
