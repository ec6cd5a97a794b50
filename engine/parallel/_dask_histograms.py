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

Each partition lives in a Dask actor on its worker: the driver calls its methods, without
scheduling a task per partition and level (about 3 ms a level on this machine against 35–70
ms for a task per partition and level). The calls go straight to the worker only when the
client is ``direct_to_workers`` (``distributed.client.direct-to-workers``); by Dask's default
the scheduler relays them, and each level's histograms pass through its host. The driver
keeps its own copy of the binned matrix (it binned it) and moves rows to children itself, an
O(rows) pass per level against the O(rows × features) of the histograms; that copy also makes
a lost worker cheap to survive: its partition is sent again to a live worker's new actor, and
the level is asked again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from distributed import Client
from numpy.typing import NDArray

from engine.parallel._dask_cluster import MAX_RESCATTERS, check_connected, prepare_worker
from engine.parallel._executor import ShutsDownOnExit
from engine.tree._common import NARROW_CODE_DTYPE
from engine.tree._histograms import build_histograms

__all__ = ["DaskHistograms", "PartitionActor"]

# How long a recovery waits for a live worker to take a lost partition: a nanny restarts a
# killed worker within seconds, and the scheduler drops a dead one once its connection breaks.
WORKER_WAIT_SECONDS = 30.0


class _PartitionsUnreachable(Exception):
    """The actors of ``parts`` could not be reached (their workers died or are dying)."""

    def __init__(self, parts: list[int]) -> None:
        super().__init__(f"partitions {parts} unreachable")
        self.parts = parts


class PartitionActor:
    """On a worker: one row range of the binned matrix, and the tree growing on it."""

    def __init__(self) -> None:
        prepare_worker()
        self.columns: NDArray[Any] = np.zeros((0, 0), dtype=NARROW_CODE_DTYPE)
        self.rows: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self.channels: NDArray[np.float64] = np.zeros((0, 0))

    def load(self, columns: NDArray[Any]) -> int:
        """Keep the partition's codes, feature-major (n_features, n_rows)."""
        self.columns = columns
        return int(columns.shape[1])

    def start_tree(self, rows: NDArray[np.intp], channels: NDArray[np.float64]) -> None:
        """The tree's rows in this partition (partition-local) and their channels."""
        # The kernel reads codes and channels by the same row index: spread the channels
        # over the partition's rows once per tree (0 on rows the tree leaves out).
        full = np.zeros((self.columns.shape[1], channels.shape[1]))
        full[rows] = channels
        self.rows, self.channels = rows, full

    def histograms(
        self,
        positions: NDArray[np.int32],
        slots: NDArray[np.int32],
        n_slots: int,
        features: NDArray[np.int64],
        tree: tuple[NDArray[np.intp], NDArray[np.float64]] | None = None,
    ) -> NDArray[np.float64]:
        """Histograms (S, F, 256, 1 + C) of the tree's rows at ``positions`` by ``slots``.

        ``tree``, with a tree's first call: :meth:`start_tree`'s arguments, sent along to
        spare a round trip per tree.
        """
        if tree is not None:
            self.start_tree(*tree)
        return build_histograms(
            self.columns,
            self.rows[positions],
            slots.astype(np.intp),
            n_slots,
            features,
            self.channels,
            self.channels.shape[1],
        )


class DaskHistograms(ShutsDownOnExit):
    """Partitions of one boosting fit's binned matrix, one per Dask worker, in actors.

    Parameters
    ----------
    client : distributed.Client
    binned : ndarray of uint8, shape (n_rows, n_features)
        The fit's binned matrix; its row ranges go, feature-major, to the workers' actors.
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
        self.worker_of_part: list[str] = workers[:n_parts]
        self.actors: list[Any] = [None] * n_parts
        self._handles: list[Any] = [None] * n_parts  # the actors' futures, released at the end
        self.n_recoveries = 0
        for part in range(n_parts):
            self._place(part)

    def _place(self, part: int) -> None:
        """Start the partition's actor on its worker and send it the partition's codes."""
        handle = self.client.submit(
            PartitionActor, actor=True, workers=[self.worker_of_part[part]], pure=False
        )
        start, stop = self.bounds[part], self.bounds[part + 1]
        # An Actor proxy (its calls return ActorFutures) binds to a client at its first call,
        # and finds it through distributed's get_client: the current client, else the
        # process's default. The service's client is no default (set_as_default=False), and
        # a proxy that finds none fails ("... has no attribute '_io_loop'"), so the first
        # call is made with this fit's client current.
        with self.client.as_current():
            actor: Any = handle.result()
            actor.load(np.ascontiguousarray(self.binned[start:stop].T)).result()
        self.actors[part], self._handles[part] = actor, handle

    def recover(self, unreachable: Sequence[int] = ()) -> None:
        """Move every partition whose worker left to a live worker (one call per loss).

        ``unreachable``: partitions whose actors could not be contacted. Their workers count
        as lost even while the scheduler still lists them: a SIGKILLed worker's connections
        break at once, but the scheduler may take a moment longer to drop it.
        """
        check_connected(self.client)
        if self.n_recoveries >= MAX_RESCATTERS:
            raise RuntimeError("Lost the boosting fit's row partitions too often; giving up.")
        self.n_recoveries += 1
        # The scheduler may list a dead worker for a moment after its connection broke.
        time.sleep(0.25 * self.n_recoveries)
        gone = {self.worker_of_part[part] for part in unreachable}
        live = self._live_workers(excluding=gone)
        for part in range(len(self.actors)):
            worker = self.worker_of_part[part]
            if worker in gone or worker not in live:
                self.worker_of_part[part] = live[part % len(live)]
                self._place(part)

    def _live_workers(self, excluding: set[str]) -> list[str]:
        """The scheduler's workers less ``excluding``, waiting a while for one to appear."""
        deadline = time.monotonic() + WORKER_WAIT_SECONDS
        while True:
            live = sorted(set(self.client.scheduler_info()["workers"]) - excluding)
            if live:
                return live
            if time.monotonic() > deadline:
                raise RuntimeError("The Dask cluster has no workers left.")
            check_connected(self.client)
            time.sleep(0.25)

    def lost_workers(self) -> bool:
        live = set(self.client.scheduler_info()["workers"])
        return any(worker not in live for worker in self.worker_of_part)

    def tree(self, rows: NDArray[Any], channels: NDArray[Any]) -> DaskTreeHistograms:
        return DaskTreeHistograms(self, np.asarray(rows), np.asarray(channels))

    def shutdown(self) -> None:
        handles = [handle for handle in self._handles if handle is not None]
        self.actors, self._handles = [], []
        if handles and self.client.status == "running":
            self.client.cancel(handles)


class DaskTreeHistograms:
    """One tree's histograms, built partition by partition on the workers and summed here.

    ``rows`` (ascending rows of the binned matrix) and ``channels`` (one row per tree row)
    go to each partition's actor with the tree's first histogram request.
    """

    def __init__(
        self, source: DaskHistograms, rows: NDArray[Any], channels: NDArray[np.float64]
    ) -> None:
        self.source = source
        # Tree rows held by each partition: a contiguous run, since rows ascend.
        self.first = np.searchsorted(rows, source.bounds).astype(np.intp)
        self.rows = rows
        self.channels = channels
        self.started = False

    def _tree_part(self, part: int) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """The tree's rows in partition ``part`` (partition-local) and their channels."""
        lo, hi = self.first[part], self.first[part + 1]
        local = (self.rows[lo:hi] - self.source.bounds[part]).astype(np.intp)
        return local, self.channels[lo:hi]

    def __call__(
        self,
        rows: NDArray[Any],
        slot_of_row: NDArray[Any],
        n_slots: int,
        features: NDArray[Any],
    ) -> NDArray[np.float64]:
        for _ in range(MAX_RESCATTERS + 1):
            try:
                histograms = self._build(rows, slot_of_row, n_slots, features)
                self.started = True
                return histograms
            except _PartitionsUnreachable as lost:
                # Their workers' connections broke: move those partitions and ask again,
                # without waiting for the scheduler to notice the loss.
                self.source.recover(lost.parts)
                self.started = False
            except Exception:
                # A worker holding a partition went (its actor's calls fail in ways that
                # depend on when it died): move its partition and ask again; any other
                # failure is the caller's to see.
                if not self.source.lost_workers():
                    check_connected(self.source.client)
                    raise
                self.source.recover()
                self.started = False
        raise RuntimeError("Lost the boosting fit's row partitions too often; giving up.")

    def _build(
        self,
        rows: NDArray[Any],
        slot_of_row: NDArray[Any],
        n_slots: int,
        features: NDArray[Any],
    ) -> NDArray[np.float64]:
        part_of_row = np.searchsorted(self.first, rows, side="right") - 1
        features = np.asarray(features, dtype=np.int64)
        calls = []
        for part, actor in enumerate(self.source.actors):
            mine = part_of_row == part
            # The partition's rows in the order the driver holds them (by slot, each slot's
            # rows ascending), so each bin adds its rows in the same order as locally.
            positions = (rows[mine] - self.first[part]).astype(np.int32)
            tree = None if self.started else self._tree_part(part)
            slots = slot_of_row[mine].astype(np.int32)
            calls.append(actor.histograms(positions, slots, n_slots, features, tree))
        # Summed in partition order, as the test against the local model assumes. An actor
        # that cannot be contacted (OSError: distributed.actor's "Unable to contact Actor's
        # worker", or a closed comm) marks its partition lost; the others' calls are awaited
        # first, so none is left running into the retry.
        total: NDArray[np.float64] | None = None
        unreachable: list[int] = []
        for part, call in enumerate(calls):
            try:
                histograms: NDArray[np.float64] = call.result()
            except OSError:
                unreachable.append(part)
                continue
            if total is None:
                total = histograms
            else:
                total += histograms
        if unreachable:
            raise _PartitionsUnreachable(unreachable)
        assert total is not None
        return total
