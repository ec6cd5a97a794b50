"""Numeric summaries merged row group by row group: the histogram counted while the parts are
written, read back only where the column's range outgrew the edges it was counted with, and
equal to the in-memory summary (``summarize``) however the rows come."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from service.datasets import summaries as summaries_module
from service.datasets.columns import NumericColumn, summarize
from service.datasets.parts import PartWriter
from service.datasets.service import part_records
from service.datasets.summaries import NumericSummary, add_batch, count_histograms
from service.store import DataStore

ROWS = 5000


def _column(order: str) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(3)
    values = rng.normal(size=ROWS)
    if order == "ascending":
        values.sort()
    elif order == "descending":
        values = np.sort(values)[::-1].copy()
    elif order == "extremes first":
        low, high = np.argmin(values), np.argmax(values)
        values[[0, 1, low, high]] = values[[low, high, 0, 1]]
    elif order == "missing first":
        values[:1500] = np.nan
    elif order == "missing throughout":
        values[rng.random(ROWS) < 0.3] = np.nan
    elif order == "constant":
        values[:] = 2.5
    elif order == "one new extreme at the end":
        values = np.round(values, 1)
        values[-1] = 40.0
    return values


ORDERS = [
    "random",
    "ascending",
    "descending",
    "extremes first",
    "missing first",
    "missing throughout",
    "constant",
    "one new extreme at the end",
]


def _written(
    values: npt.NDArray[np.float64], root: Path, *, per_group: bool
) -> tuple[DataStore, list[NumericSummary], list]:
    """The column written as parts of 3 row groups of 256 rows, in batches of 700 rows; the
    summary fed each row group as it is written (the uploads), or each batch before it is
    written (the batch predictions), so that its batches straddle the row groups."""
    store = DataStore(str(root / "store"))
    table = pa.table(
        {
            "x": pa.array(values, mask=np.isnan(values)),
            "y": pa.array(values[::-1], mask=np.isnan(values[::-1])),
        }
    )
    summaries = [NumericSummary(), NumericSummary()]
    writer = PartWriter(
        store,
        "d",
        table.schema,
        row_group_rows=256,
        groups_per_part=3,
        on_group=partial(add_batch, summaries) if per_group else None,
    )
    for batch in table.to_batches(max_chunksize=700):
        if not per_group:
            add_batch(summaries, batch)
        writer.write(batch)
    return store, summaries, part_records("d", writer.finish())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("per_group", [True, False], ids=["row groups", "batches"])
@pytest.mark.parametrize("order", ORDERS)
def test_the_histogram_counted_while_writing_is_the_in_memory_one(
    order: str, per_group: bool, threads: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if threads == 2:  # the columns read back on two threads, as for large uploads
        monkeypatch.setattr(summaries_module, "READ_BACK_THREADED", 0)
    values = _column(order)
    store, summaries, parts = _written(values, tmp_path, per_group=per_group)
    found = count_histograms(store, parts, ["x", "y"], summaries)
    for column, summary in zip((values, values[::-1]), found, strict=True):
        expected = summarize(NumericColumn("x", column))
        assert summary.distribution["histogram"] == expected.distribution["histogram"]
        assert summary.n_missing == expected.n_missing
        assert summary.stats["min"] == expected.stats["min"]
        assert summary.stats["max"] == expected.stats["max"]


@pytest.mark.parametrize("order", ["extremes first", "constant"])
def test_a_column_whose_range_is_known_early_is_not_read_back(order: str, tmp_path: Path) -> None:
    values = _column(order)
    store, summaries, parts = _written(values, tmp_path, per_group=True)
    # Its first row group held its extremes: the counts are final as written, so the parts
    # are not needed at all.
    store.delete_prefix("datasets/")
    (found,) = count_histograms(store, parts, ["x"], summaries[:1])
    assert (
        found.distribution["histogram"]
        == summarize(NumericColumn("x", values)).distribution["histogram"]
    )


def test_a_late_extreme_reads_back_only_the_rows_before_it(tmp_path: Path) -> None:
    values = np.random.default_rng(4).uniform(-1.0, 1.0, ROWS)
    values[0] = -1.0  # the minimum, in the first row group
    values[2000] = 9.0  # the maximum, in the third part (rows 1536-2303)
    store, summaries, parts = _written(values, tmp_path, per_group=True)
    assert summaries[0].counted_from == 1792  # the row group holding row 2000
    # The parts after the one the extreme is in are never opened.
    for part in parts[3:]:
        store.delete(part.path)
    (found,) = count_histograms(store, parts, ["x"], summaries[:1])
    assert (
        found.distribution["histogram"]
        == summarize(NumericColumn("x", values)).distribution["histogram"]
    )
