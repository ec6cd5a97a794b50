"""A dataset's parts as the engine's out-of-core fits take them: read on the Dask workers.

``engine``'s ``fit_parts`` ships a reader function and one picklable source per part to the
workers, which open the parts themselves; the engine imports no storage library
(ARCHITECTURE.md). :func:`worker_parts` describes each stored part by a :class:`WorkerPart`
(the store's fsspec URL and options, the part's object and checksum, the columns and the
dataset-wide categories) and :func:`read_worker_part`, run on a worker, gives its rows as
floats exactly as :class:`~service.training.part_table.PartTable` gives them to a fit in this
process: numbers as they are, categories as codes into the sorted union of every part's
categories, NaN for missing. A part is verified against its size and SHA-256 as every read of
the store is (:func:`service.datasets.part_reader.open_part`).

The target: regression takes the numbers; classification takes the index of each row's label
in ``classes`` (labels written as :func:`service.training.data.prepare` writes them). A row
whose target is missing gets weight 0: the fit leaves it out of the trees and of the bin
edges' sample, as the in-memory fit leaves it out of its rows.

The store options travel to the workers, credentials included: the workers read the store
as the fit process would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from engine.parallel import DataPart, PartRows
from service.datasets.part_reader import open_part
from service.db.tables import ColumnKind, DatasetPartRecord
from service.store import DataStore
from service.training.data import _label
from service.training.part_table import PartTable, PassAnswer, pass_answer
from service.training.row_split import SCORED, TRAIN, PartRanks, tag_rows

__all__ = [
    "PartSummary",
    "WorkerPart",
    "first_pass_on_workers",
    "read_worker_part",
    "summarise_part",
    "worker_parts",
]


@dataclass(frozen=True)
class WorkerPart:
    """One stored part and what a worker needs to read its rows (picklable, no session)."""

    store_url: str
    store_options: dict[str, Any]
    path: str
    size: int
    sha256: str | None
    source_stamp: str | None
    n_rows: int
    features: tuple[str, ...]
    target: str
    kinds: dict[str, str]
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    classes: tuple[str, ...] | None = None
    # The part's rows the fit learns from (part-local, ascending); None: every row with a
    # target. The others get weight 0: a validation split or a fold's held-out rows.
    rows: npt.NDArray[np.int64] | None = None
    # Instead of ``rows``: the part's held-out and scored rows as ranks within each group
    # (class, or every row with a target) (service.training.row_split.PartRanks); the rows
    # then carry their role as tags for the evaluation on the workers.
    held_out: tuple[npt.NDArray[np.int32], ...] | None = None
    scored: tuple[npt.NDArray[np.int32], ...] | None = None


def worker_parts(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    features: Sequence[str],
    target: str,
    kinds: Mapping[str, str],
    categories: Mapping[str, Sequence[str]],
    classes: Sequence[str] | None = None,
    rows: npt.NDArray[np.intp] | None = None,
    ranks: PartRanks | None = None,
) -> list[DataPart]:
    """The engine's parts of a dataset, first row first; ``rows`` (global, ascending) the
    rows to learn from, None for every row with a target; or ``ranks``: the split as ranks
    (one entry per part in row order), the rows then tagged by their role."""
    ordered = sorted(parts, key=lambda part: part.row_offset)

    def local(part: DatasetPartRecord) -> npt.NDArray[np.int64] | None:
        if rows is None:
            return None
        low, high = np.searchsorted(rows, [part.row_offset, part.row_offset + part.n_rows])
        return (rows[low:high] - part.row_offset).astype(np.int64)

    return [
        DataPart(
            WorkerPart(
                store_url=store.url,
                store_options=dict(store.options),
                path=part.path,
                size=part.size,
                sha256=part.sha256,
                source_stamp=part.source_stamp,
                n_rows=part.n_rows,
                features=tuple(features),
                target=target,
                kinds={name: str(kinds[name]) for name in (*features, target)},
                categories={name: tuple(union) for name, union in categories.items()},
                classes=None if classes is None else tuple(classes),
                rows=local(part),
                held_out=None if ranks is None else ranks.held_out[index],
                scored=None if ranks is None or ranks.scored is None else ranks.scored[index],
            ),
            part.row_offset,
            part.n_rows,
        )
        for index, part in enumerate(ordered)
    ]


def first_pass_on_workers(
    client: Any,
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    features: Sequence[str],
    target: str,
    kinds: Mapping[str, str],
) -> list[PassAnswer]:
    """Each part's share of :meth:`PartTable.first_pass` (its target column and categorical
    features' categories), read on the Dask workers of ``client``, in part order: the fit
    process of an out-of-core fit opens no part."""
    sources = [
        part.source for part in worker_parts(store, parts, features, target, kinds, categories={})
    ]
    futures = client.map(first_pass_part, sources, pure=False)
    answers: list[PassAnswer] = client.gather(futures)
    return answers


def first_pass_part(source: WorkerPart) -> PassAnswer:
    """On a worker: one part's share of :meth:`PartTable.first_pass`."""
    store, record = _opened(source)
    categorical = [n for n in source.features if source.kinds[n] == ColumnKind.CATEGORICAL]
    return pass_answer(open_part(store, record), source.target, categorical)


@dataclass(frozen=True)
class PartSummary:
    """What an out-of-core run learns of one part's target without taking it: how many rows
    have one; per class label their count (classification); the least and greatest value
    (regression); and the categorical features' categories, as the first pass's."""

    n_known: int
    labels: dict[str, int]
    low: float
    high: float
    categories: dict[str, list[str]]


def summarise_part(source: WorkerPart, classification: bool) -> PartSummary:
    """On a worker: one part's :class:`PartSummary` (its target labelled as ``_target`` and
    ``service.training.data.prepare`` label it)."""
    store, record = _opened(source)
    categorical = [n for n in source.features if source.kinds[n] == ColumnKind.CATEGORICAL]
    column, categories = pass_answer(open_part(store, record), source.target, categorical)
    labels: dict[str, int] = {}
    low, high = np.inf, -np.inf
    if source.kinds[source.target] == ColumnKind.NUMERIC:
        values = column.cast(pa.float64()).to_numpy()  # nulls are NaN
        values = values[~np.isnan(values)]
        if classification:
            distinct, counts = np.unique(values, return_counts=True)
            for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
                label = _label(value)
                labels[label] = labels.get(label, 0) + count
        elif values.size:
            low, high = float(values.min()), float(values.max())
        n_known = int(values.size)
    else:
        if pa.types.is_dictionary(column.type):  # chunks' dictionaries may differ
            column = column.cast(column.type.value_type)
        counted = column.combine_chunks().value_counts()
        for entry in counted.to_pylist():
            if entry["values"] is not None:
                labels[str(entry["values"])] = int(entry["counts"])
        n_known = sum(labels.values())
    return PartSummary(n_known, labels, low, high, categories)


def _opened(source: WorkerPart) -> tuple[DataStore, DatasetPartRecord]:
    """The store and the part's record a worker reads ``source`` through."""
    store = DataStore(source.store_url, source.store_options)
    record = DatasetPartRecord(
        dataset_id="",
        part=0,
        row_offset=0,
        n_rows=source.n_rows,
        path=source.path,
        size=source.size,
        sha256=source.sha256,
        source_stamp=source.source_stamp,
    )
    return store, record


def read_worker_part(source: WorkerPart) -> PartRows | tuple[Any, ...]:
    """A part's ``(X, y, weights)`` for ``fit_parts`` (see the module's docstring), from one
    open of the part; with ``held_out`` ranks, its rows' role tags after them (held-out rows
    keep their target, with weight 0)."""
    store, record = _opened(source)
    table = PartTable(store, [record], source.kinds, source.n_rows)
    table.use_categories(source.categories)
    X, column = table.part_rows(record, source.features, source.target)
    y, known = _target(column, source.kinds[source.target], source.classes)
    if source.held_out is not None:
        group = np.where(known, y if source.classes is not None else 0.0, -1.0).astype(np.intp)
        tags = tag_rows(group, len(source.held_out), source.held_out, source.scored)
        learns = (tags == TRAIN) | (tags == SCORED)
        return X, np.where(known, y, 0.0), learns.astype(np.float64), tags
    if source.rows is not None:
        chosen = np.zeros(source.n_rows, dtype=bool)
        chosen[source.rows] = True
        known &= chosen
    return X, np.where(known, y, 0.0), known.astype(np.float64)


def _target(
    column: pa.ChunkedArray, kind: str, classes: tuple[str, ...] | None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The target as floats (class indices for classification) and which rows have one."""
    if kind == ColumnKind.NUMERIC and classes is None:
        values = column.cast(pa.float64()).to_numpy()  # nulls are NaN
        return values, ~np.isnan(values)
    if classes is None:
        raise ValueError("A categorical target needs its classes (classification).")
    # One Python string per distinct value, not per row (numeric_labels).
    position = {label: float(code) for code, label in enumerate(classes)}
    if kind == ColumnKind.NUMERIC:
        values = column.cast(pa.float64()).to_numpy()  # nulls are NaN
        distinct, inverse = np.unique(values, return_inverse=True)
        labels = [None if np.isnan(v) else _label(v) for v in distinct.tolist()]
    else:
        if pa.types.is_dictionary(column.type):  # chunks' dictionaries may differ
            column = column.cast(column.type.value_type)
        encoded = column.combine_chunks().dictionary_encode()
        labels = encoded.dictionary.to_pylist()
        inverse = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    known = np.array([np.nan if t is None else position.get(t, np.nan) for t in labels] + [np.nan])
    codes = known[np.asarray(inverse, dtype=np.intp).reshape(-1)]
    return codes, ~np.isnan(codes)
