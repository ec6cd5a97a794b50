"""Exact path-dependent TreeSHAP for the engine's trees and tree ensembles.

The explained game is Lundberg, Erion & Lee (2018, "Consistent individualized feature
attribution for tree ensembles"): the value of a coalition ``S`` of features is the tree's
output with the features of ``S`` fixed to the row's values and the others integrated out
along the tree, each split on a feature outside ``S`` sending the row to both children in
proportion to their training cover (``weighted_n_samples``). The attributions are the exact
Shapley values of that game, the numbers Algorithm 2 (EXTEND/UNWIND) of the paper computes.

How it is vectorised
--------------------
Every leaf contributes an independent product game. Along the root-to-leaf path, let the
``D`` distinct features split on be the leaf's *slots*; slot ``j`` has a zero fraction ``z_j``
(the product of the cover ratios of its splits) and, per row, a one fraction ``o_j`` ∈ {0, 1}
(whether the row follows the path at every split on that feature). The leaf adds
``v · Π_{j∈S} o_j · Π_{j∉S} z_j`` to the value of ``S``; its Shapley value for slot ``i`` is::

    v · (o_i − z_i) · Σ_k c_k [t^k] Π_{j≠i} (z_j + o_j t)        c_k = k! (D−1−k)! / D!
  = v · (o_i − z_i) · ∫_0^1 Π_{j≠i} (z_j (1−u) + o_j u) du     (c_k = ∫ u^k (1−u)^(D−1−k) du)

All leaves of a tree and all rows are handled together, in arrays of shape
``(n_leaves, n_slots, n_rows)``. Two kernels evaluate the sum:

- the *polynomial* kernel (the reference) is Algorithm 2 reorganised: EXTEND builds the
  coefficients of ``P(t) = Π_j (z_j + o_j t)`` slot by slot, and UNWIND followed by the
  weighted sum is one dot product of ``P`` with a vector that depends on the tree only;
- the *quadrature* kernel (the default) integrates the degree ``D − 1`` polynomial exactly
  with ``⌈D/2⌉`` Gauss–Legendre nodes. Because ``o_j`` is 0 or 1, ``log Π_j g_j(u_q)`` is a
  constant plus a matrix product of the ``o`` with a tree-only matrix, so the whole kernel
  is three batched matrix products and an ``exp`` — no Python loop over slots.

When a leaf has fewer one-fraction patterns (``2^D``) than there are rows, the terms of every
pattern are tabulated once and each row looks its pattern up (:func:`_pattern_table`). Leaves
are processed in groups of similar ``D`` so short paths are not padded to the longest one.
The arithmetic is Algorithm 2's O(L·D²) per tree and row, done in a few dozen NumPy calls.

Explaining a model
------------------
:func:`tree_contributions` explains any model that :func:`explained_trees` can describe as
``base + Σ_t weight_t · tree_t(x)``. Single trees and forests / extra trees / bagging of trees
are registered below; other model families (boosting: ``base = init_``, every weight the
learning rate) register their own description with ``@explained_trees.register(TheirClass)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.base import check_is_fitted
from engine.ensemble._tree_ensemble import BaseTreeEnsemble
from engine.tree._classes import BaseDecisionTree
from engine.tree._tree import Tree

__all__ = [
    "ExplainedTrees",
    "explained_trees",
    "tree_contributions",
    "tree_expected_value",
    "tree_shap",
]

# Bound on the (leaves × slots × rows) elements of one working array: rows are explained in
# chunks of about 8 MB per array (measured faster than 32 MB chunks: fewer cache misses and
# page faults on the temporaries).
CHUNK_ELEMENTS = 1 << 20
# Largest pattern table (leaves × slots × patterns) built for one group of leaves.
TABLE_ELEMENTS = 1 << 22
# Leaves are processed in groups whose numbers of distinct path features differ by less
# than this (see _leaf_groups).
SLOT_GROUP = 4

# Slot terms (n_leaves, n_slots, m) from one fractions (n_leaves or 1, n_slots, m).
_Terms = Callable[[NDArray[np.bool_]], NDArray[np.float64]]
# Adds one group's SHAP values for a chunk of rows: (goes_left, phi rows) -> None.
_GroupKernel = Callable[[NDArray[np.bool_], NDArray[np.float64]], None]


# -- paths ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LeafPaths:
    """Root-to-leaf paths of a group of leaves, padded to common lengths (tree only).

    ``n_splits`` is the longest path and ``n_slots`` the most distinct features on one.
    Padding splits point at an extra slot ``n_slots`` that is dropped; padding slots have
    ``z = 1``, ``o = 0`` and no weight, so they change nothing.
    """

    values: NDArray[np.float64]  # (n_leaves, n_outputs)
    split_node: NDArray[np.intp]  # (n_leaves, n_splits) ancestors, root first
    split_left: NDArray[np.bool_]  # (n_leaves, n_splits) whether the path goes left there
    split_slot: NDArray[np.intp]  # (n_leaves, n_splits)
    slot_used: NDArray[np.bool_]  # (n_leaves, n_slots)
    slot_zero: NDArray[np.float64]  # (n_leaves, n_slots) zero fractions z
    # Flattened (leaf, slot) entries in use, sorted by feature, and where each feature starts.
    scatter_order: NDArray[np.intp]
    scatter_starts: NDArray[np.intp]
    scatter_features: NDArray[np.intp]

    @property
    def n_slots(self) -> int:
        return int(self.slot_zero.shape[1])

    @property
    def n_leaves(self) -> int:
        return int(self.slot_zero.shape[0])

    def expected_value(self) -> NDArray[np.float64]:
        """Cover-weighted sum of the group's leaf values, shape (n_outputs,)."""
        return np.prod(self.slot_zero, axis=1) @ self.values


def _root_to_leaf_paths(tree: Tree) -> tuple[list[int], list[list[tuple[int, bool]]]]:
    """Every leaf with the ``(node, goes_left)`` splits on its path, in depth-first order."""
    left = tree.nodes["left_child"]
    leaves: list[int] = []
    paths: list[list[tuple[int, bool]]] = []
    stack: list[tuple[int, list[tuple[int, bool]]]] = [(0, [])]
    while stack:
        node, path = stack.pop()
        if left[node] < 0:
            leaves.append(node)
            paths.append(path)
            continue
        stack.append((int(left[node]) + 1, [*path, (node, False)]))
        stack.append((int(left[node]), [*path, (node, True)]))
    return leaves, paths


def _leaf_groups(tree: Tree) -> list[_LeafPaths]:
    """The tree's leaves in groups of similar path length (``SLOT_GROUP`` slots wide).

    Padding every path to the longest one would cost up to ``(max_slots / slots)²`` times
    the work on the short paths of deep trees; a handful of groups bounds that waste.
    """
    feature = tree.nodes["feature"]
    leaves, paths = _root_to_leaf_paths(tree)
    slot_lists = [list(dict.fromkeys(int(feature[node]) for node, _ in path)) for path in paths]
    groups: dict[int, list[int]] = {}
    for leaf, slots in enumerate(slot_lists):
        groups.setdefault((len(slots) - 1) // SLOT_GROUP, []).append(leaf)
    return [
        _leaf_paths(
            tree,
            [leaves[i] for i in members],
            [paths[i] for i in members],
            [slot_lists[i] for i in members],
        )
        for _, members in sorted(groups.items())
    ]


def _leaf_paths(
    tree: Tree,
    leaves: list[int],
    paths: list[list[tuple[int, bool]]],
    slot_lists: list[list[int]],
) -> _LeafPaths:
    """Pad the given leaves' paths into arrays and fold cover ratios into zero fractions."""
    nodes = tree.nodes
    cover = nodes["weighted_n_samples"].astype(np.float64)
    children = nodes["left_child"].astype(np.intp)
    feature = nodes["feature"].astype(np.intp)
    n_leaves, n_splits = len(leaves), max(len(path) for path in paths)
    split_node = np.zeros((n_leaves, n_splits), dtype=np.intp)
    split_left = np.zeros((n_leaves, n_splits), dtype=bool)
    for leaf, path in enumerate(paths):
        for k, (node, goes_left) in enumerate(path):
            split_node[leaf, k] = node
            split_left[leaf, k] = goes_left
    n_slots = max(len(slots) for slots in slot_lists)
    is_split = np.arange(n_splits)[None, :] < np.array([len(p) for p in paths])[:, None]
    child = children[split_node] + ~split_left
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = cover[child] / cover[split_node]
    split_ratio = np.where(is_split, np.nan_to_num(ratio, nan=0.0, posinf=0.0), 1.0)

    slot_feature = np.zeros((n_leaves, n_slots), dtype=np.intp)
    slot_used = np.zeros((n_leaves, n_slots), dtype=bool)
    split_slot = np.full((n_leaves, n_splits), n_slots, dtype=np.intp)
    for leaf, slots in enumerate(slot_lists):
        slot_feature[leaf, : len(slots)] = slots
        slot_used[leaf, : len(slots)] = True
        position = {f: i for i, f in enumerate(slots)}
        split_slot[leaf, : len(paths[leaf])] = [position[int(feature[n])] for n, _ in paths[leaf]]
    slot_zero = np.ones((n_leaves, n_slots + 1))
    np.multiply.at(slot_zero, (np.arange(n_leaves)[:, None], split_slot), split_ratio)
    slot_zero = slot_zero[:, :n_slots]

    used = np.flatnonzero(slot_used.ravel())
    order = used[np.argsort(slot_feature.ravel()[used], kind="stable")]
    features = slot_feature.ravel()[order]
    starts = np.flatnonzero(np.r_[True, features[1:] != features[:-1]])
    return _LeafPaths(
        values=tree.values[np.asarray(leaves, dtype=np.intp)].astype(np.float64),
        split_node=split_node,
        split_left=split_left,
        split_slot=split_slot,
        slot_used=slot_used,
        slot_zero=slot_zero,
        scatter_order=order,
        scatter_starts=starts,
        scatter_features=features[starts],
    )


def _goes_left(tree: Tree, X: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Whether each row goes left at each node, shape (n_nodes, n_samples).

    Mirrors :meth:`Tree.apply` (threshold, missing values, category bitsets) for every
    internal node at once; the rows of leaves are meaningless.
    """
    nodes = tree.nodes
    feature = np.maximum(nodes["feature"], 0).astype(np.intp)
    values = X[:, feature].T
    goes_left = values <= nodes["threshold"][:, None]
    missing = np.isnan(values)
    if missing.any():
        missing_left = np.broadcast_to(nodes["missing_left"].astype(bool)[:, None], values.shape)
        goes_left[missing] = missing_left[missing]
    split = nodes["category_split"]
    for node in np.flatnonzero((split >= 0) & (nodes["left_child"] >= 0)):
        codes = values[node]
        known = ~np.isnan(codes)
        code = np.where(known, codes, 0).astype(np.intp)
        bits = tree.category_bitsets[split[node], code >> 3]
        in_left = ((bits >> (code & 7)) & 1).astype(bool)
        goes_left[node] = np.where(known, in_left, bool(nodes["missing_left"][node]))
    return goes_left


def _follows(paths: _LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Whether each row takes the path's direction at each split, (n_leaves, n_splits, n)."""
    return goes_left[paths.split_node] == paths.split_left[:, :, None]


def _row_ones(paths: _LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """One fractions ``o`` per (leaf, slot, row): the row follows every split of the slot."""
    follows = _follows(paths, goes_left)
    one = np.ones((paths.n_leaves, paths.n_slots + 1, goes_left.shape[1]), dtype=bool)
    leaf = np.arange(paths.n_leaves)
    for k in range(paths.split_node.shape[1]):
        one[leaf, paths.split_slot[:, k]] &= follows[:, k]
    return one[:, : paths.n_slots] & paths.slot_used[:, :, None]


def _row_codes(paths: _LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.int64]:
    """The one fractions of each (leaf, row) as a bit pattern (bit s: slot s), (n_leaves, n)."""
    follows = _follows(paths, goes_left)
    missed = np.zeros((paths.n_leaves, goes_left.shape[1]), dtype=np.int64)
    for k in range(paths.split_node.shape[1]):
        missed |= (~follows[:, k]).astype(np.int64) << paths.split_slot[:, k, None]
    bit = np.int64(1) << np.arange(paths.n_slots, dtype=np.int64)
    in_use = (paths.slot_used * bit).sum(axis=1)
    return in_use[:, None] & ~missed


# -- kernels: slot terms (o_i − z_i) · Σ_k c_k [t^k] Π_{j≠i} (z_j + o_j t) ----------------


def _shapley_weights(n_players: NDArray[np.intp], width: int) -> NDArray[np.float64]:
    """``c_k = k! (D−1−k)! / D!`` for each leaf's ``D`` players, shape (n_leaves, width).

    ``c_k`` weighs coalitions of ``k`` other players; entries with ``k ≥ D`` are 0.
    """
    table = np.zeros((width, width))
    for d in range(1, width):
        table[d, :d] = [1.0 / (d * math.comb(d - 1, k)) for k in range(d)]
    return table[n_players]


def _polynomial_terms(paths: _LeafPaths) -> _Terms:
    """The reference kernel: Algorithm 2's EXTEND and UNWIND on coefficient arrays.

    For ``o_i = 0`` UNWIND divides ``P`` by the constant ``z_i``, so the weighted sum is
    ``(c · P) / z_i`` (when ``z_i = 0`` too the leaf is out of reach with or without the
    feature and the term, a multiple of ``o_i − z_i``, is 0). For ``o_i = 1`` synthetic
    division gives ``q_j = Σ_{m>j} P_m (−z_i)^{m−1−j}``, so the sum is ``a · P`` with
    ``a_0 = 0`` and ``a_{m+1} = −z_i a_m + c_m``.
    """
    zero, used = paths.slot_zero, paths.slot_used
    n_leaves, n_slots = zero.shape
    shapley = _shapley_weights(used.sum(axis=1), n_slots + 1)
    reachable = used & (zero > 0)
    inverse_zero = np.where(reachable, 1.0 / np.where(reachable, zero, 1.0), 0.0)
    unwind_on = np.zeros((n_leaves, n_slots, n_slots + 1))
    for m in range(n_slots):
        unwind_on[:, :, m + 1] = -zero * unwind_on[:, :, m] + shapley[:, None, m]
    unwind_on[~used] = 0.0

    def terms(one: NDArray[np.bool_]) -> NDArray[np.float64]:
        poly = np.zeros((n_leaves, n_slots + 1, one.shape[2]))
        poly[:, 0] = 1.0
        for s in range(n_slots):  # EXTEND: P(t) ← P(t) · (z + o t)
            head = poly[:, : s + 2]
            shifted = head[:, :-1] * one[:, s, None, :]
            head *= zero[:, s, None, None]
            head[:, 1:] += shifted
        off = (shapley[:, None, :] @ poly) * inverse_zero[:, :, None]
        summed = np.where(one, unwind_on @ poly, off)
        return (one - zero[:, :, None]) * summed

    return terms


def _quadrature_terms(paths: _LeafPaths) -> _Terms:
    """The default kernel: ``∫_0^1 Π_{j≠i} g_j(u) du`` by Gauss–Legendre quadrature.

    ``g_j(u) = z_j (1−u) + o_j u`` takes one of two values at each node ``u_q``; with
    ``G_q = Π_j g_j(u_q) = exp(Σ_j log g_j^off(u_q) + Σ_j o_j log(g_j^on / g_j^off)(u_q))``
    the term of slot ``i`` is ``Σ_q w_q G_q / g_i(u_q)``. A slot with ``z = 0`` has
    ``g^off = 0``: rows with ``o = 0`` there never reach the leaf (their ``G`` is set to 0)
    and its ``log g^off`` is left out of the sum.
    """
    zero, used = paths.slot_zero[:, :, None], paths.slot_used[:, :, None]
    nodes, node_weights = np.polynomial.legendre.leggauss(max(1, (paths.n_slots + 1) // 2))
    u, w = (nodes + 1.0) / 2.0, node_weights / 2.0
    g_off = np.where(used, zero * (1.0 - u), 1.0)  # (n_leaves, n_slots, n_nodes)
    g_on = np.where(used, zero * (1.0 - u) + u, 1.0)
    alive = g_off > 0
    log_off = np.log(np.where(alive, g_off, 1.0))
    log_gain = (np.log(g_on) - log_off).transpose(0, 2, 1).copy()
    log_base = log_off.sum(axis=1)[:, :, None]
    # The factor o_i − z_i is folded into the weights: 1 − z_i for o_i = 1, −z_i for o_i = 0.
    weight_on = np.where(used, (1.0 - zero) * w / g_on, 0.0)
    weight_off = np.where(used & alive, -zero * w / np.where(alive, g_off, 1.0), 0.0)
    dead = paths.slot_used & (paths.slot_zero <= 0)
    any_dead = bool(dead.any())

    def terms(one: NDArray[np.bool_]) -> NDArray[np.float64]:
        product = np.exp(log_gain @ one.astype(np.float64) + log_base)
        if any_dead:
            unreachable: NDArray[np.bool_] = np.any(dead[:, :, None] & ~one, axis=1)
            product *= ~unreachable[:, None, :]
        return np.where(one, weight_on @ product, weight_off @ product)

    return terms


def _pattern_table(paths: _LeafPaths, terms: _Terms) -> NDArray[np.float64]:
    """Slot terms of every one-fraction pattern, (n_leaves, n_slots, 2**n_slots)."""
    patterns = np.arange(2**paths.n_slots)
    one = ((patterns[None, :] >> np.arange(paths.n_slots)[:, None]) & 1).astype(bool)
    return terms(one[None])


def _scatter_rows(paths: _LeafPaths, terms: NDArray[np.float64], phi: NDArray[np.float64]) -> None:
    """Add slot terms (n_leaves, n_slots, n) times the leaf values into ``phi`` by feature."""
    flat = terms.reshape(-1, terms.shape[2])[paths.scatter_order]
    leaf = paths.scatter_order // paths.n_slots
    for output in range(paths.values.shape[1]):
        weighted = flat * paths.values[leaf, output, None]
        grouped = np.add.reduceat(weighted, paths.scatter_starts, axis=0)
        phi[:, paths.scatter_features, output] += grouped.T


def _use_pattern_table(paths: _LeafPaths, n_samples: int) -> bool:
    """Tabulate patterns when there are fewer of them than rows and the table is small."""
    n_patterns = 2**paths.n_slots
    table_size = paths.n_leaves * (paths.n_slots + 1) * n_patterns
    return n_patterns <= n_samples and table_size <= TABLE_ELEMENTS


def _group_kernel(
    paths: _LeafPaths, n_samples: int, use_table: bool | None, reference: bool
) -> _GroupKernel:
    """A function adding one group's SHAP values for a chunk of rows into ``phi``.

    It takes the chunk's ``_goes_left`` (n_nodes, n) and its slice of ``phi`` (n,
    n_features, n_outputs). ``use_table`` forces (True) or forbids (False) the pattern
    table; by default it is used when it saves work. ``reference`` selects the polynomial
    kernel, which the tests hold equal to the quadrature kernel and to brute force.
    """
    terms = _polynomial_terms(paths) if reference else _quadrature_terms(paths)
    if use_table is None:
        use_table = _use_pattern_table(paths, n_samples)
    if not use_table:
        return lambda goes_left, phi: _scatter_rows(paths, terms(_row_ones(paths, goes_left)), phi)
    # Table rows in scatter order, one copy per output with the leaf value folded in.
    n_patterns = 2**paths.n_slots
    entry_leaf = paths.scatter_order // paths.n_slots
    table = _pattern_table(paths, terms).reshape(-1, n_patterns)[paths.scatter_order]
    weighted = [
        (table * paths.values[entry_leaf, output, None]).ravel()
        for output in range(paths.values.shape[1])
    ]
    entry_offset = (np.arange(entry_leaf.size, dtype=np.int64) * n_patterns)[:, None]

    def add(goes_left: NDArray[np.bool_], phi: NDArray[np.float64]) -> None:
        codes = _row_codes(paths, goes_left)[entry_leaf] + entry_offset
        for output, output_table in enumerate(weighted):
            grouped = np.add.reduceat(output_table.take(codes), paths.scatter_starts, axis=0)
            phi[:, paths.scatter_features, output] += grouped.T

    return add


# -- one tree ---------------------------------------------------------------------------


def _explain_tree(
    tree: Tree,
    X: NDArray[np.float64],
    use_table: bool | None = None,
    reference: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """SHAP values (n_samples, n_features, n_outputs) and expected value (n_outputs,)."""
    n_samples, n_outputs = X.shape[0], tree.values.shape[1]
    phi = np.zeros((n_samples, tree.n_features, n_outputs))
    if tree.nodes["left_child"][0] < 0:
        return phi, tree.values[0].astype(np.float64)
    groups = _leaf_groups(tree)
    kernels = [_group_kernel(paths, n_samples, use_table, reference) for paths in groups]
    per_row = max(paths.n_leaves * (paths.n_slots + 1) for paths in groups) * max(2, n_outputs)
    chunk = max(1, CHUNK_ELEMENTS // per_row)
    for start in range(0, n_samples, chunk):
        rows = slice(start, start + chunk)
        goes_left = _goes_left(tree, X[rows])
        for kernel in kernels:
            kernel(goes_left, phi[rows])
    return phi, np.sum([paths.expected_value() for paths in groups], axis=0)


def tree_expected_value(tree: Tree) -> NDArray[np.float64]:
    """The tree's output with no feature known, shape (n_outputs,).

    The cover-weighted mean of the leaf values: every split sends the row to both children
    in proportion to their ``weighted_n_samples``.
    """
    if tree.nodes["left_child"][0] < 0:
        return tree.values[0].astype(np.float64)
    return np.sum([paths.expected_value() for paths in _leaf_groups(tree)], axis=0)


def tree_shap(tree: Tree, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Exact path-dependent TreeSHAP values of one tree.

    Parameters
    ----------
    tree : Tree
    X : ndarray of float64, shape (n_samples, n_features)
        Encoded as for :meth:`Tree.apply` (categorical columns as category codes, NaN for
        missing or unseen categories).

    Returns
    -------
    ndarray of float64, shape (n_samples, n_features, n_outputs)
        Contribution of each feature to each output; for every row they add up to
        ``tree.predict(X) - tree_expected_value(tree)``. Features the tree never splits on
        get exactly 0.
    """
    return _explain_tree(tree, np.asarray(X, dtype=np.float64))[0]


# -- models -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExplainedTrees:
    """A model's explained output written as ``base + Σ_t weights[t] · trees[t](x)``.

    Attributes
    ----------
    trees : sequence of Tree
    weights : ndarray of float64, shape (n_trees,)
    base : ndarray of float64, shape (n_outputs,)
        Added to the bias (boosting: ``init_``; bagged trees: 0).
    prepare : callable
        Validates raw ``X`` and encodes it as the trees expect (the model's ``_prepare``).
    output : int or None
        The output column explained, squeezed away (regression: 0; binary classification:
        1, the positive class), or None to explain every output (multiclass).
    tree_outputs : sequence of int or None
        For single-output trees that each feed one output column (one tree per class and
        iteration, as multiclass boosting grows them): that column per tree. None when every
        tree predicts all ``n_outputs`` columns.
    """

    trees: Sequence[Tree]
    weights: NDArray[np.float64]
    base: NDArray[np.float64]
    prepare: Callable[[Any], NDArray[np.float64]]
    output: int | None
    tree_outputs: Sequence[int] | None = None


@functools.singledispatch
def explained_trees(model: Any) -> ExplainedTrees:
    """Describe ``model`` as a weighted sum of trees (the extension point for new models).

    Register a model family with ``@explained_trees.register(TheirClass)``; dispatch follows
    the class hierarchy, so a subclass registration overrides a base-class one.
    """
    raise TypeError(f"TreeSHAP does not know how to explain {type(model).__name__}.")


def _explained_output(model: Any) -> int | None:
    """Binary classifiers explain the positive class; regressors their only output."""
    if not hasattr(model, "classes_"):
        return 0
    return 1 if len(model.classes_) == 2 else None


@explained_trees.register
def _explain_single_tree(model: BaseDecisionTree) -> ExplainedTrees:
    check_is_fitted(model, "tree_")
    tree = model.tree_
    return ExplainedTrees(
        trees=[tree],
        weights=np.ones(1),
        base=np.zeros(tree.values.shape[1]),
        prepare=model._prepare,
        output=_explained_output(model),
    )


@explained_trees.register
def _explain_tree_ensemble(model: BaseTreeEnsemble) -> ExplainedTrees:
    # Hard voting averages one-hot votes, a non-additive function of the leaf values.
    if getattr(model, "_classification", False) and model._hard_voting:
        raise ValueError("TreeSHAP cannot explain hard voting; use voting='soft'.")
    trees = model.trees_  # raises AttributeError for bagging of non-tree estimators
    n_outputs = trees[0].values.shape[1]
    return ExplainedTrees(
        trees=trees,
        weights=np.full(len(trees), 1.0 / len(trees)),
        base=np.zeros(n_outputs),
        prepare=model._prepare,
        output=_explained_output(model),
    )


def tree_contributions(model: Any, X: Any) -> tuple[NDArray[np.float64], Any]:
    """Exact path-dependent TreeSHAP contributions of a fitted tree model.

    Parameters
    ----------
    model : fitted DecisionTree*, RandomForest*, ExtraTrees*, Bagging* of trees (soft
        voting), or any model registered with :func:`explained_trees` (the boosted models
        register in ``engine.boosting._explain``: gradient boosting, XGBoost and AdaBoost
        over decision trees, explaining ``decision_function``).
    X : array-like of shape (n_samples, n_features)
        Raw features, as given to ``predict``.

    Returns
    -------
    contributions : ndarray of float64
        ``(n_samples, n_features)`` for regression (explaining ``predict``) and binary
        classification (explaining ``predict_proba(X)[:, 1]``: the engine's classifiers
        average class probabilities, so the positive-class probability is the raw score);
        ``(n_samples, n_features, n_classes)`` for multiclass (explaining ``predict_proba``).
    bias : float or ndarray of float64 of shape (n_classes,)
        The expected output (cover-weighted over each tree): ``contributions.sum(axis=1) +
        bias`` equals the explained output.
    """
    described = explained_trees(model)
    X_encoded = described.prepare(X)
    n_outputs = described.base.shape[0]
    phi = np.zeros((X_encoded.shape[0], X_encoded.shape[1], n_outputs))
    bias = described.base.astype(np.float64).copy()
    for t, (tree, weight) in enumerate(zip(described.trees, described.weights, strict=True)):
        columns = slice(None) if described.tree_outputs is None else [described.tree_outputs[t]]
        tree_phi, expected = _explain_tree(tree, X_encoded)
        phi[:, :, columns] += weight * tree_phi
        bias[columns] += weight * expected
    if described.output is None:
        return phi, bias
    return phi[:, :, described.output], float(bias[described.output])
