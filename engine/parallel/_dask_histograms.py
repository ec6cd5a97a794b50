"""Data-parallel histograms for boosting on a Dask cluster.

Boosted trees are sequential; their parallel part is the histogram of each tree level. As in
distributed XGBoost (Chen & Guestrin 2016, §4.1's approximate, histogram-based algorithm on
Rabit's all-reduce) and LightGBM's data-parallel learner (Ke et al. 2017; Meng et al. 2016's
PV-Tree discusses the communication cost this sums), the rows are split into partitions
that stay on the workers for the whole fit. For each level the driver asks every partition
for its rows' histograms, sums them and chooses the splits with its usual kernels; only the
``n_nodes × n_features × 256 × 3`` gradient/hessian/count sums travel, and only for the
smaller child of each split (the sibling is its parent minus it, on the driver).

Bin edges are fixed once per fit by the driver's binning, so the model does not depend on the
number of workers: it equals the single-machine model up to the order in which each bin's
sums are added (partition by partition, then across partitions).

The driver keeps its own copy of the binned matrix (it binned it) and moves rows to children
itself, an O(rows) pass per level against the O(rows × features) of the histograms; that copy
also makes a lost partition cheap to recover: it is scattered again to a live worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from distributed import Client, Future
from distributed.client import FutureCancelledError
from numpy.typing import NDArray

from engine.parallel._dask import MAX_RESCATTERS, _prepare_worker, check_connected
from engine.parallel._executor import ShutsDownOnExit
from engine.tree._level_kernels import build_histograms

__all__ = ["DaskHistograms"]


@dataclass(frozen=True)
class _TreePart:
    """One tree's view of one partition, held on the partition's worker."""

    rows: NDArray[np.intp]  # partition-local row of each of the tree's rows in the partition
    channels: NDArray[np.float64]  # (partition rows, C): the tree's channels, 0 off the tree


def _tree_part(
    n_rows: int, local_rows: NDArray[np.intp], channels: NDArray[np.float64]
) -> _TreePart:
    full = np.zeros((n_rows, channels.shape[1]))
    full[local_rows] = channels
    return _TreePart(local_rows, full)


def _partition_histograms(
    columns: NDArray[Any],
    part: tuple[NDArray[np.intp], NDArray[np.float64]],
    positions: NDArray[np.int32],
    slots: NDArray[np.int32],
    n_slots: int,
    features: NDArray[np.int64],
) -> NDArray[np.float64]:
    """On a worker: histograms of the partition's rows of a batch (the compiled kernel)."""
    _prepare_worker()
    local_rows, channels = part
    tree = _tree_part(columns.shape[1], local_rows, channels)
    return build_histograms(
        columns,
        tree.rows[positions],
        slots.astype(np.intp),
        n_slots,
        features,
        tree.channels,
        tree.channels.shape[1],
    )


class DaskHistograms(ShutsDownOnExit):
    """Partitions of one boosting fit's binned matrix, one per Dask worker.

    Parameters
    ----------
    client : distributed.Client
    binned : ndarray of uint8, shape (n_rows, n_features)
        The fit's binned matrix; its row ranges are scattered, feature-major, to the workers.
    """

    def __init__(self, client: Client, binned: NDArray[Any]) -> None:
        check_connected(client)
        self.client = client
        self.binned = binned
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("The Dask cluster has no workers.")
        n_parts = max(1, min(len(workers), binned.shape[0]))
        self.bounds = np.linspace(0, binned.shape[0], n_parts + 1).astype(np.intp)
        self.worker_of_part = workers[:n_parts]
        self.parts: list[Future] = []
        self.n_rescatters = 0
        for part in range(n_parts):
            self.parts.append(self._scatter_part(part))

    def _columns(self, part: int) -> NDArray[Any]:
        start, stop = self.bounds[part], self.bounds[part + 1]
        return np.ascontiguousarray(self.binned[start:stop].T)

    def _scatter_part(self, part: int) -> Future:
        [future] = self.client.scatter(
            [self._columns(part)], workers=[self.worker_of_part[part]], hash=False
        )
        return future

    def _recover(self) -> None:
        """Re-send every partition whose worker went, to a live worker."""
        check_connected(self.client)
        if self.n_rescatters >= MAX_RESCATTERS:
            raise RuntimeError("Lost the boosting fit's row partitions too often; giving up.")
        self.n_rescatters += 1
        # The scheduler may list a dead worker for a moment after its connection broke.
        time.sleep(0.25 * self.n_rescatters)
        live = sorted(self.client.scheduler_info()["workers"])
        if not live:
            raise RuntimeError("The Dask cluster has no workers left.")
        for part, future in enumerate(self.parts):
            if future.status != "finished" or self.worker_of_part[part] not in live:
                self.worker_of_part[part] = live[part % len(live)]
                self.parts[part] = self._scatter_part(part)

    def tree(self, rows: NDArray[Any], channels: NDArray[Any]) -> DaskTreeHistograms:
        return DaskTreeHistograms(self, np.asarray(rows), np.asarray(channels))

    def shutdown(self) -> None:
        if self.parts and self.client.status == "running":
            self.client.cancel(self.parts)
        self.parts = []


class DaskTreeHistograms:
    """One tree's histograms, built partition by partition on the workers and summed here.

    ``rows`` (ascending rows of the binned matrix) and ``channels`` (one row per tree row)
    are sent to each partition's worker once, when the tree's first histogram is asked for.
    """

    def __init__(
        self, source: DaskHistograms, rows: NDArray[Any], channels: NDArray[np.float64]
    ) -> None:
        self.source = source
        # Tree rows held by each partition: a contiguous run, since rows ascend.
        self.first = np.searchsorted(rows, source.bounds).astype(np.intp)
        self.rows = rows
        self.channels = channels
        self.sent: list[Future] = []

    def _send(self) -> None:
        source = self.source
        self.sent = []
        for part in range(len(source.parts)):
            lo, hi = self.first[part], self.first[part + 1]
            local = (self.rows[lo:hi] - source.bounds[part]).astype(np.intp)
            [future] = source.client.scatter(
                [(local, self.channels[lo:hi])],
                workers=[source.worker_of_part[part]],
                hash=False,
            )
            self.sent.append(future)

    def __call__(
        self,
        rows: NDArray[Any],
        slot_of_row: NDArray[Any],
        n_slots: int,
        features: NDArray[Any],
    ) -> NDArray[np.float64]:
        for _ in range(MAX_RESCATTERS + 1):
            try:
                if not self.sent:
                    self._send()
                return self._build(rows, slot_of_row, n_slots, features)
            except (FutureCancelledError, OSError):
                # A worker holding a partition or this tree's part went (its futures are
                # cancelled, or sending to it failed): send both again to live workers.
                self.source._recover()
                self.sent = []
        raise RuntimeError("Lost the boosting fit's row partitions too often; giving up.")

    def _build(
        self,
        rows: NDArray[Any],
        slot_of_row: NDArray[Any],
        n_slots: int,
        features: NDArray[Any],
    ) -> NDArray[np.float64]:
        source = self.source
        client = source.client
        part_of_row = np.searchsorted(self.first, rows, side="right") - 1
        futures = []
        for part in range(len(source.parts)):
            mine = part_of_row == part
            # The partition's rows in the order the driver holds them (by slot, each slot's
            # rows ascending), so each bin adds its rows in the same order as locally.
            positions = (rows[mine] - self.first[part]).astype(np.int32)
            futures.append(
                client.submit(
                    _partition_histograms,
                    source.parts[part],
                    self.sent[part],
                    positions,
                    slot_of_row[mine].astype(np.int32),
                    n_slots,
                    np.asarray(features, dtype=np.int64),
                    pure=False,
                    workers=[source.worker_of_part[part]],
                    allow_other_workers=True,
                )
            )
        parts = client.gather(futures)
        total: NDArray[np.float64] = parts[0]
        for other in parts[1:]:
            total += other
        return total
