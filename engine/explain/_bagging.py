"""Bagging: exact when every member is, as the mean of the members' explanations.

A bag's output is the plain mean of its members' outputs (Breiman 1996): the members'
``predict_proba`` under soft voting, their predictions for regression. Shapley values are
linear in the game (Shapley 1953, the additivity axiom), so when every member has an exact
explanation in that space, the mean of those explanations is an exact explanation of the bag,
as for soft voting (:mod:`engine.explain._combiners`). Each member sees its own subspace of
the features (``max_features``); the features it never sees are null players of its game and
get nothing from it (Shapley's null-player axiom), so its contributions are scattered onto
the columns it was fitted on (distinct even with ``bootstrap_features``: the draw is reduced
to the features it holds, :func:`engine.ensemble._sampling.draw_member`).

Bags of engine trees are explained by TreeSHAP over all their trees at once
(:mod:`engine.explain._trees`). A bag is sampled, in the same space, when a member is not
exact there (a logistic regression's probability, naive Bayes, k-NN), under hard voting (its
vote shares are not linear in anything its members explain), or when a member saw only some
of the classes (its probabilities have other columns than the bag's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.base import check_is_fitted
from engine.ensemble._bagging import BaggingClassifier, BaggingRegressor
from engine.explain._explainer import (
    PREDICTION,
    PROBABILITY,
    Exact,
    Explainer,
    class_count,
    describe,
    native_output,
)
from engine.explain._trees import tree_explainer

FloatArray = NDArray[np.float64]


def _exact_members(model: Any, space: str) -> list[tuple[Explainer, Any]] | None:
    """Each member's exact explainer and feature columns, or None if one is not exact."""
    n_classes = class_count(model)
    found = []
    for member in model.members_:
        estimator, features = getattr(member, "estimator", None), getattr(member, "features", None)
        if estimator is None:  # a flat tree that TreeSHAP could not take: sampled
            return None
        if n_classes and (
            not hasattr(estimator, "predict_proba")
            or list(estimator.classes_) != list(range(n_classes))
        ):
            return None
        explainer = describe(estimator)
        if explainer.exact is None or explainer.space != space:
            return None
        found.append((explainer, features))
    return found


def _mean_of_members(model: Any, members: list[tuple[Explainer, Any]]) -> Exact:
    """Exact explanation of ``Σ_i member_i(x[F_i]) / B`` from the members' own."""

    def exact(X: FloatArray) -> tuple[FloatArray, FloatArray]:
        X = np.asarray(X, dtype=np.float64)
        phi: FloatArray | None = None
        bias: FloatArray | None = None
        for explainer, features in members:
            assert explainer.exact is not None
            columns = X if features is None else X[:, features]
            member_phi, member_bias = explainer.exact(columns)
            if phi is None or bias is None:
                phi = np.zeros((X.shape[0], X.shape[1], member_phi.shape[2]))
                bias = np.zeros(member_phi.shape[2])
            if features is None:
                phi += member_phi
            else:
                phi[:, features] += member_phi
            bias += np.asarray(member_bias, dtype=np.float64)
        assert phi is not None and bias is not None
        return phi / len(members), bias / len(members)

    return exact


@describe.register(BaggingClassifier)
@describe.register(BaggingRegressor)
def _bagging(model: Any) -> Explainer:
    check_is_fitted(model, "members_")
    space, output = native_output(model)
    trees = tree_explainer(model, space, output)
    if trees.exact is not None:
        return trees
    soft = not class_count(model) or model.voting == "soft"
    members = _exact_members(model, PROBABILITY if class_count(model) else PREDICTION)
    if not soft or members is None:
        return trees  # sampled, against the bag's background rows
    return Explainer(space, output, _mean_of_members(model, members), trees.background)
