"""Exact path-dependent TreeSHAP for the engine's trees and tree ensembles.

The explained game is Lundberg, Erion & Lee (2018, "Consistent individualized feature
attribution for tree ensembles"): the value of a coalition ``S`` of features is the tree's
output with the features of ``S`` fixed to the row's values and the others integrated out
along the tree, each split on a feature outside ``S`` sending the row to both children in
proportion to their training cover (``weighted_n_samples``). The attributions are the exact
Shapley values of that game, the numbers Algorithm 2 (EXTEND/UNWIND) of the paper computes.

One tree is explained by :mod:`engine._shap`: Numba kernels that evaluate each leaf's
Shapley terms by Gauss–Legendre quadrature, once per distinct one-fraction pattern of the
rows (``engine._shap.kernels``), or under ``COPPICE_ENGINE_KERNELS=numpy`` their vectorised
NumPy twin (``engine._shap.vectorised``).

Explaining a model
------------------
:func:`tree_contributions` explains any model that :func:`explained_trees` can describe as
``base + Σ_t weight_t · tree_t(x)``. Single trees and forests / extra trees / bagging of trees
are registered below; other model families (boosting: ``base = init_``, every weight the
learning rate) register their own description with ``@explained_trees.register(TheirClass)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._shap import expected_value, explain_tree
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
