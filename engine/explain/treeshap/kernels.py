"""Numba kernels of exact path-dependent TreeSHAP over a tree's flat node arrays.

Lundberg et al. (2020, "From local explanations to global understanding with explainable AI
for trees", Algorithm 2) walk the tree once per row, EXTENDing a path of unique features and
UNWINDing it at every leaf: O(L·D²) per tree and row for ``L`` leaves and paths of ``D``
unique features. These kernels compute the same numbers leaf by leaf. On the path to a leaf
of value ``v``, slot ``j`` (the ``j``-th distinct feature) has zero fraction ``z_j``, the
product of the cover ratios of its splits, and for a row the one fraction ``o_j`` ∈ {0, 1},
whether the row follows every split on that feature. The leaf's Shapley value for slot ``i``
is (see :mod:`engine.explain.treeshap.vectorised` for the derivation)::

    v · (o_i − z_i) · ∫_0^1 Π_{j≠i} g_j(u) du,      g_j(u) = z_j (1 − u) + o_j u.

With ``G(u) = Z · (1 − u)^{n_off} · Π_{o_j=1} g_j(u)``, where ``Z`` is the product of the zero
fractions of the slots the row leaves the path at, the integrand is ``G / g_i``: for a slot
the row follows, ``(1 − z_i) ∫ G / (z_i + (1 − z_i) u)``; for any slot it leaves, the same
``−∫ G / (1 − u)`` (``z_i`` cancels). The integrands are polynomials of degree ``D − 1`` with
positive values, so ``⌈D/2⌉``-node Gauss–Legendre quadrature is exact up to rounding and has
no cancellation: about ``D²`` multiplications and additions per leaf and pattern, without
the divisions of UNWIND, laid out so that they vectorise across patterns. A row that leaves
the path at a slot with ``z = 0`` cannot reach the leaf with or without any feature, and
the leaf adds nothing.

A leaf's terms depend on the row only through its pattern ``o``, and rows share patterns:
a 100-tree depth-10 forest's leaves see about 80 distinct patterns among 1,000 rows. Each
leaf therefore evaluates each distinct pattern of a chunk of rows once, and every row adds
its pattern's terms — Yang (2021, "Fast TreeSHAP") tabulates all ``2^D`` patterns of a leaf
in advance; this evaluates only those that occur.

:func:`add_tree_shap` routes a chunk of rows through the tree once (:func:`route_rows`), then
adds each leaf's terms into ``phi``; the tree's paths come flattened from
:mod:`engine.explain.treeshap.layout`. (Kernels that call one another live in this one module: Numba's
on-disk cache of a kernel does not notice an edit to a callee in another file.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel

__all__ = ["FEW_PATTERNS", "SHARED_MAX_SLOTS", "add_tree_shap", "route_rows"]

# Leaves of at most this many slots evaluate each distinct pattern of the chunk's rows once,
# found through a direct-address array of 2^16 entries (512 KiB); longer paths evaluate
# every row (their patterns rarely repeat).
SHARED_MAX_SLOTS = 16
# Leaves with fewer distinct patterns than this evaluate them one by one (see
# _few_pattern_terms): vectorising across so few patterns costs more than it saves.
FEW_PATTERNS = 3


@kernel
def route_rows(
    left_child: NDArray[np.integer[Any]],
    node_column: NDArray[np.intp],
    threshold: NDArray[np.float64],
    missing_left: NDArray[np.uint8],
    category_split: NDArray[np.integer[Any]],
    category_bitsets: NDArray[np.uint8],
    columns: NDArray[np.float64],
    goes_left: NDArray[np.uint8],
) -> None:
    """``goes_left[node, r] = 1`` when row ``r`` goes left at internal ``node``.

    ``columns`` (n_used_features, n_rows) holds the rows' values of the features the tree
    splits on, ``node_column`` each internal node's row of it. Routing is :meth:`Tree.apply`'s:
    ``x <= threshold`` for numeric splits, the category's bit for categorical ones,
    ``missing_left`` for NaN. A category code outside the bitsets (never produced by the
    models' encoders, which map unseen categories to NaN) goes the missing values' way.
    """
    n_rows = columns.shape[1]
    n_codes = category_bitsets.shape[1] * 8
    for node in range(left_child.shape[0]):
        if left_child[node] < 0:
            continue
        values, target = columns[node_column[node]], goes_left[node]
        split, missing = category_split[node], missing_left[node]
        if split < 0:
            cut = threshold[node]
            for r in range(n_rows):  # NaN <= cut is False: NaN goes left only if missing_left
                target[r] = np.uint8(values[r] <= cut) | (np.uint8(np.isnan(values[r])) & missing)
            continue
        for r in range(n_rows):
            value = values[r]
            if -1.0 < value < n_codes:  # NaN fails both comparisons
                code = int(value)
                target[r] = (category_bitsets[split, code >> 3] >> (code & 7)) & 1
            else:
                target[r] = missing


@kernel
def _pattern_terms(
    on: NDArray[np.uint8],
    n_slots: int,
    n_patterns: int,
    slot_zero: NDArray[np.float64],
    first: int,
    quadrature_nodes: NDArray[np.float64],
    quadrature_weights: NDArray[np.float64],
    product: NDArray[np.float64],
    terms: NDArray[np.float64],
) -> None:
    """Slot terms ``(o_i − z_i) ∫ Π_{j≠i} g_j`` of one leaf for each one-fraction pattern.

    ``on[s * n_patterns + p]`` is ``o_s`` of pattern ``p``, and the leaf's ``z`` are
    ``slot_zero[first : first + n_slots]``; row ``n`` of the quadrature tables is the
    ``n``-node Gauss–Legendre rule on [0, 1]. Fills ``terms[s * n_patterns + p]``, using
    ``product`` (⌈n_slots/2⌉ · n_patterns) as scratch. (Flat buffers with offsets rather
    than 2-D views: a view costs reference counting, which showed per leaf on small chunks.)

    Patterns run in the inner loops and ``o`` only selects between two factors, so the loops
    vectorise. ``G(u_q)`` takes the factor ``z_s (1 − u_q)`` for a slot the row leaves, which
    is 0 (so are all terms) when it cannot reach the leaf; the slot's own term then divides it
    by ``z_s (1 − u_q)`` and multiplies by ``−z_s``: the weight ``−1 / (1 − u_q)``.
    """
    n_nodes = (n_slots + 1) // 2
    for q in range(n_nodes):
        u, weight = quadrature_nodes[n_nodes, q], quadrature_weights[n_nodes, q]
        row = q * n_patterns
        for p in range(n_patterns):
            product[row + p] = weight
        for s in range(n_slots):
            g_off = slot_zero[first + s] * (1.0 - u)
            g_on = g_off + u
            bits = s * n_patterns
            for p in range(n_patterns):
                product[row + p] *= g_on if on[bits + p] else g_off
    for s in range(n_slots):
        zero, out = slot_zero[first + s], s * n_patterns
        for p in range(n_patterns):
            terms[out + p] = 0.0
        for q in range(n_nodes):
            u, row = quadrature_nodes[n_nodes, q], q * n_patterns
            weight_on = (1.0 - zero) / (zero * (1.0 - u) + u)
            weight_off = -1.0 / (1.0 - u)
            for p in range(n_patterns):
                terms[out + p] += product[row + p] * (weight_on if on[out + p] else weight_off)


@kernel
def _few_pattern_terms(
    on: NDArray[np.uint8],
    n_slots: int,
    n_patterns: int,
    slot_zero: NDArray[np.float64],
    first: int,
    quadrature_nodes: NDArray[np.float64],
    quadrature_weights: NDArray[np.float64],
    terms: NDArray[np.float64],
) -> None:
    """:func:`_pattern_terms` pattern by pattern, for a handful of patterns.

    With patterns in the inner loops, each of the ~D² inner loops of a lone pattern costs
    its set-up more than its one iteration; here the slots and nodes are the inner loops.
    The arithmetic, and so every bit of the result, is the same.
    """
    n_nodes = (n_slots + 1) // 2
    for p in range(n_patterns):
        for s in range(n_slots):
            terms[s * n_patterns + p] = 0.0
        for q in range(n_nodes):
            u = quadrature_nodes[n_nodes, q]
            product = quadrature_weights[n_nodes, q]
            for s in range(n_slots):
                g_off = slot_zero[first + s] * (1.0 - u)
                product *= g_off + u if on[s * n_patterns + p] else g_off
            for s in range(n_slots):
                zero = slot_zero[first + s]
                weight_on = (1.0 - zero) / (zero * (1.0 - u) + u)
                weight_off = -1.0 / (1.0 - u)
                terms[s * n_patterns + p] += product * (
                    weight_on if on[s * n_patterns + p] else weight_off
                )


@kernel
def add_tree_shap(
    left_child: NDArray[np.integer[Any]],
    node_column: NDArray[np.intp],
    threshold: NDArray[np.float64],
    missing_left: NDArray[np.uint8],
    category_split: NDArray[np.integer[Any]],
    category_bitsets: NDArray[np.uint8],
    leaf_node: NDArray[np.intp],
    split_start: NDArray[np.intp],
    split_node: NDArray[np.intp],
    split_left: NDArray[np.uint8],
    split_slot: NDArray[np.intp],
    slot_start: NDArray[np.intp],
    slot_column: NDArray[np.intp],
    slot_zero: NDArray[np.float64],
    used_features: NDArray[np.intp],
    values: NDArray[np.float64],
    quadrature_nodes: NDArray[np.float64],
    quadrature_weights: NDArray[np.float64],
    X: NDArray[np.float64],
    chunk_rows: int,
    share_patterns: bool,
    phi: NDArray[np.float64],
) -> None:
    """Add the tree's SHAP values of every row of ``X`` into ``phi`` (n_rows, n_features, n_outputs).

    The routing arrays are the tree's node fields, read in place from the structured node
    array, except that each node's feature is given as its index in ``used_features`` (the
    features the tree splits on); the path arrays come from :func:`leaf_paths`, each slot's
    feature given the same way; row ``n`` of the quadrature tables holds the ``n``
    Gauss–Legendre nodes and weights on [0, 1]. Rows are
    routed ``chunk_rows`` at a time and their SHAP values gathered in a (used feature,
    output, row) buffer, so every leaf adds along contiguous rows. ``share_patterns=False``
    evaluates every row's pattern even where rows share it (for the tests).
    """
    n_rows, n_outputs = X.shape[0], values.shape[1]
    n_nodes, n_used = left_child.shape[0], used_features.shape[0]
    max_slots = 0
    for leaf in range(leaf_node.shape[0]):
        max_slots = max(max_slots, slot_start[leaf + 1] - slot_start[leaf])
    chunk_rows = max(1, min(chunk_rows, n_rows))
    # Flat buffers: a chunk's routing and columns are reshaped once per chunk; the per-leaf
    # patterns (slot-major: s * n_patterns + p) are indexed with offsets.
    goes_left_buffer = np.empty(n_nodes * chunk_rows, np.uint8)
    columns_buffer = np.empty(n_used * chunk_rows)
    on = np.empty(max_slots * chunk_rows, np.uint8)
    product = np.empty((max_slots + 1) // 2 * chunk_rows)
    terms = np.empty(max_slots * chunk_rows)
    chunk_phi = np.empty((n_used, n_outputs, chunk_rows))
    code = np.empty(chunk_rows, np.int64)
    pattern = np.empty(chunk_rows, np.intp)  # the row's column in on / terms
    # seen[code] − mark is the column of a pattern met in the current leaf and chunk; marks
    # only grow, so the array is never cleared.
    seen = np.full(1 << min(max_slots, SHARED_MAX_SLOTS), -1, np.int64)
    mark = 0
    for start in range(0, n_rows, chunk_rows):
        n_chunk = min(chunk_rows, n_rows - start)
        goes_left = goes_left_buffer[: n_nodes * n_chunk].reshape((n_nodes, n_chunk))
        columns = columns_buffer[: n_used * n_chunk].reshape((n_used, n_chunk))
        for r in range(n_chunk):
            for column in range(n_used):
                columns[column, r] = X[start + r, used_features[column]]
        route_rows(
            left_child,
            node_column,
            threshold,
            missing_left,
            category_split,
            category_bitsets,
            columns,
            goes_left,
        )
        chunk_phi[:, :, :n_chunk] = 0.0
        for leaf in range(leaf_node.shape[0]):
            first, n_slots = slot_start[leaf], slot_start[leaf + 1] - slot_start[leaf]
            if share_patterns and n_slots <= SHARED_MAX_SLOTS:
                # Bit s of a row's code: the row follows every split on slot s.
                for r in range(n_chunk):
                    code[r] = (1 << n_slots) - 1
                for k in range(split_start[leaf], split_start[leaf + 1]):
                    node, left, bit = split_node[k], split_left[k], 1 << split_slot[k]
                    for r in range(n_chunk):
                        code[r] &= ~(bit * (goes_left[node, r] != left))
                n_patterns = 0
                for r in range(n_chunk):
                    if seen[code[r]] < mark:
                        seen[code[r]] = mark + n_patterns
                        code[n_patterns] = code[r]  # r >= n_patterns: already read
                        n_patterns += 1
                    pattern[r] = seen[code[r]] - mark
                mark += n_patterns
                for s in range(n_slots):
                    for p in range(n_patterns):
                        on[s * n_patterns + p] = (code[p] >> s) & 1
            else:
                n_patterns = n_chunk
                for i in range(n_slots * n_chunk):
                    on[i] = 1
                for k in range(split_start[leaf], split_start[leaf + 1]):
                    node, left, bits = split_node[k], split_left[k], split_slot[k] * n_chunk
                    for r in range(n_chunk):
                        on[bits + r] &= goes_left[node, r] == left
                for r in range(n_chunk):
                    pattern[r] = r
            if n_patterns < FEW_PATTERNS:
                _few_pattern_terms(
                    on, n_slots, n_patterns, slot_zero, first, quadrature_nodes,
                    quadrature_weights, terms,
                )  # fmt: skip
            else:
                _pattern_terms(
                    on, n_slots, n_patterns, slot_zero, first, quadrature_nodes,
                    quadrature_weights, product, terms,
                )  # fmt: skip
            node = leaf_node[leaf]
            for s in range(n_slots):
                column, out = slot_column[first + s], s * n_patterns
                for o in range(n_outputs):
                    v = values[node, o]
                    for r in range(n_chunk):
                        chunk_phi[column, o, r] += terms[out + pattern[r]] * v
        for column in range(n_used):
            f = used_features[column]
            for o in range(n_outputs):
                for r in range(n_chunk):
                    phi[start + r, f, o] += chunk_phi[column, o, r]
