"""Exact path-dependent TreeSHAP for the engine's trees and tree ensembles.

The explained game is Lundberg, Erion & Lee (2018, "Consistent individualized feature
attribution for tree ensembles"): the value of a coalition ``S`` of features is the tree's
output with the features of ``S`` fixed to the row's values and the others integrated out
along the tree, each split on a feature outside ``S`` sending the row to both children in
proportion to their training cover (``weighted_n_samples``). The attributions are the exact
Shapley values of that game, the numbers Algorithm 2 (EXTEND/UNWIND) of the paper computes.

One tree is explained by :mod:`engine.explain.treeshap`: Numba kernels that evaluate each
leaf's Shapley terms by Gauss–Legendre quadrature, once per distinct one-fraction pattern of
the rows (``engine.explain.treeshap.kernels``), or under ``COPPICE_ENGINE_KERNELS=numpy``
their vectorised NumPy twin (``engine.explain.treeshap.vectorised``).

Explaining a model
------------------
:func:`contributions_of` explains any model that :func:`explained_trees` describes as
``base + Σ_t weight_t · tree_t(x)``. Every model family's description is registered in one
place, :mod:`engine.explain._tree_sums`, which also holds ``tree_contributions``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.explain.treeshap import expected_value, explain_tree
from engine.tree._tree import Tree

__all__ = [
    "ExplainedTrees",
    "contributions_of",
    "explained_trees",
    "tree_expected_value",
    "tree_shap",
]


def tree_expected_value(tree: Tree) -> NDArray[np.float64]:
    """The tree's output with no feature known, shape (n_outputs,).

    The cover-weighted mean of the leaf values: every split sends the row to both children
    in proportion to their ``weighted_n_samples``.
    """
    return expected_value(tree)


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
    return explain_tree(tree, np.asarray(X, dtype=np.float64))[0]


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


def contributions_of(described: ExplainedTrees, X: Any) -> tuple[NDArray[np.float64], Any]:
    """TreeSHAP contributions and bias of the model ``described`` on raw rows ``X`` (see
    :func:`engine.explain._tree_sums.tree_contributions`)."""
    X_encoded = np.asarray(described.prepare(X), dtype=np.float64)
    n_outputs = described.base.shape[0]
    phi = np.zeros((X_encoded.shape[0], X_encoded.shape[1], n_outputs))
    bias = described.base.astype(np.float64).copy()
    for t, (tree, weight) in enumerate(zip(described.trees, described.weights, strict=True)):
        explained, columns = _explained_columns(described, t, tree)
        tree_phi, expected = explain_tree(explained, X_encoded)
        phi[:, :, columns] += weight * tree_phi
        bias[columns] += weight * expected
    if described.output is None:
        return phi, bias
    return phi[:, :, described.output], float(bias[described.output])


def _explained_columns(
    described: ExplainedTrees, t: int, tree: Tree
) -> tuple[Tree, slice | list[int]]:
    """Tree ``t`` with only the outputs the model explains, and their columns of ``phi``.

    Trees feeding one column keep it; when one output of trees predicting all of them is
    explained (binary classification: the positive class), the others are left out of the
    tree instead of explained and dropped.
    """
    if described.tree_outputs is not None:
        return tree, [described.tree_outputs[t]]
    if described.output is None or tree.values.shape[1] == 1:
        return tree, slice(None)
    output = described.output
    values = tree.values[:, output : output + 1]
    return Tree(tree.nodes, values, tree.category_bitsets, tree.n_features), [output]
