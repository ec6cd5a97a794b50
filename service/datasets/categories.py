"""A categorical column's cells while it is built, and the summaries of its codes.

``CategoricalCells`` numbers texts through a Python dict while a column has few categories:
fast, and small in absolute terms. A dict costs about 100 bytes a category on top of the text
(the ``str`` object, the ``int`` code, the table slot): a column of unique ids kept so took
7× its bytes. So once a column has more than ``DICT_LIMIT`` categories, its texts go to a
``RawTexts`` (``service.datasets.texts``) instead, which keeps each row's bytes and sorts and
numbers them once the column is complete: the text and 4 bytes a row.

That is more than a dict of a few thousand texts that each come back often costs (4 bytes a
row), so the dict is kept past ``DICT_LIMIT`` while the number of categories the whole column
will have, estimated from how many were seen once and twice so far (Chao's estimator: A. Chao,
"Nonparametric estimation of the number of classes in a population", Scandinavian Journal of
Statistics 11, 1984), stays within ``DICT_MAX``: the estimate is made again each time the
categories double, and beyond ``DICT_MAX`` the texts go raw whatever it says. A column of unique
ids has seen every text once, which estimates without bound: it goes raw at once.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii

import numpy as np
import numpy.typing as npt

from service.datasets.texts import RawTexts, mapped_zeros

# Categories kept in a plain dict before the column's texts may be kept raw instead, and the
# most kept in one (about 4 MiB) when the column is estimated to have no more.
DICT_LIMIT = 4096
DICT_MAX = 32768
# Codes renumbered at once, and counts searched at once, by the loops below.
SLICE = 4096


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


class CategoricalCells:
    """A categorical column's cells, row by row; ``finish`` gives codes into sorted categories."""

    def __init__(self) -> None:
        self._lookup: dict[str, int] | None = {}
        self._codes = array("i")  # while the dict is used
        self._texts: RawTexts | None = None
        self._check_above = DICT_LIMIT  # categories beyond which to decide again

    def add(self, text: str) -> None:
        """A present cell (``text`` is not empty)."""
        lookup = self._lookup
        if lookup is None:
            assert self._texts is not None
            self._texts.add(text)
            return
        self._codes.append(lookup.setdefault(text, len(lookup)))
        if len(lookup) > self._check_above:
            if len(lookup) > DICT_MAX or estimated_categories(self._codes) > DICT_MAX:
                self._to_texts()
            else:
                self._check_above = 2 * len(lookup)

    def add_missing(self) -> None:
        if self._texts is not None:
            self._texts.add("")
        else:
            self._codes.append(-1)

    def finish(self) -> tuple[npt.NDArray[np.int32], Sequence[str]]:
        """Each cell's code (-1 for missing) into the sorted categories, and the categories.
        Sorted categories make the codes independent of row order. The cells are spent."""
        if self._texts is not None:
            texts, self._texts = self._texts, None
            return texts.finish()
        assert self._lookup is not None
        codes = np.frombuffer(self._codes, dtype=np.int32) if self._codes else np.empty(0, np.int32)
        categories = tuple(sorted(self._lookup))
        order = np.fromiter(
            (self._lookup[c] for c in categories), dtype=np.int32, count=len(categories)
        )
        self._lookup = None
        remap = np.empty(order.size + 1, dtype=np.int32)
        remap[-1] = -1  # index -1 keeps missing missing
        remap[order] = np.arange(order.size, dtype=np.int32)
        # In place, a slice at a time: a renumbered copy would be a second column of codes.
        for start in range(0, codes.size, SLICE):
            part = codes[start : start + SLICE]
            part[:] = remap[part]
        return codes, categories

    def _to_texts(self) -> None:
        self._check_above = DICT_MAX
        assert self._lookup is not None
        texts = [*self._lookup, ""]  # in code order (dicts keep insertion order); -1 reads ""
        self._lookup = None
        codes, self._codes = self._codes, array("i")
        self._texts = RawTexts()
        self._texts.extend(texts, codes)


def estimated_categories(codes: array[int]) -> float:
    """The categories of a column whose first rows have ``codes`` (-1 for missing): the
    bias-corrected Chao1 estimate ``k + f1 (f1 - 1) / (2 (f2 + 1))`` of k seen so far, f1 of
    them once and f2 twice. When every category is seen once it is about k²/2."""
    seen = np.frombuffer(codes, dtype=np.int32) if codes else np.empty(0, np.int32)
    counts = np.bincount(seen[seen >= 0])
    del seen  # the array's buffer must not stay exported: it grows after this
    once, twice = int(np.count_nonzero(counts == 1)), int(np.count_nonzero(counts == 2))
    return counts.size + once * (once - 1) / (2 * (twice + 1))


# --- summaries, lean on memory: int32 counts, no full-length sort ------------------------------


def category_counts(codes: npt.NDArray[np.int32], n_categories: int) -> npt.NDArray[np.int32]:
    """Rows per category, shape (n_categories + 1,): the last entry counts the missing (-1)."""
    counts: npt.NDArray[np.int32] = mapped_zeros(n_categories + 1, np.int32)
    np.add.at(counts, codes, 1)
    return counts


def top_indices(counts: npt.NDArray[np.int32], k: int) -> npt.NDArray[np.intp]:
    """The ``k`` largest counts' indices, largest first, ties in index order: what a stable
    argsort of ``-counts`` starts with, without sorting (or copying) every count."""
    n = counts.size
    if n <= k:
        return np.argsort(-counts.astype(np.int64), kind="stable")
    # Most often (an id column: every count 1) the largest count alone fills the k, and its
    # first k indices answer without the copy np.partition makes.
    largest = counts.max()
    if _count_equal(counts, largest) >= k:
        return _first_equal(counts, largest, k)
    kth = np.partition(counts, n - k)[n - k]  # an int32 copy; argpartition's are int64
    greater = np.flatnonzero(counts > kth)  # fewer than k, by the choice of kth
    greater = greater[np.argsort(-counts[greater].astype(np.int64), kind="stable")]
    return np.concatenate([greater, _first_equal(counts, kth, k - greater.size)])


def _count_equal(counts: npt.NDArray[np.int32], value: np.int32) -> int:
    return sum(
        int(np.count_nonzero(counts[start : start + SLICE] == value))
        for start in range(0, counts.size, SLICE)
    )


def _first_equal(counts: npt.NDArray[np.int32], value: np.int32, k: int) -> npt.NDArray[np.intp]:
    """The first ``k`` indices (or fewer) where ``counts`` equals ``value``, a slice at a time."""
    found: list[npt.NDArray[np.intp]] = [np.empty(0, dtype=np.intp)]
    for start in range(0, counts.size, SLICE):
        if k <= 0:
            break
        hits = np.flatnonzero(counts[start : start + SLICE] == value)[:k] + start
        found.append(hits)
        k -= hits.size
    return np.concatenate(found)
