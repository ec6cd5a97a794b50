"""Out-of-core boosting on a Dask cluster: the workers read, bin and keep the rows.

:class:`PartsActor` lives on one worker and holds one balanced range of the table's rows
(:func:`engine.parallel._parts.deal_rows`). It reads its pieces of the parts itself, through
the reader the caller ships (the engine opens no file), three times and one part at a time, so
a worker never holds more floats than one part's:

1. ``load``: the targets and weights, which it keeps;
2. ``gather``: the values of the rows the driver's bin-edge sample names (the same global rows
   :meth:`engine.tree._binning.BinMapper.sample_rows` draws for a single-machine fit, so the
   edges are that fit's, bit for bit, on any number of workers);
3. ``bin``: its rows' codes under those edges, kept feature-major as the kernels read them.

It then keeps, per row, the codes (one byte a feature), target, weight, raw scores, the round's
gradient and hessian, the current tree's channels and node: the state xgboost.dask and H2O keep
with the rows. The driver (:class:`DaskPartitions`) holds no row: it grows each tree from the
summed histograms and totals the actors return (:mod:`engine.tree.grow.remote`), and sends each
level's splits back. Updates to the raw scores are applied at the end of a round, so every
tree of a multiclass round reads the round's gradients, as locally.

A lost worker ends the fit with :class:`engine.parallel.WorkerCrashedError` (never a hang): its
rows are nowhere else. Replacing its actor and replaying the trees is left to do (issue 27).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from distributed import Client
from numpy.typing import NDArray

from engine.parallel._dask_cluster import ClusterLostError, check_connected, prepare_worker
from engine.parallel._executor import ShutsDownOnExit, WorkerCrashedError
from engine.parallel._parts import DataPart, PartReader, Piece, deal_rows, read_piece
from engine.tree._binning import BinMapper
from engine.tree._common import NARROW_CODE_DTYPE, missing_code
from engine.tree._histograms import build_histograms
from engine.tree.grow.level_kernels import node_totals
from engine.tree.grow.partition_kernels import partition_rows
from engine.tree.grow.remote import LevelSplits

__all__ = ["DaskPartitions", "PartsActor"]

Gradients = Callable[[NDArray[np.float64], NDArray[np.float64]], tuple[Any, Any]]
MetricTerms = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]
_NO_ROWS = np.zeros(0, dtype=np.intp)


class PartsActor:
    """On a worker: one range of the table's rows and every per-row state of the fit."""

    def __init__(self) -> None:
        prepare_worker()
        self.pieces: list[Piece] = []
        self.read: PartReader | None = None

    # -- reading and binning ------------------------------------------------------------

    def _pieces(self) -> Any:
        assert self.read is not None
        for piece in self.pieces:
            yield read_piece(self.read, piece)

    def load(self, pieces: list[Piece], read: PartReader, classification: bool) -> dict[str, Any]:
        """Read the targets and weights of ``pieces``; what the driver needs to know of them."""
        self.pieces, self.read = pieces, read
        targets, weights, n_features = [], [], 0
        for X, y, w in self._pieces():
            n_features = X.shape[1]
            targets.append(y)
            weights.append(np.ones(y.size) if w is None else w)
        self.y = np.concatenate(targets)
        self.w = np.concatenate(weights)
        return {
            "n_rows": int(self.y.size),
            "n_features": n_features,
            "n_positive": int(np.count_nonzero(self.w > 0)),
            "bad_targets": int(np.count_nonzero(~np.isfinite(self.y))),
            "bad_weights": int(np.count_nonzero(~np.isfinite(self.w) | (self.w < 0))),
            "labels": np.unique(self.y) if classification else None,
        }

    def gather(self, positive: NDArray[np.intp]) -> NDArray[np.float64]:
        """The values of the rows at ``positive`` among this range's rows of positive
        weight (ascending), in that order."""
        rows = np.flatnonzero(self.w > 0)[positive]
        blocks, start = [], 0
        for X, y, _ in self._pieces():
            stop = start + y.size
            mine = rows[(rows >= start) & (rows < stop)]
            if mine.size:
                blocks.append(X[mine - start])
            start = stop
        if not blocks:
            return np.zeros((0, 0))
        return np.concatenate(blocks)

    def bin(self, mapper: BinMapper) -> None:
        """Bin this range's rows with the fit's edges; keep the codes feature-major."""
        n_rows = self.y.size
        self.codes: NDArray[Any] = np.empty((mapper.n_bins_.size, n_rows), NARROW_CODE_DTYPE)
        self.row_missing = np.zeros(n_rows, dtype=bool)
        start = 0
        for X, y, _ in self._pieces():
            codes = mapper.transform(X)
            if codes.dtype != NARROW_CODE_DTYPE:
                raise ValueError("Out-of-core fits take uint8 codes (histogram binning).")
            self.codes[:, start : start + y.size] = codes.T
            self.row_missing[start : start + y.size] = (codes == missing_code(codes.dtype)).any(1)
            start += y.size

    def encode(self, classes: NDArray[np.float64] | None, positive_scale: float) -> list[float]:
        """Targets as class indices (classification); ``Σ w·y`` and ``Σ w`` after it."""
        if classes is not None:
            self.y = np.searchsorted(classes, self.y).astype(np.float64)
            if classes.size == 2 and positive_scale != 1.0:
                self.w = self.w * np.where(self.y == 1, positive_scale, 1.0)
        # As np.average forms them: one worker's sums are the single-machine fit's bits.
        return [float(np.multiply(self.y, self.w).sum()), float(self.w.sum())]

    # -- boosting -------------------------------------------------------------------------

    def start(self, base: NDArray[np.float64], gradients: Gradients) -> None:
        self.raw = np.tile(base, (self.y.size, 1))
        self.gradients = gradients

    def start_round(self, keep: NDArray[np.bool_] | None) -> None:
        """The round's gradients and hessians at the current scores; ``keep`` its rows."""
        gradient, hessian = self.gradients(self.y, self.raw)
        self.gradient = np.asarray(gradient).reshape(self.y.size, -1)
        self.hessian = np.asarray(hessian).reshape(self.y.size, -1)
        self.weights = self.w if keep is None else self.w * keep
        self.pending: list[NDArray[np.intp]] = []

    def start_tree(self, k: int) -> tuple[NDArray[np.float64], NDArray[np.int64], bool]:
        """Output ``k``'s tree: its rows' channels; their totals, count, missing codes."""
        in_tree = self.weights > 0
        rows = np.flatnonzero(in_tree)
        row_weights = self.weights[rows]
        # Channels are read by row index, as the codes are: 0 on rows outside the tree.
        self.channels = np.zeros((self.y.size, 2))
        self.channels[rows, 0] = self.gradient[rows, k] * row_weights
        self.channels[rows, 1] = self.hessian[rows, k] * row_weights
        self.rows, self.slots = rows, np.zeros(rows.size, dtype=np.intp)
        # Rows outside the tree follow its splits too: their leaves move their scores.
        self.out_rows = np.flatnonzero(~in_tree)
        self.out_slots = np.zeros(self.out_rows.size, dtype=np.intp)
        self.leaf = np.zeros(self.y.size, dtype=np.intp)
        totals, counts = node_totals(rows, self.slots, 1, self.channels)
        return totals, counts, bool(self.row_missing[rows].any())

    def histograms(
        self, features: NDArray[np.int64], smaller_side: NDArray[np.intp] | None
    ) -> NDArray[np.float64]:
        rows, slots, n_slots = self.rows, self.slots, 1
        if smaller_side is not None:
            pair = slots // 2
            small = (slots & 1) == smaller_side[pair]
            rows, slots, n_slots = rows[small], pair[small], smaller_side.size
        return build_histograms(self.codes, rows, slots, n_slots, features, self.channels, 2)

    def level(
        self, node_ids: NDArray[np.intp], splits: LevelSplits | None
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]] | None:
        self.leaf[self.rows] = node_ids[self.slots]
        self.leaf[self.out_rows] = node_ids[self.out_slots]
        if splits is None:
            self.pending.append(self.leaf)
            return None
        split_of_slot, rank_of_slot, feature, left_codes, n_chosen = splits
        self.rows, self.slots, totals, counts = partition_rows(
            self.codes,
            self.rows,
            self.slots,
            split_of_slot,
            rank_of_slot,
            feature,
            left_codes,
            n_chosen,
            self.channels,
        )
        self.out_rows, self.out_slots, _, _ = partition_rows(
            self.codes,
            self.out_rows,
            self.out_slots,
            split_of_slot,
            rank_of_slot,
            feature,
            left_codes,
            n_chosen,
        )
        return totals, counts

    def end_round(self, leaf_values: list[NDArray[np.float64]], metric: MetricTerms) -> float:
        """Add each tree's leaf values to the scores; the sum of the metric's row terms."""
        for k, (leaf, values) in enumerate(zip(self.pending, leaf_values, strict=True)):
            self.raw[:, k] += values[leaf]
        self.pending = []
        self.rows = self.out_rows = self.slots = self.out_slots = _NO_ROWS
        del self.channels, self.gradient, self.hessian
        return float(np.sum(metric(self.y, self.raw)))


class DaskPartitions(ShutsDownOnExit):
    """The table's rows in one :class:`PartsActor` per Dask worker, for one fit."""

    def __init__(self, client: Client, parts: Sequence[DataPart], read: PartReader) -> None:
        check_connected(client)
        self.client = client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("The Dask cluster has no workers.")
        self.groups = deal_rows(parts, len(workers))
        self.workers = workers[: len(self.groups)]
        self.read = read
        self.handles = [
            client.submit(PartsActor, actor=True, workers=[worker], pure=False)
            for worker in self.workers
        ]
        # A proxy binds to the client current at its first call (see _dask_histograms).
        with client.as_current():
            self.actors: list[Any] = [handle.result() for handle in self.handles]

    def call(self, method: str, *per_actor: Sequence[Any], **common: Any) -> list[Any]:
        """``method`` on every actor (the i-th taking the i-th of each ``per_actor``), in
        actor order; a lost worker is an error naming it, never a wait."""
        futures = []
        for index, actor in enumerate(self.actors):
            args = [values[index] for values in per_actor]
            futures.append(getattr(actor, method)(*args, **common))
        results = []
        for index, future in enumerate(futures):
            try:
                results.append(future.result())
            except OSError as error:
                check_connected(self.client)
                raise WorkerCrashedError(
                    f"Lost the Dask worker {self.workers[index]} holding rows of the table "
                    f"mid-fit ({error}); out-of-core fits do not yet survive it, retry the fit."
                ) from error
            except ClusterLostError:
                raise
        return results

    def each(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every actor."""
        return self.call(method, *([arg] * len(self.actors) for arg in args))

    def tree_rows(self) -> _TreeRows:
        return _TreeRows(self)

    def shutdown(self) -> None:
        handles, self.handles, self.actors = self.handles, [], []
        if handles and self.client.status == "running":
            self.client.cancel(handles)


class _TreeRows:
    """One tree's rows across the actors: sums of what each returns, in actor order."""

    def __init__(self, partitions: DaskPartitions) -> None:
        self.partitions = partitions

    def histograms(
        self, features: NDArray[np.int64], smaller_side: NDArray[np.intp] | None
    ) -> NDArray[np.float64]:
        parts = self.partitions.each("histograms", np.asarray(features), smaller_side)
        total: NDArray[np.float64] = parts[0]
        for part in parts[1:]:
            total += part
        return total

    def level(
        self, node_ids: NDArray[np.intp], splits: LevelSplits | None
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]] | None:
        parts = self.partitions.each("level", node_ids, splits)
        if splits is None:
            return None
        totals, counts = parts[0]
        for part_totals, part_counts in parts[1:]:
            totals = totals + part_totals
            counts = counts + part_counts
        return totals, counts
