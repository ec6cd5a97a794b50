"""Column summaries merged part by part, for uploads streamed into parts.

``summarize`` (``service.datasets.columns``) needs a whole column and a sorted copy of it; an
upload streamed batch by batch cannot hold either. These accumulators take a column one batch
at a time and give the same ``ColumnSummary`` fields at the end:

- numeric: present and missing counts, min and max (exact), mean and standard deviation merged
  batch by batch with the pairwise update of Chan, Golub and LeVeque ("Algorithms for computing
  the sample variance", The American Statistician 37(3), 1983): equal to NumPy's up to rounding
  (about 1e-15 relative). The histogram has the edges ``bin_edges`` gives for the exact min and
  max, which are known only at the end; each batch is counted as it comes with the edges of the
  range seen so far (a binary search among them, which gives the counts ``histogram`` gives on
  the sorted column, exactly), and when a batch widens the range the counts start again from
  it. ``count_histograms`` then reads back, one row group at a time, only the rows before the
  range last widened. Most columns settle early (a bounded measurement, a category code, a
  ratio) and are never read back; a column whose extremes keep coming (a timestamp, a running
  id, or an unbounded distribution's tails) is read back up to its last new extreme.
- the distinct count: exact while a column has at most ``DISTINCT_EXACT`` distinct values (a
  sorted array of them, merged per batch); beyond that, a HyperLogLog sketch (Flajolet, Fusy,
  Gandouet and Meunier, "HyperLogLog: the analysis of a near-optimal cardinality estimation
  algorithm", AofA 2007) of ``2**HLL_BITS`` registers, with the linear-counting correction for
  small counts from the same paper: a standard error of 1.04 / sqrt(2**14), about 0.8 %.
- categorical: every distinct category with its count, merged per batch as Arrow tables,
  exact (the top categories and the distinct count ``summarize`` gives) up to
  ``CATEGORIES_EXACT`` categories; past that (a column of ids) the distinct count is the same
  HyperLogLog estimate, and the top categories are ranked among the ``CATEGORIES_EXACT`` most
  frequent when the column passed that number, counted exactly from there on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from service.datasets.columns import ColumnSummary
from service.datasets.distributions import TOP_CATEGORIES, bin_edges
from service.datasets.part_reader import open_part
from service.db.tables import ColumnKind, DatasetPartRecord
from service.store import DataStore

# Distinct numbers counted exactly per column (8 bytes each) before the sketch takes over.
DISTINCT_EXACT = 1 << 16
HLL_BITS = 14
_HLL_M = 1 << HLL_BITS
_HLL_ALPHA = 0.7213 / (1 + 1.079 / _HLL_M)
_REST_BITS = 64 - HLL_BITS
# Categories counted exactly per column before the top ones are kept and the rest sketched.
CATEGORIES_EXACT = 1 << 14
_HASH_SLICE = 8192
_NUMERIC_SLICE = 16384
# Values read back for the histograms past which two threads read them (32 MiB of float64).
READ_BACK_THREADED = 1 << 22
_CATEGORY_SLICE = 8192
# Category (value, count) pieces gathered before they are merged into one.
_MERGE_PIECES = 64


def _mix(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
    generators", OOPSLA 2014): a 64-bit hash whose bits are all well mixed."""
    z = bits + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _bit_length(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Each value's bit length (0 for 0). Values below 2^53 are exact as float64, whose
    binary exponent (frexp's) is then the bit length."""
    return np.frexp(values.astype(np.float64))[1].astype(np.int64)


class HyperLogLog:
    """A HyperLogLog sketch of 64-bit hashes (see the module's docstring)."""

    def __init__(self) -> None:
        self._registers = np.zeros(_HLL_M, dtype=np.uint8)

    def add(self, hashed: npt.NDArray[np.uint64]) -> None:
        index = (hashed >> np.uint64(_REST_BITS)).astype(np.intp)
        rest = hashed & np.uint64((1 << _REST_BITS) - 1)
        rank = (_REST_BITS + 1 - _bit_length(rest)).astype(np.uint8)
        np.maximum.at(self._registers, index, rank)

    def count(self) -> int:
        registers = self._registers
        estimate = (
            _HLL_ALPHA * _HLL_M * _HLL_M / float(np.sum(np.ldexp(1.0, -registers.astype(np.int32))))
        )
        zeros = int(np.count_nonzero(registers == 0))
        if estimate <= 2.5 * _HLL_M and zeros:
            estimate = _HLL_M * math.log(_HLL_M / zeros)
        return round(estimate)


class DistinctCounter:
    """Distinct float64 values (``-0.0`` is ``0.0``): exact, then a HyperLogLog sketch."""

    def __init__(self) -> None:
        self._exact: npt.NDArray[np.float64] | None = np.empty(0, dtype=np.float64)
        self._sketch: HyperLogLog | None = None

    def add(self, present: npt.NDArray[np.float64]) -> None:
        if self._exact is not None:
            # The batch's new values found in the sorted set by binary search and inserted:
            # np.union1d would sort the whole set again for every batch.
            new = np.unique(present)
            exact = self._exact
            if exact.size:
                at = np.searchsorted(exact, new)
                known = exact[np.minimum(at, exact.size - 1)] == new
                new, at = new[~known], at[~known]
            if exact.size + new.size <= DISTINCT_EXACT:
                self._exact = np.insert(exact, at, new) if exact.size else new
                return
            self._exact = None
            self._sketch = HyperLogLog()
            self._hash(exact)
            present = new
        self._hash(present)

    def _hash(self, present: npt.NDArray[np.float64]) -> None:
        assert self._sketch is not None
        # + 0.0 turns -0.0 into 0.0, so both hash alike.
        self._sketch.add(_mix((present + 0.0).view(np.uint64)))

    def count(self) -> int:
        if self._exact is not None:
            return int(self._exact.size)
        assert self._sketch is not None
        return self._sketch.count()


def _bins(edges: npt.NDArray[np.float64], values: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """Each value's bin among ``edges`` (all values within the first and last edge): the
    number of inner edges at or below it, [e_i, e_i+1) with the last bin closed at the
    maximum, as ``histogram`` counts on the sorted values.

    Equal-width edges (``bin_edges``' usual case) give a value's bin by arithmetic, as
    ``np.histogram`` finds it, each guess then checked against the edges themselves; only the
    values a guess misses (rounding at an edge, or merged edges) are searched for.
    """
    n = edges.size - 1
    span = float(edges[-1] - edges[0])
    if not (math.isfinite(span) and span > 0):
        return np.searchsorted(edges[1:-1], values, side="right")
    with np.errstate(over="ignore", invalid="ignore"):
        guess: npt.NDArray[np.intp] = ((values - edges[0]) * (n / span)).astype(np.intp)
    np.clip(guess, 0, n - 1, out=guess)
    wrong = (values < edges[guess]) | ((values >= edges[guess + 1]) & (guess < n - 1))
    if wrong.any():
        guess[wrong] = np.searchsorted(edges[1:-1], values[wrong], side="right")
    return guess


def _text_hashes(values: pa.Array) -> npt.NDArray[np.uint64]:
    """64-bit hashes of distinct texts: Python's string hash (SipHash, keyed per process,
    which is all one upload needs), mixed again so that every bit is used."""
    hashed = np.empty(len(values), dtype=np.int64)
    for start in range(0, len(values), _HASH_SLICE):  # few Python strings alive at once
        texts = values.slice(start, _HASH_SLICE).to_pylist()
        hashed[start : start + len(texts)] = [hash(text) for text in texts]
    return _mix(hashed.view(np.uint64))


class NumericSummary:
    """One numeric column's summary, batch by batch (float64, NaN missing)."""

    def __init__(self) -> None:
        self.n_missing = 0
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean
        self.low = math.inf
        self.high = -math.inf
        self.distinct = DistinctCounter()
        self.rows = 0  # rows seen, missing ones included
        # The histogram of the rows from ``counted_from`` on, with the edges of the range
        # seen so far (see the module's docstring).
        self.counts: npt.NDArray[np.int64] | None = None
        self.counted_from = 0

    def add(self, values: npt.NDArray[np.float64]) -> None:
        """A batch of the column's rows, in order (NaN missing)."""
        # In slices: a row group's temporaries (1 MiB each at 2^17 rows) come and go through
        # fresh pages every time (glibc returns them), which cost more than the arithmetic;
        # a slice's are reused (measured: 2,000 page faults a row group, 85 -> 40 ms).
        for start in range(0, values.size, _NUMERIC_SLICE):
            self._add(values[start : start + _NUMERIC_SLICE])

    def _add(self, values: npt.NDArray[np.float64]) -> None:
        start = self.rows
        self.rows += values.size
        present = values[~np.isnan(values)]
        self.n_missing += values.size - present.size
        if not present.size:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            mean = float(present.mean())
            m2 = float(np.sum(np.square(present - mean)))
        low, high = float(present.min()), float(present.max())
        if low < self.low or high > self.high:
            # New edges: what was counted with the old ones is read back at the end.
            self.low, self.high = min(self.low, low), max(self.high, high)
            self.counts = None
            self.counted_from = start
        self.distinct.add(present)
        n_a, n_b = self.n, present.size
        total = n_a + n_b
        if n_a == 0:
            self.mean, self.m2 = mean, m2
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                delta = mean - self.mean
                self.mean += delta * (n_b / total)
                self.m2 += m2 + delta * delta * (n_a * n_b / total)
        self.n = total
        if math.isinf(self.low) or math.isinf(self.high):
            # An infinity (an upload refuses it later): no edges to count with yet; the rows
            # are all read back, as they were before counting while writing.
            self.counts = None
            self.counted_from = self.rows
            return
        self._count(present)

    def edges(self) -> npt.NDArray[np.float64] | None:
        return bin_edges(self.low, self.high) if self.n else None

    def count_batch(self, values: npt.NDArray[np.float64]) -> None:
        """Add values read back from the parts (rows before ``counted_from``) to the
        histogram."""
        for start in range(0, values.size, _NUMERIC_SLICE):
            piece = values[start : start + _NUMERIC_SLICE]
            self._count(piece[~np.isnan(piece)])

    def _count(self, present: npt.NDArray[np.float64]) -> None:
        edges = self.edges()
        if edges is None:
            return
        if self.counts is None:
            self.counts = np.zeros(edges.size - 1, dtype=np.int64)
        self.counts += np.bincount(_bins(edges, present), minlength=self.counts.size)

    def finish(self) -> ColumnSummary:
        stats: dict[str, Any] = {"min": None, "max": None, "mean": None, "std": None}
        histogram: dict[str, list[Any]] = {"edges": [], "counts": []}
        if self.n:
            # A mean or deviation beyond float64 (inf or nan here) is left out, as summarize
            # leaves it out; without a mean there is no deviation either.
            mean = self.mean
            std = math.sqrt(self.m2 / self.n) if math.isfinite(mean) else math.nan
            computed = (self.low, self.high, mean, std)
            stats = {
                key: float(value) if math.isfinite(value) else None
                for key, value in zip(stats, computed, strict=True)
            }
            edges = self.edges()
            assert edges is not None
            counts = self.counts if self.counts is not None else np.zeros(edges.size - 1)
            histogram = {"edges": edges.tolist(), "counts": [int(c) for c in counts]}
        return ColumnSummary(
            n_missing=self.n_missing,
            n_unique=self.distinct.count(),
            stats=stats,
            distribution={"histogram": histogram, **stats},
        )


class CategoricalSummary:
    """One categorical column's categories and their counts, batch by batch.

    Exact while the column has at most ``CATEGORIES_EXACT`` categories. Past that (a column of
    ids, say) the ``CATEGORIES_EXACT`` most frequent so far are kept and counted on exactly,
    the distinct count becomes a HyperLogLog estimate, and a category first seen after that
    point is not among the top ones listed (the present and missing counts stay exact).
    """

    def __init__(self) -> None:
        self.n_missing = 0
        self.n_present = 0
        self._pieces: list[pa.Table] = []
        self._piece_rows = 0
        self._tracked: pa.Array | None = None
        self._sketch: HyperLogLog | None = None

    def add(self, texts: pa.Array | pa.ChunkedArray) -> None:
        """A batch of the column: strings, null where missing."""
        # In slices: the counting's and the sketch's temporaries are a slice's, not a row
        # group's (a row group of unique ids cost 2.9x their bytes at the peak, slices 1.2x).
        for start in range(0, len(texts), _CATEGORY_SLICE):
            self._add(texts.slice(start, _CATEGORY_SLICE))

    def _add(self, texts: pa.Array | pa.ChunkedArray) -> None:
        self.n_missing += texts.null_count
        present = texts.drop_null() if texts.null_count else texts
        self.n_present += len(present)
        counted = pc.value_counts(present)
        values, counts = counted.field("values"), counted.field("counts")
        if self._sketch is not None:
            assert self._tracked is not None
            self._sketch.add(_text_hashes(values))
            keep = pc.is_in(values, value_set=self._tracked)
            values, counts = values.filter(keep), counts.filter(keep)
        self._pieces.append(pa.table({"value": values, "count": counts}))
        self._piece_rows += len(values)
        if len(self._pieces) >= _MERGE_PIECES or self._piece_rows > CATEGORIES_EXACT:
            merged = self._merged()
            self._pieces, self._piece_rows = [merged], merged.num_rows
            if self._sketch is None and merged.num_rows > CATEGORIES_EXACT:
                self._approximate(merged)

    def _approximate(self, merged: pa.Table) -> None:
        self._sketch = HyperLogLog()
        for start in range(0, merged.num_rows, CATEGORIES_EXACT):
            piece = merged.column("value").slice(start, CATEGORIES_EXACT).combine_chunks()
            self._sketch.add(_text_hashes(piece))
        kept = _top(merged, CATEGORIES_EXACT)
        self._tracked = kept.column("value").combine_chunks()
        self._pieces, self._piece_rows = [kept], kept.num_rows

    def _merged(self) -> pa.Table:
        if not self._pieces:
            return pa.table({"value": pa.array([], pa.string()), "count": pa.array([], pa.int64())})
        table = pa.concat_tables(self._pieces)
        if len(self._pieces) == 1:
            return table
        summed = table.group_by("value").aggregate([("count", "sum")])
        return summed.rename_columns(["value", "count"])

    def finish(self) -> ColumnSummary:
        merged = self._merged()
        self._pieces = []
        listed = [
            {"value": value, "count": count}
            for value, count in zip(
                *(_top(merged, TOP_CATEGORIES).column(c).to_pylist() for c in ("value", "count")),
                strict=True,
            )
        ]
        distribution = {
            "top": listed,
            "n_other": self.n_present - sum(item["count"] for item in listed),
        }
        n_unique = merged.num_rows
        if self._sketch is not None:
            n_unique = max(n_unique, self._sketch.count())
        return ColumnSummary(
            n_missing=self.n_missing,
            n_unique=n_unique,
            stats={"top": distribution["top"]},
            distribution=distribution,
        )


def _top(table: pa.Table, k: int) -> pa.Table:
    """The ``k`` most frequent categories, most frequent first, ties in the categories' sorted
    order (code point order, which is UTF-8's bytewise order), as ``top_categories`` ranks."""
    if table.num_rows == 0:
        return table
    keys = [("count", "descending"), ("value", "ascending")]
    indices = pc.select_k_unstable(table, k=min(k, table.num_rows), sort_keys=keys)
    return table.take(indices)


Summary = NumericSummary | CategoricalSummary


def summary_for(kind: ColumnKind) -> Summary:
    return NumericSummary() if kind == ColumnKind.NUMERIC else CategoricalSummary()


def add_batch(summaries: Sequence[Summary], batch: pa.RecordBatch | pa.Table) -> None:
    """A batch (or a table: a row group) in the parts' schema (float64 or string, null
    missing) into the summaries."""
    for summary, column in zip(summaries, batch.columns, strict=True):
        if isinstance(summary, CategoricalSummary):
            summary.add(column)
        elif isinstance(column, pa.ChunkedArray):
            summary.add(column.to_numpy())  # one array, nulls NaN: a row group's, 1 MiB
        else:
            summary.add(column.to_numpy(zero_copy_only=False))


def count_histograms(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    names: Sequence[str],
    summaries: Sequence[Summary],
) -> list[ColumnSummary]:
    """Finish every summary, first counting into the numeric columns' histograms the rows
    their ``add`` counted with edges the range later outgrew: read back from the parts just
    written (a column of a row group at a time, without verifying: this process wrote and
    hashed them), only up to the row where each column's range last widened. Past
    ``READ_BACK_THREADED`` values, half the columns are read back on a second thread (pyarrow's
    decoding and NumPy's counting release the GIL); below, a thread's own allocator arena
    would cost more memory than a small upload."""
    wanted = [
        (name, summary)
        for name, summary in zip(names, summaries, strict=True)
        if isinstance(summary, NumericSummary) and summary.n and summary.counted_from
    ]
    if sum(summary.counted_from for _, summary in wanted) < READ_BACK_THREADED:
        _read_back(store, parts, wanted)
    else:
        with ThreadPoolExecutor(1, thread_name_prefix="histograms") as pool:
            other = pool.submit(_read_back, store, parts, wanted[1::2])
            _read_back(store, parts, wanted[0::2])
            other.result()
    return [summary.finish() for summary in summaries]


def _read_back(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    wanted: Sequence[tuple[str, NumericSummary]],
) -> None:
    until = max((summary.counted_from for _, summary in wanted), default=0)
    # The summaries were fed these parts' rows in order, from the first part's first row.
    first = parts[0].row_offset if parts else 0
    for part in parts:
        start = part.row_offset - first
        if start >= until:
            break
        parquet = open_part(store, part, verify=False)
        for group in range(parquet.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            # A column of a row group at a time: 1 MiB of float64 at 2^17 rows.
            for name, summary in wanted:
                if start >= summary.counted_from:
                    continue
                table = parquet.read_row_group(group, columns=[name], use_threads=False)
                values = table.column(0).to_numpy()  # nulls become NaN
                del table
                summary.count_batch(values[: summary.counted_from - start])
            start += rows
