"""A table held as parts (files, objects) the engine never opens itself, and how its rows are
dealt to workers.

The engine imports no storage library: whoever holds the table (the service's data store, a
user with Parquet files) describes each part by a :class:`DataPart` — an opaque, picklable
``source``, its global row offset and its row count — and hands a :data:`PartReader`, a
module-level function that turns one ``source`` into its rows. Out-of-core fits ship the
reader and the parts to the workers, which call it themselves (:mod:`engine.parallel._dask_parts`);
without a cluster the same reader runs here (:func:`read_parts`), which makes the single-machine
fit an out-of-core fit must equal.

Rows are dealt by position, as xgboost_ray and H2O deal chunks: worker ``i`` of ``W`` takes
the global rows ``[i·N/W, (i+1)·N/W)``, whatever the parts' sizes, so the workers are balanced
to a row and none is empty while ``N ≥ W`` (empty or lopsided partitions are what
dmlc/xgboost#5451 and #5865 report). A part that straddles two workers' ranges is read by both,
each keeping its own slice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["DataPart", "KeptRows", "PartReader", "PartRows", "Piece", "deal_rows", "read_parts"]

# One part's rows: features (n, F) float64 with NaN missing, target (n,) float64, and row
# weights (n,) float64 or None for all ones. A reader may add a fourth array, the rows'
# tags (n,) int8: the caller's own marks (which rows it scores, say), kept on the workers
# beside the rows for its evaluation (KeptRows.evaluate); the fit reads none.
PartRows = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]
PartReader = Callable[[Any], Any]  # gives PartRows, or PartRows and the tags
# A piece's rows: PartRows and its tags (None when the reader gives none).
PieceRows = tuple[
    NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None, NDArray[np.int8] | None
]


@dataclass(frozen=True)
class DataPart:
    """One part of a table: where its rows are (``source``, for the reader alone), which
    global rows it holds (``row_offset``, ``row_offset + n_rows``)."""

    source: Any
    row_offset: int
    n_rows: int


@dataclass
class KeptRows:
    """What a caller of an out-of-core fit keeps of the rows, so that it never reads a part
    itself: the bin codes of the global rows in each of ``rows`` (fetched from the workers
    before they let the rows go) and the float values of the rows the bin edges were placed
    by (``sample``: the rows :meth:`engine.tree._binning.BinMapper.sample_rows` names among
    the rows of positive weight, which the fit gathered anyway). Filled in by the fit."""

    rows: list[NDArray[np.intp]]
    codes: list[NDArray[Any]] = field(default_factory=list)
    sample: NDArray[np.float64] | None = None
    # On a cluster: called once the model is fitted, while the workers still hold the rows
    # and their final scores, with an :class:`engine.parallel._dask_parts.ActorCalls`, which
    # runs ``function(actor, *args)`` on every worker's actor (its ``y``, ``raw`` scores,
    # ``tags``, ``learns`` mask of the rows of positive weight, and ``w``, None when every
    # weight is 0 or 1) and gives the answers in actor order. What it returns is kept in
    # ``evaluation``. A worker lost meanwhile is replaced and ``evaluate`` called again.
    evaluate: Callable[[Any], Any] | None = None
    evaluation: Any = None


@dataclass(frozen=True)
class Piece:
    """Rows ``start:stop`` (part-local) of ``part``: what one worker keeps of one part."""

    part: DataPart
    start: int
    stop: int


def check_parts(parts: Sequence[DataPart]) -> int:
    """The table's row count, once the parts are found to tile ``[0, N)`` in order."""
    if not parts:
        raise ValueError("The table has no parts.")
    expected = 0
    for index, part in enumerate(parts):
        if part.row_offset != expected or part.n_rows < 0:
            raise ValueError(
                f"Part {index} starts at row {part.row_offset} with {part.n_rows} rows; the "
                f"parts must tile the rows in order (expected offset {expected})."
            )
        expected += part.n_rows
    if expected == 0:
        raise ValueError("The table's parts hold no rows.")
    return expected


def deal_rows(parts: Sequence[DataPart], n_workers: int) -> list[list[Piece]]:
    """The pieces of parts each of ``min(n_workers, N)`` workers keeps: equal row ranges."""
    n_rows = check_parts(parts)
    n_groups = max(1, min(n_workers, n_rows))
    bounds = np.linspace(0, n_rows, n_groups + 1).astype(np.int64)
    groups: list[list[Piece]] = []
    for low, high in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        pieces = []
        for part in parts:
            start = max(low, part.row_offset)
            stop = min(high, part.row_offset + part.n_rows)
            if start < stop:
                pieces.append(Piece(part, start - part.row_offset, stop - part.row_offset))
        groups.append(pieces)
    return groups


def read_piece(read: PartReader, piece: Piece) -> PieceRows:
    """The rows of one piece, checked against the part's recorded row count, and their
    tags (None when the reader gives none)."""
    X, y, w, *tagged = read(piece.part.source)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != piece.part.n_rows or y.shape != (piece.part.n_rows,):
        raise ValueError(
            f"The reader gave {X.shape} features and {y.shape} targets for a part recorded "
            f"with {piece.part.n_rows} rows ({piece.part.source!r})."
        )
    rows = slice(piece.start, piece.stop)
    weights = None if w is None else np.asarray(w, dtype=np.float64)[rows]
    tags = np.asarray(tagged[0], dtype=np.int8)[rows] if tagged else None
    return X[rows], y[rows], weights, tags


def read_parts(parts: Sequence[DataPart], read: PartReader) -> PartRows:
    """The whole table in this process: the single-machine fit's input."""
    n_rows = check_parts(parts)
    blocks = [read_piece(read, Piece(part, 0, part.n_rows)) for part in parts]
    X = np.concatenate([block[0] for block in blocks])  # the tags: the caller's, unused here
    y = np.concatenate([block[1] for block in blocks])
    w = (
        None
        if all(block[2] is None for block in blocks)
        else np.concatenate([np.ones(b[1].size) if b[2] is None else b[2] for b in blocks])
    )
    assert X.shape[0] == n_rows
    return X, y, w
