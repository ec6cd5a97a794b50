"""Exact path-dependent TreeSHAP of one tree, vectorised with NumPy (the kernels' twin).

Every leaf contributes an independent product game (Lundberg et al. 2020, Algorithm 2). Along
the root-to-leaf path, let the ``D`` distinct features split on be the leaf's *slots*; slot
``j`` has a zero fraction ``z_j`` (the product of the cover ratios of its splits) and, per row,
a one fraction ``o_j`` ∈ {0, 1} (whether the row follows the path at every split on that
feature). The leaf adds ``v · Π_{j∈S} o_j · Π_{j∉S} z_j`` to the value of ``S``; its Shapley
value for slot ``i`` is::

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
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from engine.explain.treeshap.paths import LeafPaths, leaf_groups, route_rows, row_codes, row_ones
from engine.tree._tree import Tree

__all__ = ["expected_value", "explain_tree"]

# Bound on the (leaves × slots × rows) elements of one working array: rows are explained in
# chunks of about 8 MB per array (measured faster than 32 MB chunks: fewer cache misses and
# page faults on the temporaries).
CHUNK_ELEMENTS = 1 << 20
# Largest pattern table (leaves × slots × patterns) built for one group of leaves.
TABLE_ELEMENTS = 1 << 22

# Slot terms (n_leaves, n_slots, m) from one fractions (n_leaves or 1, n_slots, m).
_Terms = Callable[[NDArray[np.bool_]], NDArray[np.float64]]
# Adds one group's SHAP values for a chunk of rows: (goes_left, phi rows) -> None.
_GroupKernel = Callable[[NDArray[np.bool_], NDArray[np.float64]], None]


def _shapley_weights(n_players: NDArray[np.intp], width: int) -> NDArray[np.float64]:
    """``c_k = k! (D−1−k)! / D!`` for each leaf's ``D`` players, shape (n_leaves, width).

    ``c_k`` weighs coalitions of ``k`` other players; entries with ``k ≥ D`` are 0.
    """
    table = np.zeros((width, width))
    for d in range(1, width):
        table[d, :d] = [1.0 / (d * math.comb(d - 1, k)) for k in range(d)]
    return table[n_players]


def _polynomial_terms(paths: LeafPaths) -> _Terms:
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


def _quadrature_terms(paths: LeafPaths) -> _Terms:
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


def _pattern_table(paths: LeafPaths, terms: _Terms) -> NDArray[np.float64]:
    """Slot terms of every one-fraction pattern, (n_leaves, n_slots, 2**n_slots)."""
    patterns = np.arange(2**paths.n_slots)
    one = ((patterns[None, :] >> np.arange(paths.n_slots)[:, None]) & 1).astype(bool)
    return terms(one[None])


def _scatter_rows(paths: LeafPaths, terms: NDArray[np.float64], phi: NDArray[np.float64]) -> None:
    """Add slot terms (n_leaves, n_slots, n) times the leaf values into ``phi`` by feature."""
    flat = terms.reshape(-1, terms.shape[2])[paths.scatter_order]
    leaf = paths.scatter_order // paths.n_slots
    for output in range(paths.values.shape[1]):
        weighted = flat * paths.values[leaf, output, None]
        grouped = np.add.reduceat(weighted, paths.scatter_starts, axis=0)
        phi[:, paths.scatter_features, output] += grouped.T


def _use_pattern_table(paths: LeafPaths, n_samples: int) -> bool:
    """Tabulate patterns when there are fewer of them than rows and the table is small."""
    n_patterns = 2**paths.n_slots
    table_size = paths.n_leaves * (paths.n_slots + 1) * n_patterns
    return n_patterns <= n_samples and table_size <= TABLE_ELEMENTS


def _group_kernel(
    paths: LeafPaths, n_samples: int, use_table: bool | None, reference: bool
) -> _GroupKernel:
    """A function adding one group's SHAP values for a chunk of rows into ``phi``.

    It takes the chunk's ``route_rows`` (n_nodes, n) and its slice of ``phi`` (n,
    n_features, n_outputs). ``use_table`` forces (True) or forbids (False) the pattern
    table; by default it is used when it saves work. ``reference`` selects the polynomial
    kernel, which the tests hold equal to the quadrature kernel and to brute force.
    """
    terms = _polynomial_terms(paths) if reference else _quadrature_terms(paths)
    if use_table is None:
        use_table = _use_pattern_table(paths, n_samples)
    if not use_table:
        return lambda goes_left, phi: _scatter_rows(paths, terms(row_ones(paths, goes_left)), phi)
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
        codes = row_codes(paths, goes_left)[entry_leaf] + entry_offset
        for output, output_table in enumerate(weighted):
            grouped = np.add.reduceat(output_table.take(codes), paths.scatter_starts, axis=0)
            phi[:, paths.scatter_features, output] += grouped.T

    return add


def explain_tree(
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
    groups = leaf_groups(tree)
    kernels = [_group_kernel(paths, n_samples, use_table, reference) for paths in groups]
    per_row = max(paths.n_leaves * (paths.n_slots + 1) for paths in groups) * max(2, n_outputs)
    chunk = max(1, CHUNK_ELEMENTS // per_row)
    for start in range(0, n_samples, chunk):
        rows = slice(start, start + chunk)
        goes_left = route_rows(tree, X[rows])
        for kernel in kernels:
            kernel(goes_left, phi[rows])
    return phi, np.sum([paths.expected_value() for paths in groups], axis=0)


def expected_value(tree: Tree) -> NDArray[np.float64]:
    """The tree's output with no feature known, shape (n_outputs,): the cover-weighted leaf mean."""
    if tree.nodes["left_child"][0] < 0:
        return tree.values[0].astype(np.float64)
    return np.sum([paths.expected_value() for paths in leaf_groups(tree)], axis=0)
