"""A whole second-order histogram tree grown in one compiled call.

LightGBM's serial tree learner grows a tree from root to leaves in one C++ call over buffers
allocated once per fit (``SerialTreeLearner::Train``; Ke et al. 2017), and WildWood grows a
whole tree in one Numba function (Gaïffas, Merad and Yu 2021). pygbm, scikit-learn's Numba
prototype of its histogram boosting, showed why that matters: its kernels matched C++ one
thread against one, and the per-node Python around them is where it lost. Here the level
loop of :func:`engine.tree.grow.grower.grow_tree` — record the level, search its open nodes,
accept, partition the rows, build the smaller children's histograms and subtract for their
siblings — runs inside one kernel for the trees of XGBoost-style boosting, calling the very
kernels the Python loop calls, in the same order, on the same arrays:

* the level's splits from its histograms (:func:`~engine.tree.split.search_kernels.search_histograms`),
  and from its rows once the histograms would cost more than the rows
  (:func:`~engine.tree.split.search_kernels.search_rows`);
* the rows moved to their children with the children's totals summed on the way
  (:mod:`engine.tree.grow.partition_kernels`);
* the smaller child's histograms from its rows, its sibling's by subtraction
  (:mod:`engine.tree._histograms`).

So the tree is the Python loop's to the last bit (same candidates, same ties, same sums in the
same order); the Python loop stays as the kernel's twin, which ``COPPICE_ENGINE_KERNELS=numpy``
runs and the tests hold equal to it. The kernel leaves the nodes' totals, counts, depths and
splits in a :class:`TreeWorkspace` (histograms, row partitions and node arrays, allocated once
per fit); the node values, impurities and thresholds are then computed from them with the
same NumPy expressions the loop uses, for the whole tree at once.

Trees that need what only the Python loop does — monotone bounds, per-level or per-split
feature sampling, histograms built on a cluster, best-first growth, unbounded depth, wide
codes, first-order criteria — keep growing there (:func:`grows_whole`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import compiled_kernels, inline_kernel, parallel_kernel
from engine._threads import parallel_kernel_threads, pool_size
from engine.tree._common import (
    BITSET_BYTES,
    HISTOGRAM_CODES,
    HISTOGRAM_DTYPE,
    NARROW_CODE_DTYPE,
)
from engine.tree._criteria import Newton, node_weight, score
from engine.tree._tree import NODE_DTYPE, Tree
from engine.tree.grow.growth import (
    HISTOGRAM_CELLS_PER_ROW,
    HISTOGRAM_MAX_CELLS,
    HISTOGRAM_MAX_SPLITS,
    IMPURITY_EPSILON,
    Growth,
)
from engine.tree.grow.level_kernels import _totals_compiled
from engine.tree.grow.thread_kernels import (
    children_histograms_threads,
    histograms_threads,
    partition_threads,
    search_histograms_threads,
    search_rows_threads,
)
from engine.tree.split.compiled import _settings

__all__ = ["INDEX_DTYPE", "TreeWorkspace", "grow_whole", "grows_whole", "index_dtype"]

# Deeper trees stay with the Python loop: the node arrays are sized for a full tree.
MAX_WHOLE_DEPTH = 24
# The workspace's six row arrays hold row numbers and slots: as int32 they take half the
# memory of intp (the largest per-row state of a boosting round: 37 MiB, not 73, on 1.6 M
# rows). A tree of more rows than int32 counts takes intp (a kernel compiled at first use).
INDEX_DTYPE = np.int32
_ROW_ARRAYS = ("rows", "slots", "new_rows", "new_slots", "small_rows", "small_pairs")


# The row arrays' type in the kernels' signatures: int32, or intp past int32's rows.
RowIndex = NDArray[np.signedinteger[Any]]


def index_dtype(n_rows: int) -> type[np.signedinteger[Any]]:
    """The dtype of the workspace's row arrays for a tree of ``n_rows`` rows."""
    return INDEX_DTYPE if n_rows <= np.iinfo(INDEX_DTYPE).max else np.intp


def grows_whole(growth: Growth) -> bool:
    """Whether :func:`grow_whole` grows this tree (else the Python level loop does).

    A level-wise second-order tree on dense histograms of narrow codes, every node searching
    every feature of the tree, with a depth limit, no monotone bounds and its histograms built
    here.
    """
    ctx, limits = growth.ctx, growth.limits
    return (
        compiled_kernels()
        and isinstance(ctx.criterion, Newton)
        and limits.max_leaf_nodes is None
        and limits.max_depth is not None
        and limits.max_depth <= MAX_WHOLE_DEPTH
        and ctx.binned.dtype == NARROW_CODE_DTYPE
        and ctx.channels.shape[1] == 2
        and growth.monotone is None
        and ctx.remote_histograms is None
        and growth.uses_histograms()
        and growth.features.level_size >= growth.features.candidates.size
    )


class TreeWorkspace:
    """The arrays one fit's whole-tree calls reuse: histograms, row partitions, node arrays.

    Sized at the first tree for the largest tree the fit can grow (every row, the depth
    limit) and grown again only if a later tree needs more, as LightGBM allocates its
    histogram pool and data partition once in ``SerialTreeLearner::Init``.
    """

    def __init__(self) -> None:
        self._key: tuple[int, int, int] = (-1, -1, -1)
        self.arrays: dict[str, NDArray[Any]] = {}

    def reserve(self, n_rows: int, n_features: int, max_depth: int) -> dict[str, NDArray[Any]]:
        """The arrays for a tree of ``n_rows`` rows, ``n_features`` histogram columns and
        depth at most ``max_depth``."""
        rows_held, features_held, depth_held = self._key
        if n_rows <= rows_held and n_features == features_held and max_depth <= depth_held:
            return self.arrays
        n_rows = max(n_rows, rows_held)
        self._key = (n_rows, n_features, max_depth)
        n_nodes = min(2 ** (max_depth + 1) - 1, 2 * n_rows - 1)
        # The widest level whose histograms are kept: 2·pairs·features·codes cells within
        # the grower's bounds, and children of depth below max_depth.
        cells_per_node = n_features * HISTOGRAM_CODES
        by_cells = min(HISTOGRAM_MAX_CELLS, HISTOGRAM_CELLS_PER_ROW * n_rows) // cells_per_node
        width = max(1, min(2 * HISTOGRAM_MAX_SPLITS, by_cells, 2 ** (max_depth - 1)))
        shape = (n_features, HISTOGRAM_CODES, 3)
        # The old arrays go before the new ones come (a larger tree's would sit beside them).
        self.arrays = {}
        self.arrays = {
            "histograms": np.empty((width, *shape), dtype=HISTOGRAM_DTYPE),
            "siblings": np.empty((width, *shape), dtype=HISTOGRAM_DTYPE),
            "small": np.empty((max(1, width // 2), *shape), dtype=HISTOGRAM_DTYPE),
            **{name: np.empty(n_rows, dtype=index_dtype(n_rows)) for name in _ROW_ARRAYS},
            "node_totals": np.empty((n_nodes, 2)),
            "node_counts": np.empty(n_nodes, dtype=np.int64),
            "node_depth": np.empty(n_nodes, dtype=np.int64),
            "node_feature": np.empty(n_nodes, dtype=np.int64),
            "node_bin": np.empty(n_nodes, dtype=np.int64),
            "node_missing_left": np.empty(n_nodes, dtype=np.bool_),
            "node_left": np.empty(n_nodes, dtype=np.int64),
            "node_bitsets": np.empty((n_nodes, BITSET_BYTES), dtype=np.uint8),
        }
        return self.arrays


# A step goes to the threads when it holds at least PARALLEL_MIN_WORK histogram adds (one row
# of one feature): a wake of Numba's pool costs ~85 us here at load 9 (thread_kernels), so
# smaller steps lose more to the wake than they gain. Scanning a histogram bin costs about
# _BIN_ADDS adds; moving a row to its child about _PARTITION_ADDS, one wake of the pool a
# level (thread_kernels.partition_threads). At 4, the partitions of an 80k-row fit stay on
# the calling thread: put on the threads (at 8) they took that thread 0.11 s less CPU and
# the pool's two 0.36-0.48 s more (binary 80k x 40, 100 trees depth 6, load 8-9).
# PARALLEL_MIN_WORK is 512k since the serial kernels got faster (ordered gradients, four
# features a pass): on a quiet machine a binary 80k x 40, 100-tree fit on two threads took 1.82 s at 128k, 1.61 s at 512k, 1.63 s at 2M and 1.64 s
# with no step on the threads (medians of 3, the same model each time).
# On oneTBB's pool (engine._kernels), whose wakes cost far less, 128k pays again: binary two
# threads 1.31 / 1.35 s at 512k, 1.24 at 256k, 1.20 / 1.22 at 128k, 1.17 / 1.27 at 64k,
# 1.21 at 32k; five classes 40k x 30 flat (1.59-1.62 s at every value); medians of 3, quiet
# machine, the same model each time (/tmp probe at stop 33, interleaved by round).
# Read at each call (tests lower it to put every step on the threads).
PARALLEL_MIN_WORK = 128_000
# On Numba's workqueue pool (where oneTBB does not install) a step must be this many times
# larger to repay its wakes: 512k, as measured above.
WORKQUEUE_WORK_FACTOR = 4


def _min_work() -> int:
    # Called once the pool is launched (inside parallel_kernel_threads).
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run in this process yet
        return PARALLEL_MIN_WORK
    return PARALLEL_MIN_WORK * (WORKQUEUE_WORK_FACTOR if layer == "workqueue" else 1)


_BIN_ADDS = 4
_PARTITION_ADDS = 4


@inline_kernel
def _parts(n_threads: int, work: int, min_work: int) -> int:
    # Threads for a step of `work` adds: one below the size where waking them costs more
    # than they save.
    return n_threads if work >= min_work else 1


@inline_kernel
def _smaller_runs(
    rows: RowIndex,
    child_counts: NDArray[np.int64],
    smaller_side: NDArray[np.intp],
    small_rows: RowIndex,
    small_pairs: RowIndex,
) -> int:
    # _smaller_children_compiled's rows and pairs (each pair's smaller child, the left on a
    # tie, its rows in order), copied run by run: the partition left each child's rows as
    # one run of ``rows``, children in order, so no row's slot needs reading.
    n_small = start = 0
    for pair in range(smaller_side.size):
        n_left, n_right = child_counts[2 * pair], child_counts[2 * pair + 1]
        side = 1 if n_right < n_left else 0
        smaller_side[pair] = side
        first = start + (n_left if side else 0)
        size = n_right if side else n_left
        small_rows[n_small : n_small + size] = rows[first : first + size]
        small_pairs[n_small : n_small + size] = pair
        n_small += size
        start += n_left + n_right
    return n_small


@parallel_kernel
def _grow_compiled(
    columns: NDArray[Any],
    channels: NDArray[np.float64],
    candidates: NDArray[np.int64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    missing_code: int,
    limits: NDArray[np.float64],
    n_threads: int,
    min_work: int,
    histograms: NDArray[np.float64],
    siblings: NDArray[np.float64],
    small: NDArray[np.float64],
    rows: RowIndex,
    slots: RowIndex,
    new_rows: RowIndex,
    new_slots: RowIndex,
    small_rows: RowIndex,
    small_pairs: RowIndex,
    leaves: NDArray[np.intp],
    node_totals: NDArray[np.float64],
    node_counts: NDArray[np.int64],
    node_depth: NDArray[np.int64],
    node_feature: NDArray[np.int64],
    node_bin: NDArray[np.int64],
    node_missing_left: NDArray[np.bool_],
    node_left: NDArray[np.int64],
    node_bitsets: NDArray[np.uint8],
) -> int:
    """Grow one tree level by level as :func:`engine.tree.grow.grower._grow_level_wise`
    does on histograms; return its number of nodes.

    Node ``i``'s totals, row count and depth, and for a split node its feature, bin, missing
    direction, left child and (categorical) bitset, are written to the ``node_*`` arrays;
    ``leaves[r]`` takes row ``r``'s leaf. ``limits`` = (max depth, min_samples_split,
    min_samples_leaf, min_weight_leaf, min_split_gain).
    """
    n_rows = channels.shape[0]
    n_features = candidates.size
    n_codes = missing_code + 1
    max_depth = int(limits[0])
    min_samples_split, min_samples_leaf = limits[1], limits[2]
    min_weight_leaf, min_split_gain = limits[3], limits[4]
    no_classes = np.zeros(0, dtype=np.int64)
    no_weights = np.zeros(0)
    no_monotone = np.zeros(0, dtype=np.int8)
    all_columns = np.arange(n_features)
    for i in range(n_rows):
        rows[i] = i
        slots[i] = 0
    # The root: its totals in row order (node_totals), its histograms from every row.
    # (The workspace's row arrays may be longer than this tree's rows: pass the tree's.)
    root_rows, root_slots = rows[:n_rows], slots[:n_rows]
    _totals_compiled(root_rows, root_slots, channels, node_totals[0:1], node_counts[0:1])
    histograms_threads(
        _parts(n_threads, n_rows * n_features, min_work),
        columns,
        root_rows,
        root_slots,
        candidates,
        channels,
        no_classes,
        histograms[0:1],
    )
    use_histograms = True
    level_first, n_slots, n_level_rows, depth = 0, 1, n_rows, 0
    while n_slots > 0:
        # Record the level: each row's deepest node so far is its leaf.
        for s in range(n_slots):
            node = level_first + s
            node_depth[node] = depth
            node_feature[node] = -1
            node_bin[node] = 0
            node_missing_left[node] = False
            node_left[node] = -1
        # (Writing each row's leaf once, when its node is not split, would save this pass;
        # tried, the threaded partition then moved wrong rows: Numba's parallel lowering of
        # the row arrays swapped below seems to need this loop's reads. Kept.)
        for i in range(n_level_rows):
            leaves[rows[i]] = level_first + slots[i]
        # Each slot's rows are one run of ``rows`` (the partition keeps them grouped).
        level_start = np.empty(n_slots + 1, dtype=np.intp)
        level_start[0] = 0
        for s in range(n_slots):
            level_start[s + 1] = level_start[s] + node_counts[level_first + s]
        # The nodes still open to splitting (Growth.splittable for a Newton criterion).
        open_slots = np.empty(n_slots, dtype=np.intp)
        n_open = 0
        if max_depth < 0 or depth < max_depth:
            for s in range(n_slots):
                node = level_first + s
                count = node_counts[node]
                if (
                    count >= min_samples_split
                    and count >= 2 * min_samples_leaf
                    and node_totals[node, 1] >= 2 * min_weight_leaf
                ):
                    open_slots[n_open] = s
                    n_open += 1
        if n_open == 0:
            break
        open_slots = open_slots[:n_open]
        features = np.empty((n_open, n_features), dtype=np.int64)
        parents = np.empty((n_open, 2))
        parent_counts = np.empty(n_open)
        for k in range(n_open):
            node = level_first + open_slots[k]
            features[k] = candidates
            parents[k, 0], parents[k, 1] = node_totals[node, 0], node_totals[node, 1]
            parent_counts[k] = float(node_counts[node])
        bounds = np.zeros((n_open, 2))
        found = np.zeros(n_open, dtype=np.bool_)
        gain = np.zeros(n_open)
        split_feature = np.zeros(n_open, dtype=np.int64)
        split_bin = np.zeros(n_open, dtype=np.int64)
        missing_left = np.zeros(n_open, dtype=np.bool_)
        left_codes = np.zeros((n_open, n_codes), dtype=np.bool_)
        # A node's search from histograms costs its features' bins, from rows its rows.
        cost = n_features * (n_open * n_codes * _BIN_ADDS if use_histograms else n_level_rows)
        parts = _parts(n_threads, cost, min_work) if n_open > 1 else 1
        if use_histograms:
            search_histograms_threads(
                parts,
                histograms,
                open_slots,
                all_columns,
                features,
                parents,
                parent_counts,
                settings,
                is_categorical,
                no_monotone,
                bounds,
                missing_code,
                found,
                gain,
                split_feature,
                split_bin,
                missing_left,
                left_codes,
            )
        else:
            # The open nodes' rows, renumbered 0..n_open-1 and still grouped by node.
            renumber = np.full(n_slots, -1, dtype=np.intp)
            for k in range(n_open):
                renumber[open_slots[k]] = k
            node_start = np.zeros(n_open + 1, dtype=np.intp)
            n_batch = 0
            for i in range(n_level_rows):
                k = renumber[slots[i]]
                if k >= 0:
                    small_rows[n_batch] = rows[i]
                    node_start[k + 1] += 1
                    n_batch += 1
            for k in range(n_open):
                node_start[k + 1] += node_start[k]
            search_rows_threads(
                parts,
                columns,
                small_rows[:n_batch],
                node_start,
                features,
                channels,
                no_classes,
                no_weights,
                parents,
                parent_counts,
                settings,
                is_categorical,
                no_monotone,
                bounds,
                missing_code,
                found,
                gain,
                split_feature,
                split_bin,
                missing_left,
                left_codes,
            )
        # Accept the splits that gain more than γ (Growth.accepted) and record them: the
        # k-th accepted split's children are the next level's slots 2k and 2k + 1.
        split_of_slot = np.zeros(n_slots, dtype=np.intp)
        rank_of_slot = np.full(n_slots, -1, dtype=np.intp)
        split_parents = np.empty(n_open, dtype=np.intp)
        n_chosen = 0
        first_child = level_first + n_slots
        for k in range(n_open):
            s = open_slots[k]
            split_of_slot[s] = k
            if not (found[k] and gain[k] > min_split_gain + IMPURITY_EPSILON):
                continue
            rank_of_slot[s] = n_chosen
            split_parents[n_chosen] = s
            node = level_first + s
            feature = split_feature[k]
            node_feature[node] = feature
            node_bin[node] = split_bin[k]
            node_missing_left[node] = missing_left[k]
            node_left[node] = first_child + 2 * n_chosen
            if is_categorical[feature]:
                for b in range(node_bitsets.shape[1]):
                    byte = 0
                    for bit in range(8):
                        if left_codes[k, 8 * b + bit]:
                            byte |= 1 << bit
                    node_bitsets[node, b] = byte
            n_chosen += 1
        if n_chosen == 0:
            break
        n_children = 2 * n_chosen
        n_moved = partition_threads(
            _parts(n_threads, n_level_rows * _PARTITION_ADDS, min_work),
            columns,
            rows,
            level_start,
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            channels,
            new_rows,
            new_slots,
            node_totals[first_child : first_child + n_children],
            node_counts[first_child : first_child + n_children],
            small_rows,
        )
        rows, new_rows = new_rows, rows
        slots, new_slots = new_slots, slots
        level_first, n_slots, n_level_rows = first_child, n_children, n_moved
        depth += 1
        if not use_histograms:
            continue
        n_cells = n_children * n_features * HISTOGRAM_CODES
        if (
            (max_depth >= 0 and depth >= max_depth)
            or n_cells > HISTOGRAM_CELLS_PER_ROW * n_level_rows
            or n_cells > HISTOGRAM_MAX_CELLS
            or n_chosen > HISTOGRAM_MAX_SPLITS
        ):
            use_histograms = False  # leaves next, or rows cheaper than dense histograms
            continue
        smaller_side = np.empty(n_chosen, dtype=np.intp)
        n_small = _smaller_runs(
            rows,
            node_counts[first_child : first_child + n_children],
            smaller_side,
            small_rows,
            small_pairs,
        )
        children_histograms_threads(
            _parts(n_threads, n_small * n_features, min_work),
            columns,
            small_rows[:n_small],
            small_pairs[:n_small],
            candidates,
            channels,
            no_classes,
            small[:n_chosen],
            histograms,
            split_parents[:n_chosen],
            smaller_side,
            siblings,
        )
        histograms, siblings = siblings, histograms
    return level_first + n_slots


def grow_whole(
    growth: Growth,
    leaves: NDArray[np.intp] | None,
    workspace: TreeWorkspace | None,
    n_threads: int | None = None,
) -> Tree:
    """Grow ``growth``'s tree in one compiled call (:func:`grows_whole` must hold), its steps
    shared among ``n_threads`` threads (default: its context's pool; 1 for a tree that grows
    beside others on their own threads)."""
    ctx, limits = growth.ctx, growth.limits
    assert limits.max_depth is not None and isinstance(ctx.criterion, Newton)
    candidates = np.ascontiguousarray(growth.features.candidates, dtype=np.int64)
    n_rows = ctx.binned.shape[0]
    arrays = (workspace or TreeWorkspace()).reserve(n_rows, candidates.size, limits.max_depth)
    settings = np.array(
        [
            limits.max_depth,
            limits.min_samples_split,
            limits.min_samples_leaf,
            limits.min_weight_leaf,
            limits.min_split_gain,
        ],
        dtype=np.float64,
    )
    wanted = pool_size(ctx.threads) if n_threads is None else n_threads
    # The rows' leaves go straight into the caller's array (8 bytes a row not held twice).
    row_leaves: NDArray[np.intp] = (
        leaves
        if leaves is not None and leaves.dtype == np.intp and leaves.flags.c_contiguous
        else np.empty(n_rows, dtype=np.intp)
    )
    arrays = {**arrays, "leaves": row_leaves}
    with parallel_kernel_threads(wanted) as n_threads:
        n_nodes = _grow_compiled(
            growth.columns,
            np.ascontiguousarray(ctx.channels, dtype=np.float64),
            candidates,
            _settings(ctx),
            ctx.is_categorical,
            ctx.missing_code,
            settings,
            n_threads,
            _min_work() if n_threads > 1 else PARALLEL_MIN_WORK,
            *(arrays[name] for name in _WORKSPACE_ORDER),
        )
    if leaves is not None and row_leaves is not leaves:
        leaves[:] = row_leaves
    return _tree(growth, arrays, n_nodes)


_WORKSPACE_ORDER = (
    "histograms",
    "siblings",
    "small",
    "rows",
    "slots",
    "new_rows",
    "new_slots",
    "small_rows",
    "small_pairs",
    "leaves",
    "node_totals",
    "node_counts",
    "node_depth",
    "node_feature",
    "node_bin",
    "node_missing_left",
    "node_left",
    "node_bitsets",
)


def _tree(growth: Growth, arrays: dict[str, NDArray[Any]], n_nodes: int) -> Tree:
    """The grown nodes as a :class:`Tree`: values, impurities and thresholds by the same
    expressions as :class:`Growth` and :class:`~engine.tree.grow.records.NodeRecorder` use,
    elementwise, so the whole tree at once gives each node's value to the bit."""
    ctx = growth.ctx
    criterion = ctx.criterion
    assert isinstance(criterion, Newton)
    totals = arrays["node_totals"][:n_nodes]
    cover = totals[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        impurities = np.where(cover > 0, -score(totals, criterion) / cover, 0.0)
    left = arrays["node_left"][:n_nodes]
    is_split = left >= 0
    feature = arrays["node_feature"][:n_nodes]
    categorical = is_split & ctx.is_categorical[np.where(is_split, feature, 0)]
    last_bin = ctx.missing_code - 1
    numeric_threshold = growth.records.thresholds[
        np.where(is_split, feature, 0), np.minimum(arrays["node_bin"][:n_nodes], last_bin)
    ]
    category_split = np.full(n_nodes, -1, dtype=np.int64)
    category_split[categorical] = np.arange(int(categorical.sum()))
    nodes = np.zeros(n_nodes, dtype=NODE_DTYPE)
    nodes["impurity"] = impurities
    nodes["n_samples"] = arrays["node_counts"][:n_nodes]
    nodes["weighted_n_samples"] = node_weight(totals, criterion)
    nodes["depth"] = arrays["node_depth"][:n_nodes]
    nodes["left_child"] = left
    nodes["right_child"] = np.where(is_split, left + 1, -1)
    nodes["feature"] = feature
    nodes["threshold"] = np.where(is_split, np.where(categorical, np.nan, numeric_threshold), 0.0)
    nodes["missing_left"] = arrays["node_missing_left"][:n_nodes]
    nodes["category_split"] = category_split
    bitsets = arrays["node_bitsets"][:n_nodes][categorical].copy()
    values = criterion.leaf_weight(totals)[:, None]
    return Tree(nodes, values, bitsets, ctx.binned.shape[1])
