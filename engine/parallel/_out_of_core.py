"""What the out-of-core fits (``fit_parts`` of boosting, :mod:`engine.boosting._xgboost_parts`,
and of forests, :mod:`engine.ensemble._forest_parts`) share around the workers' rows: the
bin-edge sample gathered from the actors, the codes of rows a caller keeps, a fit on the table
in this process giving what the workers would have, and new actors for lost ones.

Nothing here imports Dask: the partitions (:class:`engine.parallel._dask_parts.DaskPartitions`)
are passed in, and their exception is imported when it is caught.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine.parallel._parts import KeptRows
from engine.tree._binning import BinMapper
from engine.tree._common import NARROW_CODE_DTYPE

if TYPE_CHECKING:
    from engine.parallel._dask_parts import DaskPartitions, Replay

__all__ = ["codes_of", "gather_sample", "keep_local", "replace_lost"]

FloatArray = NDArray[np.float64]


def gather_sample(
    table: DaskPartitions, infos: list[dict[str, Any]], mapper: BinMapper
) -> FloatArray:
    """The rows of positive weight :meth:`BinMapper.sample_rows` names, from their workers."""
    counts = np.array([info["n_positive"] for info in infos])
    sample = mapper.sample_rows(int(counts.sum()))
    starts = np.concatenate(([0], np.cumsum(counts)))
    first = np.searchsorted(sample, starts)
    positions = [
        (sample[first[i] : first[i + 1]] - starts[i]).astype(np.intp) for i in range(counts.size)
    ]
    blocks = [block for block in table.call("gather", positions) if block.size]
    return np.concatenate(blocks)


def codes_of(
    table: DaskPartitions, sizes: list[int], groups: list[NDArray[np.intp]], replay: Replay
) -> list[NDArray[Any]]:
    """The bin codes of each group of global rows (any order), from the actors holding them:
    actor ``i`` holds the global rows ``[Σ sizes[:i], Σ sizes[:i+1])`` in order."""
    from engine.parallel._dask_parts import PartitionsLost

    if not groups:
        return []
    starts = np.concatenate(([0], np.cumsum(sizes)))
    everything = np.concatenate([np.asarray(group, dtype=np.intp) for group in groups])
    order = np.argsort(everything, kind="stable")
    ordered = everything[order]
    first = np.searchsorted(ordered, starts)
    local = [ordered[first[i] : first[i + 1]] - starts[i] for i in range(len(sizes))]
    while True:
        try:
            blocks = table.call("codes_of", local)
            break
        except PartitionsLost as lost:  # a new actor re-reads and re-bins the same rows
            replace_lost(table, lost.lost, replay)
    n_features = replay.mapper.n_bins_.size
    codes = np.empty((everything.size, n_features), dtype=NARROW_CODE_DTYPE)
    codes[order] = np.concatenate(blocks) if blocks else codes[:0]
    bounds = np.cumsum([0] + [len(group) for group in groups])
    return [codes[bounds[i] : bounds[i + 1]] for i in range(len(groups))]


def keep_local(model: Any, X: FloatArray, w: FloatArray | None, keep: KeptRows) -> None:
    """``keep`` of a fit on the table in this process: what the workers would have given."""
    mapper = model.bin_mapper_
    positive = np.arange(X.shape[0]) if w is None else np.flatnonzero(w > 0)
    keep.sample = X[positive[mapper.sample_rows(positive.size)]]
    keep.codes = [mapper.transform(X[np.asarray(group, dtype=np.intp)]) for group in keep.rows]


def replace_lost(table: DaskPartitions, lost: list[int], replay: Replay) -> None:
    """New actors for ``lost``, again while a new one's worker goes too (the table counts
    the losses and gives up past its limit)."""
    from engine.parallel._dask_parts import PartitionsLost

    while True:
        try:
            table.replace(lost, replay)
            return
        except PartitionsLost as again:
            lost = again.lost
