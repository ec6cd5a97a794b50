"""From shared binned data to one fitted :class:`Tree`.

Single trees, forests and bagging all end here. ``build_tree`` receives the (possibly
shared-memory) binned matrix of the whole training set plus one tree's row weights, so a
forest worker never receives the data itself, only a seed and a spec.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._binning import BinMapper, has_missing_codes
from engine.tree._criteria import Criterion
from engine.tree._tree import Tree
from engine.tree.grow.grower import grow, grow_tree, grows_in_one_call
from engine.tree.grow.growth import Growth
from engine.tree.grow.limits import GrowthLimits
from engine.tree.grow.whole_tree import TreeWorkspace, grow_whole
from engine.tree.split.context import SplitContext

if TYPE_CHECKING:
    from engine.parallel._backend_protocols import HistogramSource

__all__ = [
    "BinnedData",
    "TreeSpec",
    "build_newton_tree",
    "build_newton_trees",
    "build_tree",
    "resolve_max_features",
]


@dataclass(frozen=True)
class TreeSpec:
    """Hyperparameters of one tree, resolved against the data (small and picklable)."""

    criterion: Criterion
    random_splits: bool
    limits: GrowthLimits
    n_classes: int  # 0 for regression
    # Second-order trees: monotone constraint per feature (−1, 0, +1), None when all are 0.
    monotone: NDArray[np.int8] | None = None


@dataclass(frozen=True)
class BinnedData:
    """The training set as trees see it.

    Attributes
    ----------
    binned : ndarray of uint8 (``uint16`` for exact binning), shape (n_samples, n_features)
    target : ndarray, shape (n_samples,)
        Class indices (int64) for classification, float64 targets for regression.
    thresholds, bin_values, is_categorical : arrays from :class:`BinMapper`
    """

    binned: NDArray[np.unsignedinteger[Any]]
    target: NDArray[Any]
    thresholds: NDArray[np.float64]
    bin_values: NDArray[np.float64]
    is_categorical: NDArray[np.bool_]
    n_bins: NDArray[np.int32]

    @classmethod
    def from_mapper(
        cls, binned: NDArray[np.unsignedinteger[Any]], target: NDArray[Any], mapper: BinMapper
    ) -> BinnedData:
        return cls(
            binned,
            target,
            mapper.thresholds_,
            mapper.bin_values_,
            mapper.is_categorical_,
            mapper.n_bins_,
        )

    def as_arrays(self) -> dict[str, NDArray[Any]]:
        return {
            "binned": self.binned,
            "target": self.target,
            "thresholds": self.thresholds,
            "bin_values": self.bin_values,
            "is_categorical": self.is_categorical,
            "n_bins": self.n_bins,
        }

    @classmethod
    def from_arrays(cls, arrays: Any) -> BinnedData:
        return cls(
            arrays["binned"],
            arrays["target"],
            arrays["thresholds"],
            arrays["bin_values"],
            arrays["is_categorical"],
            arrays["n_bins"],
        )


def build_tree(
    data: BinnedData,
    weights: NDArray[np.float64],
    spec: TreeSpec,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None = None,
    threads: Executor | None = None,
    leaves: NDArray[np.intp] | None = None,
) -> Tree:
    """Grow one tree on the rows of ``data`` with positive weight.

    Parameters
    ----------
    weights : ndarray of float64, shape (n_samples,)
        Per-row weight: sample weight × class weight × bootstrap count (0 = row unused).
    threads : Executor, optional
        Threads the tree's kernels may share work among (see :mod:`engine._threads`).
    leaves : ndarray of intp, shape (n_samples,), optional
        Filled with each row's leaf where growth learnt it, −1 elsewhere (rows of weight 0,
        best-first trees).
    """
    rows = np.flatnonzero(weights > 0)
    binned = _rows_of(data.binned, rows)
    # Every row (a boosting stage without subsampling): the arrays themselves, read only,
    # rather than copies of them, 8 bytes a row each (13 MiB apiece at 1.6 M rows).
    every_row = rows.size == weights.size
    row_weights = weights if every_row else weights[rows]
    row_targets = data.target if every_row else data.target[rows]
    if spec.n_classes:
        classes = row_targets
        channels = np.zeros((rows.size, spec.n_classes))
        channels[np.arange(rows.size), classes] = row_weights
        targets = None
    else:
        targets = row_targets.astype(np.float64, copy=False)
        classes = None
        channels = np.empty((rows.size, 2))
        channels[:, 0] = row_weights
        np.multiply(row_weights, targets, out=channels[:, 1])
    ctx = SplitContext(
        binned=binned,
        channels=channels,
        criterion=spec.criterion,
        is_categorical=data.is_categorical,
        bin_values=data.bin_values,
        min_samples_leaf=spec.limits.min_samples_leaf,
        min_weight_leaf=spec.limits.min_weight_leaf,
        random_splits=spec.random_splits,
        n_bins=data.n_bins,
        classes=classes if spec.n_classes else None,
        weights=row_weights if spec.n_classes else None,
        has_missing=has_missing_codes(binned),
        threads=threads,
    )
    return _grow(ctx, targets, data, spec, rng, feature_subset, rows, leaves)


def build_newton_tree(
    data: BinnedData,
    gradient: NDArray[np.float64],
    hessian: NDArray[np.float64],
    weights: NDArray[np.float64],
    spec: TreeSpec,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None = None,
    threads: Executor | None = None,
    leaves: NDArray[np.intp] | None = None,
    histograms: HistogramSource | None = None,
    workspace: TreeWorkspace | None = None,
) -> Tree:
    """Grow one second-order tree (``spec.criterion`` a :class:`Newton`) on ``(g, h)``.

    Parameters
    ----------
    gradient, hessian : ndarray of float64, shape (n_samples,)
        First and second derivatives of the loss at the current raw scores.
    weights : ndarray of float64, shape (n_samples,)
        Row weights (sample weight × subsample mask); rows of weight 0 are left out.
    leaves : ndarray of intp, shape (n_samples,), optional
        Filled with each row's leaf where growth learnt it, −1 elsewhere (rows of weight 0,
        best-first trees).
    histograms : HistogramSource, optional
        Builds the tree's histograms from partitions of ``data.binned`` held elsewhere (a
        Dask cluster's workers; :mod:`engine.parallel`); None builds them here.
    workspace : TreeWorkspace, optional
        Arrays the fit's trees reuse when each grows in one compiled call
        (:mod:`engine.tree.grow.whole_tree`).
    """
    (tree,) = build_newton_trees(
        data,
        gradient[:, None],
        hessian[:, None],
        weights,
        spec,
        rng,
        feature_subset,
        threads,
        None if leaves is None else leaves[None, :],
        histograms,
        [workspace or TreeWorkspace()],
    )
    return tree


def build_newton_trees(
    data: BinnedData,
    gradient: NDArray[np.float64],
    hessian: NDArray[np.float64],
    weights: NDArray[np.float64],
    spec: TreeSpec,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None,
    threads: Executor | None,
    leaves: NDArray[np.intp] | None,
    histograms: HistogramSource | None,
    workspaces: list[TreeWorkspace],
) -> list[Tree]:
    """The K second-order trees of one boosting round, one per output (column of ``(g, h)``).

    The trees share the round's rows and their codes. Each takes its random draws from
    ``rng`` in output order, before the next one's, as K calls of :func:`build_newton_tree`
    would; when the trees grow in one compiled call each (which draws nothing while it grows,
    :func:`~engine.tree.grow.grower.grows_in_one_call`), they then grow side by side on
    ``threads``, one thread and its own workspace each (``workspaces[k % len(workspaces)]``;
    give one per output when threads are given), so the K trees of a multiclass round are
    the serial ones to the bit whatever the number of threads. Side by side paid better than
    each tree's steps shared among the threads (:mod:`engine.tree.grow.thread_kernels`) on a
    quiet two-core machine: 5 classes, 40k × 30, 50 rounds on two threads took 3.25 s side
    by side and 5.41 s shared (``benchmarks.wall_pairs``, load ≤ 1.2); a single tree (binary,
    regression) still shares its steps.

    Parameters
    ----------
    gradient, hessian : ndarray of float64, shape (n_samples, K)
    leaves : ndarray of intp, shape (K, n_samples), optional
        Row ``k`` takes each row's leaf in tree ``k`` (see :func:`build_newton_tree`).
    """
    positive = weights > 0
    # Every row (the rounds' common case): no gathers, and no array of their indices.
    every_row = bool(positive.all())
    rows = None if every_row else np.flatnonzero(positive)
    del positive
    n_rows = weights.size if rows is None else rows.size
    row_weights = weights if rows is None else weights[rows]
    binned = data.binned if rows is None else data.binned[rows]
    has_missing = has_missing_codes(binned)
    n_outputs = gradient.shape[1]
    # Each row's leaf, written by the growers straight into the caller's array when the
    # trees grow on every row (else gathered back below).
    grown = (
        leaves
        if leaves is not None and rows is None and leaves.flags.c_contiguous
        else np.empty((n_outputs, n_rows), dtype=np.intp)
    )
    trees: list[Tree | None] = [None] * n_outputs
    deferred: list[tuple[int, Growth]] = []
    for k in range(n_outputs):
        channels = _paired_channels(gradient[:, k], hessian[:, k], row_weights, rows)
        if channels is None:
            channels = np.empty((n_rows, 2))
            np.multiply(
                gradient[:, k] if rows is None else gradient[rows, k], row_weights, channels[:, 0]
            )
            np.multiply(
                hessian[:, k] if rows is None else hessian[rows, k], row_weights, channels[:, 1]
            )
        ctx = SplitContext(
            binned=binned,
            channels=channels,
            criterion=spec.criterion,
            is_categorical=data.is_categorical,
            bin_values=data.bin_values,
            min_samples_leaf=spec.limits.min_samples_leaf,
            min_weight_leaf=spec.limits.min_weight_leaf,
            random_splits=spec.random_splits,
            n_bins=data.n_bins,
            has_missing=has_missing,
            monotone=spec.monotone,
            threads=threads,
            remote_histograms=None
            if histograms is None
            else histograms.tree(np.arange(n_rows) if rows is None else rows, channels),
        )
        growth = Growth(ctx, None, data.thresholds, spec.limits, rng, feature_subset)
        workspace = workspaces[k % len(workspaces)]
        if threads is not None and n_outputs > 1 and grows_in_one_call(growth):
            deferred.append((k, growth))
        else:  # grown now: its growth may still draw from rng, before the next tree's draws
            trees[k] = grow(growth, grown[k], workspace)
    if deferred:
        assert threads is not None
        for _, growth in deferred:
            _ = growth.columns  # the shared feature-major codes, made once before the threads
        # A workspace each (a fresh one where the caller gave fewer): threads never share one.
        own = workspaces if len(workspaces) >= n_outputs else [None] * n_outputs
        futures = [
            (k, threads.submit(grow_whole, growth, grown[k], own[k], 1)) for k, growth in deferred
        ]
        for k, future in futures:
            trees[k] = future.result()
    if leaves is not None and grown is not leaves:
        if rows is None:
            leaves[:] = grown
        else:
            leaves[:] = -1
            leaves[:, rows] = grown
    return [tree for tree in trees if tree is not None]


def _paired_channels(
    gradient: NDArray[np.float64],
    hessian: NDArray[np.float64],
    weights: NDArray[np.float64],
    rows: NDArray[np.intp] | None,
) -> NDArray[np.float64] | None:
    """The (n, 2) array whose columns ``gradient`` and ``hessian`` are, when the channels
    would equal it (every row, unit weights: ``g · 1.0`` is ``g`` bit for bit), else None.

    The XGBoost-style rounds lay a single output's derivatives out so
    (``engine.boosting._objectives.Objective.pairs``): the tree then reads them in place, not
    a weighted copy held beside them (16 bytes a row, 24 MiB of a 1.6 M-row fit)."""
    if rows is not None or weights.strides != (0,) or weights.size == 0 or weights[0] != 1.0:
        return None
    pairs = gradient.base
    if (
        not isinstance(pairs, np.ndarray)
        or pairs.dtype != np.float64
        or pairs.shape != (gradient.size, 2)
        or not pairs.flags.c_contiguous
        or gradient.ctypes.data != pairs.ctypes.data
        or hessian.ctypes.data != pairs.ctypes.data + pairs.itemsize
        or gradient.strides != pairs.strides[:1]
        or hessian.strides != pairs.strides[:1]
    ):
        return None
    return pairs


def _grow(
    ctx: SplitContext,
    targets: NDArray[np.float64] | None,
    data: BinnedData,
    spec: TreeSpec,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None,
    rows: NDArray[np.intp],
    leaves: NDArray[np.intp] | None,
) -> Tree:
    """:func:`grow_tree` on the tree's ``rows``, their leaves written back by row of data."""
    if leaves is None:
        return grow_tree(ctx, targets, data.thresholds, spec.limits, rng, feature_subset)
    grown = np.empty(rows.size, dtype=np.intp)
    tree = grow_tree(ctx, targets, data.thresholds, spec.limits, rng, feature_subset, grown)
    leaves[:] = -1
    leaves[rows] = grown
    return tree


def _rows_of(
    binned: NDArray[np.unsignedinteger[Any]], rows: NDArray[np.intp]
) -> NDArray[np.unsignedinteger[Any]]:
    """``binned[rows]``, without the copy when ``rows`` are all of them (boosting rounds
    without subsampling grow every tree on every row)."""
    return binned if rows.size == binned.shape[0] else binned[rows]


def resolve_max_features(max_features: Any, n_features: int) -> int:
    """Number of candidate features per split from the ``max_features`` parameter."""
    if max_features is None:
        return n_features
    if max_features == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    if max_features == "log2":
        return max(1, int(math.log2(n_features)))
    if isinstance(max_features, float):
        return max(1, int(max_features * n_features))
    if max_features > n_features:
        raise ValueError(f"max_features={max_features} exceeds the {n_features} features of X.")
    return int(max_features)
