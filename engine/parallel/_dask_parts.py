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
with the rows. The driver (:class:`DaskPartitions`) holds no row. Each round's trees grow on
actor 0 (:meth:`PartsActor.grow_round`), from the summed histograms and totals of every actor's
rows (:mod:`engine.tree.grow.remote`): a level is one exchange between actor 0 and its peers,
which it sends over its own connections to their workers before doing its own share, and the
fit process makes one call a round to start it and one to end it. The level's latency, a
round trip from one worker to the others (a wake-up of each), is what remains of the
reduce-among-workers design of xgboost.dask and LightGBM (notes/distributed-data.md, §1) with
a coordinator in place of an all-reduce; the driver-side growth it replaced (every level a
call from the fit process to every actor) remains for :attr:`DaskPartitions.coordinated`
False. Updates to the raw scores are applied at the end of a round, so every tree of a
multiclass round reads the round's gradients, as locally.

A lost worker's rows are nowhere else, so they are read again (xgboost_ray's elastic
training reloads only the lost actors' shards the same way): a call that finds an actor's
worker gone raises :class:`PartitionsLost` once every other actor has answered; the driver
starts a new actor on a live worker (the nanny's restarted one, or any other), which reads its
pieces again with the fit's edges and replays the trees built so far on their values
(:meth:`PartsActor.replay`: ``Tree.predict`` routes a value as training routed its code), then
the driver repeats the round from its start. Scores are committed once per round
(:meth:`PartsActor.end_round` is idempotent by round), so a round is repeated from the same
state everywhere. After :data:`MAX_RESCATTERS` losses, or with no worker left for
``WORKER_WAIT_SECONDS``, the fit ends with :class:`engine.parallel.WorkerCrashedError`: never a
hang (dmlc/xgboost#9419, lightgbm-org/LightGBM#5920).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed import Client
from numpy.typing import NDArray

from engine.parallel._dask_cluster import MAX_RESCATTERS, check_connected, prepare_worker
from engine.parallel._dask_comms import ActorComms, Call
from engine.parallel._executor import ShutsDownOnExit, WorkerCrashedError
from engine.parallel._forest_rows import ForestHolder, move_tree_rows
from engine.parallel._parts import DataPart, PartReader, Piece, deal_rows, read_piece
from engine.process_setup import trim_freed_memory
from engine.tree._binning import BinMapper
from engine.tree._common import NARROW_CODE_DTYPE, missing_code
from engine.tree._histograms import build_histograms
from engine.tree._tree import Tree
from engine.tree.grow.level_kernels import node_totals
from engine.tree.grow.remote import LevelSplits, RoundPlan, grow_round

if TYPE_CHECKING:
    from engine.boosting._objectives import Objective

__all__ = ["ActorCalls", "DaskPartitions", "PartitionsLost", "PartsActor", "PeersFailed", "Replay"]

# How long a recovery waits for a live worker: a nanny restarts a killed worker in seconds.
WORKER_WAIT_SECONDS = 30.0
# How long a worker may take to start an actor (which reads nothing yet): past it the worker is
# taken to be stuck, as a replacement paused at Dask's 80 % memory threshold was, and the fit
# fails rather than waiting for ever.
ACTOR_START_SECONDS = 120.0

# A peer holding at most this many rows has a round's calls run on its worker's event loop
# (ActorComms' ``inline``), not handed to its actor thread and back: two wake-ups fewer a
# level, which on a busy machine are each a wait for a core (py-spy on a peer at 80,000 rows:
# ~15 % of its samples in the hand-off). A level of 2^18 rows takes tens of milliseconds,
# not long enough to hold up the worker's heartbeats; larger ranges keep to the thread.
INLINE_ROWS = 1 << 18

MetricTerms = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]


class PartsActor(ForestHolder):
    """On a worker: one range of the table's rows and every per-row state of the fit
    (boosting's here, a forest's in :class:`engine.parallel._forest_rows.ForestHolder`)."""

    def __init__(self) -> None:
        prepare_worker()
        self.pieces: list[Piece] = []
        self.read: PartReader | None = None
        self.peer_comms: ActorComms | None = None  # the coordinator's (grow_round)
        self.coordinator: ThreadPoolExecutor | None = None  # where grow_round waits

    def __del__(self) -> None:
        if getattr(self, "coordinator", None) is not None:
            self.coordinator.shutdown(wait=False)  # type: ignore[union-attr]
        if getattr(self, "peer_comms", None) is not None:
            self.peer_comms.close()  # type: ignore[union-attr]

    # -- reading and binning ------------------------------------------------------------

    def _pieces(self) -> Any:
        """Each piece's rows, read one at a time. A caller's loop drops the piece's floats
        (``del X``) before asking for the next: a loop variable holds the last piece until
        the next one is read, and two parts' floats (up to 128 MiB each) sat at the peak."""
        assert self.read is not None
        for piece in self.pieces:
            yield read_piece(self.read, piece)

    def load(self, pieces: list[Piece], read: PartReader, classification: bool) -> dict[str, Any]:
        """Read the targets and weights of ``pieces``; what the driver needs to know of them."""
        self.pieces, self.read = pieces, read
        targets, weights, tags, n_features, bad_weights = [], [], [], 0, 0
        for X, y, w, tagged in self._pieces():
            n_features = X.shape[1]
            del X
            targets.append(y)
            if w is not None:
                bad_weights += int(np.count_nonzero(~np.isfinite(w) | (w < 0)))
                # Weights of 0 and 1 alone (a service's split riding along) are kept as the
                # one byte a row of ``learns``, piece by piece: w·g is g, to the bit, where
                # w is 1.
                if np.all((w == 0) | (w == 1)):
                    w = w > 0
            weights.append(w)
            tags.append(tagged)
        self.y = np.concatenate(targets)
        if all(w is None or w.dtype == np.bool_ for w in weights):
            self.w = None
            self.learns = np.concatenate(
                [
                    np.ones(y.size, bool) if w is None else w
                    for y, w in zip(targets, weights, strict=True)
                ]
            )
        else:
            self.w = np.concatenate(
                [
                    np.ones(y.size) if w is None else w.astype(np.float64, copy=False)
                    for y, w in zip(targets, weights, strict=True)
                ]
            )
            self.learns = self.w > 0
        self.all_learn = bool(self.learns.all())
        del targets, weights
        # The caller's marks of the rows (KeptRows.evaluate reads them), if its reader gives any.
        self.tags = None if any(t is None for t in tags) else np.concatenate(tags)
        return {
            "n_rows": int(self.y.size),
            "n_features": n_features,
            "n_positive": int(np.count_nonzero(self.learns)),
            "bad_targets": int(np.count_nonzero(~np.isfinite(self.y))),
            "bad_weights": bad_weights,
            # The classes of the rows the fit learns from: rows of weight 0 (a validation
            # split passed along as such) add none.
            "labels": np.unique(self.y[self.learns]) if classification else None,
        }

    def gather(self, positive: NDArray[np.intp]) -> NDArray[np.float64]:
        """The values of the rows at ``positive`` among this range's rows of positive
        weight (ascending), in that order."""
        rows = np.flatnonzero(self.learns)[positive]
        blocks, start = [], 0
        for X, y, _, _ in self._pieces():
            stop = start + y.size
            mine = rows[(rows >= start) & (rows < stop)]
            if mine.size:
                blocks.append(X[mine - start])
            del X
            start = stop
        if not blocks:
            return np.zeros((0, 0))
        return np.concatenate(blocks)

    def _piece_values(self) -> Iterator[NDArray[np.float64]]:
        for piece in self._pieces():
            X = piece[0]
            del piece
            yield X
            del X  # before the next piece is read

    def bin(self, mapper: BinMapper) -> None:
        """Bin this range's rows with the fit's edges; keep the codes feature-major."""
        n_rows = self.y.size
        self.codes: NDArray[Any] = np.empty((mapper.n_bins_.size, n_rows), NARROW_CODE_DTYPE)
        self.row_missing = np.zeros(n_rows, dtype=bool)
        start = 0
        for X, y, _, _ in self._pieces():
            codes = mapper.transform(X)
            if codes.dtype != NARROW_CODE_DTYPE:
                raise ValueError("Out-of-core fits take uint8 codes (histogram binning).")
            self.codes[:, start : start + y.size] = codes.T
            self.row_missing[start : start + y.size] = (codes == missing_code(codes.dtype)).any(1)
            start += y.size
            del X, codes
        # The parts' floats are gone and the rows' state comes next: hand the freed pages
        # back rather than keep them (up to 256 MiB, keep_freed_memory) beside that state.
        trim_freed_memory()

    def codes_of(self, local: NDArray[np.intp]) -> NDArray[Any]:
        """The bin codes of this range's rows ``local``, row-major (n, F)."""
        return np.ascontiguousarray(self.codes[:, local].T)

    def encode(self, classes: NDArray[np.float64] | None, positive_scale: float) -> list[float]:
        """Targets as class indices (classification); ``Σ w·y`` and ``Σ w`` after it.

        Class indices are kept in the narrowest integer type that holds them (one byte a row
        for up to 127 classes, not eight): :meth:`target` gives them as floats where a
        computation takes the target, the same values."""
        if classes is not None:
            self.y = np.searchsorted(classes, self.y).astype(np.float64)
            if classes.size == 2 and positive_scale != 1.0:
                self.w = self.row_weights() * np.where(self.y == 1, positive_scale, 1.0)
        # As np.average forms them: one worker's sums are the single-machine fit's bits (with
        # weights of 0 and 1 the same products, and a sum of integers, exact).
        if self.w is None:
            sums = [float(np.multiply(self.y, self.learns).sum()), float(self.learns.sum())]
        else:
            sums = [float(np.multiply(self.y, self.w).sum()), float(self.w.sum())]
        if classes is not None:
            self.y = self.y.astype(np.min_scalar_type(-int(classes.size)))
        return sums

    def target(self) -> NDArray[np.float64]:
        """The rows' targets as floats (class indices as floats, made afresh when they are
        kept as integers)."""
        return self.y.astype(np.float64, copy=False)

    def row_weights(self) -> NDArray[np.float64]:
        """The rows' weights as floats (made afresh when they are all 0 or 1)."""
        return self.learns.astype(np.float64) if self.w is None else self.w

    def evaluate(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(self, *args)``: a caller's evaluation of the fitted model on this
        range's rows and final scores (``KeptRows.evaluate``), shipped as the reader is."""
        return function(self, *args)

    # -- boosting -------------------------------------------------------------------------

    def start(self, base: NDArray[np.float64], objective: Objective) -> None:
        self.raw = np.tile(base, (self.y.size, 1))
        self.objective = objective
        self.committed = -1  # the last round whose trees are in the scores

    def replay(self, mapper: BinMapper, stages: list[list[Tree]]) -> None:
        """Add the trees of ``stages`` (rounds 0, 1, …) to the scores, as the lost actor did.

        The rows' values are read again: ``Tree.predict`` on them routes each row to the leaf
        its codes reached in training (a split "bin ≤ b" is stored as ``x <= edge_b``), and
        the leaves' values are added tree by tree in the same order.
        """
        start = 0
        for X, y, _, _ in self._pieces():
            encoded = mapper.encode_for_prediction(X)
            for stage in stages:
                for k, tree in enumerate(stage):
                    self.raw[start : start + y.size, k] += tree.predict(encoded)[:, 0]
            start += y.size
            del X, encoded
        self.committed = len(stages) - 1

    def start_round(self, keep: NDArray[np.bool_] | None) -> None:
        """The round's gradients and hessians at the current scores; ``keep`` its rows."""
        if self.raw.shape[1] == 1:
            # Side by side, as a tree's channels lay them (Objective.pairs, the same values
            # as its gradients): on unit weights the tree takes this array as its channels,
            # where the gradients, the hessians and the channels were all held (32 bytes a
            # row) at the round's start, the worker's peak.
            self.pairs: NDArray[np.float64] | None = self.objective.pairs(self.target(), self.raw)
            self.gradient, self.hessian = self.pairs[:, 0:1], self.pairs[:, 1:2]
        else:
            self.pairs = None
            gradient, hessian = self.objective(self.target(), self.raw)
            self.gradient = np.asarray(gradient).reshape(self.y.size, -1)
            self.hessian = np.asarray(hessian).reshape(self.y.size, -1)
            del gradient, hessian
        # The round's rows, and their weights unless every one is 1 (None).
        if self.w is None:
            self.weights = None
            self.in_round = self.learns if keep is None else self.learns & keep
        else:
            self.weights = self.w if keep is None else self.w * keep
            self.in_round = self.weights > 0
        self.n_started = 0
        self.growing: dict[int, _GrowingTree] = {}
        self.pending: dict[int, NDArray[np.int32]] = {}  # each ended tree's row leaves

    def start_trees(
        self,
        requests: list[tuple[int, NDArray[np.int64]]],
        new_round: bool = False,
        keep: NDArray[np.bool_] | None = None,
    ) -> list[tuple[NDArray[np.float64], NDArray[np.int64], bool, NDArray[np.float64]]]:
        """Start output ``k``'s tree on ``features`` for each request: its rows' totals,
        count, whether any has a missing code, and the root's histograms; ``new_round``:
        :meth:`start_round` with ``keep`` first (one message where there were two)."""
        if new_round:
            self.start_round(keep)
        answers = []
        for k, features in requests:
            tree = self.growing[k] = _GrowingTree(self, k, features)
            answers.append(tree.start(self))
        self.n_started += len(requests)
        if self.n_started == self.raw.shape[1]:  # every tree holds its channels: let go
            self.gradient = self.hessian = np.zeros((0, 0))
        return answers

    def levels(self, requests: list[tuple[int, Any, Any, Any]]) -> list[Any]:
        """One level of each request's tree (:meth:`_GrowingTree.level`), in order."""
        answers = []
        for k, node_ids, splits, smaller_side in requests:
            answers.append(self.growing[k].level(self, node_ids, splits, smaller_side))
            if splits is None:  # the tree has ended: its rows' leaves wait for the round's end
                self.pending[k] = self.growing.pop(k).leaf
        return answers

    async def grow_round(
        self, plan: RoundPlan, keep: list[Any], peers: list[tuple[str, str, bool]]
    ) -> tuple[list[Tree], list[Any], np.random.Generator]:
        """Grow the round's trees here, as actor 0 of the fit, from this actor's rows and
        its ``peers``' (actors 1, 2, … by worker address, actor key and whether their
        calls are short enough to run on their worker's event loop): each level is one
        exchange with the peers, sent before this actor does its own share and summed in
        actor order, as the fit process sums them. The trees, the levels kept for the
        round's end, and the plan's stream at the round's end. A peer lost or failing
        raises :class:`PeersFailed` once every peer has answered.

        A coroutine, so that the worker runs it on its event loop rather than in its one
        actor thread, and the growth itself on a thread of this actor's own: a worker runs
        every actor's methods in that single thread, and a coordinator waiting there for
        its peers would keep the worker from answering any other fit. Two fits whose
        coordinators sit on different workers, each with a peer on the other's worker (a
        worker restarted on a new port reorders the workers a fit sees), would then wait
        on each other for ever, and leave both workers' actor threads stuck after the jobs
        were killed. The peers' calls still run in their workers' actor threads, and never
        wait on anything."""
        if self.peer_comms is None:
            self.peer_comms = ActorComms.of_worker()
        if self.coordinator is None:
            self.coordinator = ThreadPoolExecutor(1, thread_name_prefix="coppice-coordinator")
        send = _PeerSend(self, peers)  # here: it asks the worker (a context variable) its peers
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.coordinator, self._grow_round, plan, keep, send)

    def _grow_round(
        self, plan: RoundPlan, keep: list[Any], send: _PeerSend
    ) -> tuple[list[Tree], list[Any], np.random.Generator]:
        rows = _TreeRows(send, keep, plan.lockstep)
        stage = grow_round(plan, rows)
        return stage, rows.ended, plan.rng

    def end_round(
        self,
        round_index: int,
        leaf_values: list[NDArray[np.float64]],
        metric: MetricTerms,
        ended: list[tuple[int, Any, Any, Any]] | None = None,
    ) -> float:
        """Record the last level of the trees ``ended`` (:meth:`levels` requests without
        splits, sent here rather than in a message of their own), then add each tree's leaf
        values to the scores, once per round (a repeated call, after another actor was lost,
        only sums again); the sum of the metric's terms over the rows of positive weight."""
        if round_index > self.committed:
            if ended:
                self.levels(ended)
            assert sorted(self.pending) == list(range(len(leaf_values)))
            for k, values in enumerate(leaf_values):
                self.raw[:, k] += values[self.pending[k]]
            self.committed = round_index
        self.pending, self.growing = {}, {}
        self.gradient = self.hessian = np.zeros((0, 0))
        if self.all_learn:  # the same terms as from copies of every row, summed alike
            return float(np.sum(metric(self.target(), self.raw)))
        learns = self.learns  # rows of weight 0 (a validation split) are not training rows
        return float(np.sum(metric(self.target()[learns], self.raw[learns])))


class _GrowingTree:
    """One growing tree's state on an actor: its rows' channels, the rows in the tree and
    those outside it (which follow its splits too: its leaves move their scores), each
    row's node slot, and the node each row reached."""

    def __init__(self, actor: PartsActor, k: int, features: NDArray[np.int64]) -> None:
        in_tree = actor.in_round
        # Channels are read by row index, as the codes are, and only at the tree's rows.
        # A single-output round's one tree takes the round's pairs as they are (their
        # values at rows outside the tree are never read), weighted in place.
        pairs, actor.pairs = actor.pairs, None
        if pairs is not None:
            if actor.weights is not None:  # w·g and w·h, row by row as below
                np.multiply(pairs, actor.weights[:, None], out=pairs)
            self.channels = pairs
        rows = np.flatnonzero(in_tree)
        if pairs is None:
            self.channels = np.zeros((actor.y.size, 2))
            if actor.weights is None:  # every weight 1: g·1 is g
                self.channels[rows, 0] = actor.gradient[rows, k]
                self.channels[rows, 1] = actor.hessian[rows, k]
            else:
                row_weights = actor.weights[rows]
                self.channels[rows, 0] = actor.gradient[rows, k] * row_weights
                self.channels[rows, 1] = actor.hessian[rows, k] * row_weights
        self.rows, self.slots = rows, np.zeros(rows.size, dtype=np.intp)
        self.out_rows = np.flatnonzero(~in_tree)
        self.out_slots = np.zeros(self.out_rows.size, dtype=np.intp)
        # Node numbers of a tree (< 2^31): four bytes a row, not eight.
        self.leaf = np.zeros(actor.y.size, dtype=np.int32)
        self.features = np.asarray(features, dtype=np.int64)

    def start(
        self, actor: PartsActor
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], bool, NDArray[np.float64]]:
        """The tree's rows' totals, count, whether any has a missing code; root histograms."""
        totals, counts = node_totals(self.rows, self.slots, 1, self.channels)
        histograms = self._histograms(actor, self.rows, self.slots, 1)
        return totals, counts, bool(actor.row_missing[self.rows].any()), histograms

    def _histograms(
        self,
        actor: PartsActor,
        rows: NDArray[np.intp],
        slots: NDArray[np.intp],
        n_slots: int,
    ) -> NDArray[np.float64]:
        return build_histograms(actor.codes, rows, slots, n_slots, self.features, self.channels, 2)

    def level(
        self,
        actor: PartsActor,
        node_ids: NDArray[np.intp],
        splits: LevelSplits | None,
        smaller_side: NDArray[np.intp] | None,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64] | None] | None:
        """Record the level's nodes; move the rows by its splits; the children's totals,
        counts and, with ``smaller_side``, each split's smaller child's histograms."""
        self.leaf[self.rows] = node_ids[self.slots]
        self.leaf[self.out_rows] = node_ids[self.out_slots]
        if splits is None:
            return None
        totals, counts = move_tree_rows(actor.codes, self, splits)
        if smaller_side is None:
            return totals, counts, None
        # The smaller children's rows in their order, numbered by split (smaller_children);
        # a byte a row to pick them, and slots only for the picked rows.
        smaller = np.zeros(2 * smaller_side.size, dtype=bool)
        smaller[2 * np.arange(smaller_side.size) + smaller_side] = True
        small = smaller[self.slots]
        histograms = self._histograms(
            actor, self.rows[small], self.slots[small] // 2, smaller_side.size
        )
        return totals, counts, histograms


class PeersFailed(Exception):
    """Raised by a coordinating actor (:meth:`PartsActor.grow_round`): the peers ``lost``
    (actor indices) could not be reached, and those of ``failed`` raised (their errors)."""

    def __init__(self, lost: list[int], failed: list[tuple[int, BaseException]]) -> None:
        super().__init__(lost, failed)  # pickled by its args, to the fit process

    @property
    def lost(self) -> list[int]:
        return list(self.args[0])

    @property
    def failed(self) -> list[tuple[int, BaseException]]:
        return list(self.args[1])


class _PeerSend:
    """A coordinating actor's calls to every actor of the fit (itself first, then its peers
    by index): the peers' calls go out over its own connections, then it answers its own;
    a peer on this worker (a replacement's, when one worker was left) is called here, in
    the coordinator's thread (nothing else calls the fit's actors while its round grows)."""

    def __init__(self, actor: PartsActor, peers: list[tuple[str, str, bool]]) -> None:
        from distributed import get_worker

        worker = get_worker()
        self.actor, self.peers = actor, peers
        self.here, self.actors_here = worker.address, worker.state.actors

    def __call__(self, method: str, arguments: list[list[Any]]) -> list[Any]:
        remote = [i for i, (address, _, _) in enumerate(self.peers, 1) if address != self.here]
        calls: list[Call] = []
        for i in remote:
            address, key, inline = self.peers[i - 1]
            calls.append((address, key, method, arguments[i], inline))

        def own_share() -> dict[int, Any]:
            answers = {0: getattr(self.actor, method)(*arguments[0])}
            for i, (address, key, _) in enumerate(self.peers, 1):
                if address == self.here:
                    answers[i] = getattr(self.actors_here[key], method)(*arguments[i])
            return answers

        assert self.actor.peer_comms is not None
        outcomes, answers = self.actor.peer_comms.exchange(calls, own_share)
        lost, failed = [], []
        for i, outcome in zip(remote, outcomes, strict=True):
            if isinstance(outcome, OSError):
                lost.append(i)
            elif isinstance(outcome, BaseException):
                failed.append((i, outcome))
            else:
                answers[i] = outcome
        if lost or failed:
            raise PeersFailed(lost, failed)
        return [answers[i] for i in range(len(arguments))]


class PartitionsLost(Exception):
    """The actors ``lost`` could not answer: their workers died or are dying."""

    def __init__(self, lost: list[int]) -> None:
        super().__init__(f"partitions {lost} lost")
        self.lost = lost


@dataclass
class ForestSetup:
    """What a new actor needs to hold a forest's state (``start_forest``'s arguments, its
    first global row by actor) and the trees to replay: those of the batches up to
    ``batch``."""

    sampling: Any
    first_rows: list[int]
    n_outputs: int
    trees: list[Tree] = field(default_factory=list)
    batch: int = -1


@dataclass
class Replay:
    """What a new actor needs to stand where a lost one stood: the fit's setup (the
    arguments of ``encode``, ``bin`` and ``start``) and the rounds whose trees to replay."""

    classification: bool
    classes: NDArray[np.float64] | None
    positive_scale: float
    mapper: BinMapper
    base: NDArray[np.float64] | None
    objective: Objective | None
    stages: list[list[Tree]]
    # Trees were dropped (an early stop keeping fewer rounds) after their leaves entered the
    # actors' scores: the scores are rebuilt from ``stages`` before they are evaluated.
    rescore: bool = False
    # A forest's fit (engine.ensemble._forest_parts): no scores to start, trees to replay.
    forest: ForestSetup | None = None


class DaskPartitions(ShutsDownOnExit):
    """The table's rows in one :class:`PartsActor` per Dask worker, for one fit."""

    # Calls over this process's own connections to the workers (ActorComms); False: through
    # the actor proxies, as before (benchmarks.dask_parts times both).
    direct = True
    # A boosting round's trees grown by actor 0 among the workers (grow_round); False: here.
    coordinated = True
    # Peers holding at most this many rows run the round's calls on their event loop.
    inline_rows = INLINE_ROWS

    def __init__(self, client: Client, parts: Sequence[DataPart], read: PartReader) -> None:
        check_connected(client)
        self.client = client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("The Dask cluster has no workers.")
        self.groups = deal_rows(parts, len(workers))
        self.workers = workers[: len(self.groups)]
        self.read = read
        self.handles: list[Any] = [None] * len(self.groups)
        self.actors: list[Any] = [None] * len(self.groups)
        # The calls go over this process's own connections to the workers while every
        # actor's worker takes them, else through the actor proxies (_dask_comms).
        self.comms: ActorComms | None = ActorComms.of_client(client) if self.direct else None
        for index in range(len(self.groups)):
            self._start_actor(index)
        self.n_recoveries = 0

    def _start_actor(self, index: int) -> None:
        handle = self.client.submit(
            PartsActor, actor=True, workers=[self.workers[index]], pure=False
        )
        # A proxy binds to the client current at its first call (see _dask_histograms).
        with self.client.as_current():
            try:
                self.actors[index] = handle.result(timeout=ACTOR_START_SECONDS)
            except TimeoutError:
                handle.cancel()
                raise WorkerCrashedError(
                    f"The Dask worker {self.workers[index]} did not start the actor that holds "
                    f"its rows within {ACTOR_START_SECONDS:.0f} s (a worker paused at its "
                    "memory limit runs nothing); giving up (retry the fit, with more memory "
                    "per worker or more workers)."
                ) from None
        self.handles[index] = handle
        if self.comms is not None and not self.comms.reachable(
            self.actors[index]._address, str(handle.key)
        ):
            self.comms.close()
            self.comms = None

    def call(self, method: str, *per_actor: Sequence[Any]) -> list[Any]:
        """``method`` on every actor (the i-th taking the i-th of each ``per_actor``), in
        actor order. Raises :class:`PartitionsLost` when actors' workers are gone, after
        every other actor has answered (none is left running into a retry)."""
        arguments = [[values[index] for values in per_actor] for index in range(len(self.actors))]
        return self._call_with(method, arguments)

    def _call_with(self, method: str, arguments: list[list[Any]]) -> list[Any]:
        """:meth:`call` with each actor's arguments, by actor."""
        indices = list(range(len(self.actors)))
        return self._results(indices, self._outcomes(method, indices, arguments))

    def _results(self, indices: list[int], outcomes: list[Any]) -> list[Any]:
        """The results of the actors ``indices``' calls, or what their failures raise."""
        results: list[Any] = []
        lost: list[int] = []
        failure: BaseException | None = None
        for index, outcome in zip(indices, outcomes, strict=True):
            if isinstance(outcome, PeersFailed):  # a coordinator's peers (grow_round)
                lost.extend(outcome.lost)
                for peer, error in outcome.failed:
                    failure = failure or self._lost_or_failed(peer, error, lost)
                continue
            if isinstance(outcome, BaseException):
                failure = failure or self._lost_or_failed(index, outcome, lost)
                continue
            results.append(outcome)
        if failure is not None:
            raise failure
        if lost:
            raise PartitionsLost(sorted(set(lost)))
        return results

    def _lost_or_failed(
        self, index: int, error: BaseException, lost: list[int]
    ) -> BaseException | None:
        """``error`` if actor ``index``'s call failed on a live worker; else None, and the
        actor is counted in ``lost`` (its worker is gone, or going: how a dying worker's call
        fails depends on when)."""
        check_connected(self.client)
        # OSError: distributed.actor's "Unable to contact Actor's worker", a closed comm.
        if isinstance(error, OSError) or (
            self.workers[index] not in self.client.scheduler_info()["workers"]
        ):
            lost.append(index)
            return None
        return error

    def _outcomes(self, method: str, indices: list[int], arguments: list[list[Any]]) -> list[Any]:
        """``method`` on the actors ``indices`` with their ``arguments``: each result or
        exception, in order."""
        if self.comms is not None:
            return self.comms.call(
                [
                    (self.actors[i]._address, self.handles[i].key, method, args)
                    for i, args in zip(indices, arguments, strict=True)
                ]
            )
        futures = [
            getattr(self.actors[i], method)(*args)
            for i, args in zip(indices, arguments, strict=True)
        ]
        outcomes: list[Any] = []
        for future in futures:
            try:
                outcomes.append(future.result())
            except Exception as error:
                outcomes.append(error)
        return outcomes

    def grow_round(self, plan: RoundPlan, keep: Sequence[Any]) -> tuple[list[Tree], list[Any]]:
        """A boosting round's trees grown on the actors' rows (``keep``: each actor's rows of
        the round, :meth:`PartsActor.start_round`), and the levels kept for the round's end;
        ``plan.rng`` is left as the round left it.

        With :attr:`coordinated`, actor 0 grows them (:meth:`PartsActor.grow_round`): a
        level is one exchange between the workers, and actor 0's own rows are answered
        where they are; else they grow here, one exchange with every actor a level."""
        if not self.coordinated:
            rows = self.tree_rows(keep, defer_ends=plan.lockstep)
            return grow_round(plan, rows), rows.ended
        peers = [
            (actor._address, handle.key, _rows(group) <= self.inline_rows)
            for actor, handle, group in zip(
                self.actors[1:], self.handles[1:], self.groups[1:], strict=True
            )
        ]
        [(stage, ended, rng)] = self._results(
            [0], self._outcomes("grow_round", [0], [[plan, list(keep), peers]])
        )
        plan.rng.bit_generator.state = rng.bit_generator.state
        return stage, ended

    def replace(self, lost: Sequence[int], replay: Replay) -> None:
        """New actors for the ``lost`` ones on live workers, standing where those stood."""
        check_connected(self.client)
        if self.n_recoveries >= MAX_RESCATTERS:
            raise WorkerCrashedError(
                f"Lost Dask workers holding rows of the table {self.n_recoveries + 1} times "
                "in one fit; giving up (retry the fit)."
            )
        self.n_recoveries += 1
        gone = {self.workers[index] for index in lost}
        for index in lost:
            self.workers[index] = self._live_worker(excluding=gone)
            if self.handles[index] is not None:
                self.client.cancel([self.handles[index]])
            self._start_actor(index)
            actor = self.actors[index]
            try:
                actor.load(self.groups[index], self.read, replay.classification).result()
                actor.encode(replay.classes, replay.positive_scale).result()
                actor.bin(replay.mapper).result()
                forest = replay.forest
                if forest is not None:
                    first = forest.first_rows[index]
                    actor.start_forest(
                        forest.sampling, first, forest.n_outputs, replay.classification
                    ).result()
                    actor.replay_forest(replay.mapper, forest.trees, forest.batch).result()
                else:
                    actor.start(replay.base, replay.objective).result()
                    actor.replay(replay.mapper, replay.stages).result()
            except OSError as error:  # the new worker went too: the next call finds it
                raise PartitionsLost([index]) from error

    def _live_worker(self, excluding: set[str]) -> str:
        """A live worker, the one holding the fewest partitions (a restarted one holds none),
        waiting a while for one to appear."""
        deadline = time.monotonic() + WORKER_WAIT_SECONDS
        while True:
            live = sorted(set(self.client.scheduler_info()["workers"]) - excluding)
            if live:
                return min(live, key=self.workers.count)
            if time.monotonic() > deadline:
                raise WorkerCrashedError(
                    "Lost a Dask worker holding rows of the table and no worker came back "
                    f"within {WORKER_WAIT_SECONDS:g} s (retry the fit)."
                )
            check_connected(self.client)
            time.sleep(0.25)

    def each(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every actor."""
        return self.call(method, *([arg] * len(self.actors) for arg in args))

    def tree_rows(self, keep: Sequence[Any], defer_ends: bool) -> _TreeRows:
        """The round's trees, on every actor's rows; ``keep``: each actor's rows of the round
        (:meth:`PartsActor.start_round`), sent with the first tree's start."""
        return _TreeRows(self._call_with, keep, defer_ends)

    def shutdown(self) -> None:
        if self.comms is not None:
            self.comms.close()
            self.comms = None
        handles = [handle for handle in self.handles if handle is not None]
        self.handles, self.actors = [], []
        if handles and self.client.status == "running":
            self.client.cancel(handles)


class ActorCalls:
    """A caller's functions run on every actor (``KeptRows.evaluate``): ``n`` actors, each
    holding a range of the rows in order."""

    def __init__(self, partitions: DaskPartitions) -> None:
        self.partitions = partitions
        self.n = len(partitions.actors)

    def each(self, function: Callable[..., Any], *args: Any) -> list[Any]:
        """``function(actor, *args)`` on every actor, in actor order."""
        return self.partitions.each("evaluate", function, *args)

    def call(self, function: Callable[..., Any], *per_actor: Sequence[Any]) -> list[Any]:
        """``function(actor, *args)`` on actor ``i`` with the i-th of each ``per_actor``."""
        return self.partitions.call("evaluate", [function] * self.n, *per_actor)


class _TreeRows:
    """The round's trees' rows across the actors (:class:`engine.tree.grow.remote.
    RemoteTrees`): one call to every actor per exchange, whatever the number of trees; each
    tree's answers summed in actor order."""

    def __init__(
        self,
        send: Callable[[str, list[list[Any]]], list[Any]],
        keep: Sequence[Any],
        defer_ends: bool,
    ) -> None:
        self.send = send  # (method, each actor's arguments) -> each actor's answer
        self.n = len(keep)
        self.keep: Sequence[Any] | None = keep  # the round's start, until the first tree's
        # With ``defer_ends``, an exchange in which every tree ends (its last level, which
        # only records the rows' leaves) is not sent: it goes with the round's end
        # (PartsActor.end_round), one message a round fewer. Trees grown one after another
        # keep their own, so that each tree's rows are let go when it ends.
        self.defer_ends = defer_ends
        self.ended: list[tuple[int, Any, Any, Any]] = []

    def start(
        self, requests: Sequence[tuple[int, NDArray[np.int64]]]
    ) -> list[tuple[NDArray[np.float64], NDArray[np.int64], bool, NDArray[np.float64]]]:
        asked = [(k, np.asarray(features)) for k, features in requests]
        if self.keep is not None:
            per_actor = self.send("start_trees", [[asked, True, keep] for keep in self.keep])
            self.keep = None
        else:
            per_actor = self.send("start_trees", [[asked]] * self.n)
        summed = []
        for answers in zip(*per_actor, strict=True):
            totals, counts, has_missing, histograms = answers[0]
            for part_totals, part_counts, part_missing, part_histograms in answers[1:]:
                totals = totals + part_totals
                counts = counts + part_counts
                has_missing = has_missing or part_missing
                histograms += part_histograms
            summed.append((totals, counts, has_missing, histograms))
        return summed

    def level(self, requests: Sequence[tuple[int, Any, Any, Any]]) -> list[Any]:
        if self.defer_ends and all(request[2] is None for request in requests):
            self.ended.extend(requests)
            return [None] * len(requests)
        per_actor = self.send("levels", [[list(requests)]] * self.n)
        summed: list[Any] = []
        for request, answers in zip(requests, zip(*per_actor, strict=True), strict=True):
            if request[2] is None:  # the tree ended: nothing to sum
                summed.append(None)
                continue
            totals, counts, histograms = answers[0]
            for part_totals, part_counts, part_histograms in answers[1:]:
                totals = totals + part_totals
                counts = counts + part_counts
                if histograms is not None:
                    histograms += part_histograms
            summed.append((totals, counts, histograms))
        return summed


def _rows(pieces: Sequence[Piece]) -> int:
    """How many rows an actor holds of its ``pieces``."""
    return sum(piece.stop - piece.start for piece in pieces)
