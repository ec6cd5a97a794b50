"""Combiners of heterogeneous members: exact when the output is linear in the members'.

Shapley values are linear in the game (Shapley 1953, the additivity axiom), so a combiner
whose explained output is ``b + Σ_c W_c · member_output_c`` is explained exactly by the same
combination of its members' exact explanations:

- soft voting: the weighted mean of the members' ``predict_proba``;
- voting regression: the weighted mean of the members' predictions;
- stacking with a linear final estimator (logistic or linear regression, the perceptron, or one
  of them on standardised meta-features) and no ``passthrough``: the final estimator's decision
  function (or prediction) is affine in the meta-features, each of them a member output.

This needs every member to be explained exactly in the space the combiner consumes (a member's
``predict_proba`` for soft voting). Otherwise, and for every other combiner (hard voting,
grading, label fusion, mixtures of experts, k-NN), the output is explained by sampling against
the background rows the model kept at fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.base import check_is_fitted
from engine.combine import VotingClassifier, VotingRegressor
from engine.combine._stacking import _BaseStacking
from engine.explain._background import background_sample
from engine.explain._explainer import (
    DECISION,
    PREDICTION,
    PROBABILITY,
    Exact,
    Explainer,
    class_count,
    describe,
    native_output,
)
from engine.explain._linear import linear_map
from engine.neighbors import KNeighborsClassifier, KNeighborsRegressor
from engine.preprocessing import EncodedClassifier, EncodedRegressor

FloatArray = NDArray[np.float64]
_CONSUMED = {"predict_proba": PROBABILITY, "decision_function": DECISION, "predict": PREDICTION}


def _sampled(model: Any) -> Explainer:
    space, output = native_output(model)
    return Explainer(space, output, background=getattr(model, "background_", None))


def _exact_members(model: Any, space: str) -> list[Explainer] | None:
    """The members' explainers when every one is exact in ``space`` and saw every class."""
    explainers = [describe(member) for member in model.estimators_]
    n_classes = class_count(model)
    for member, explainer in zip(model.estimators_, explainers, strict=True):
        if explainer.exact is None or explainer.space != space:
            return None
        if n_classes and list(member.classes_) != list(range(n_classes)):
            return None
    return explainers


def _weighted_mean(model: Any, members: list[Explainer]) -> Exact:
    """Exact explanation of ``Σ_i w_i member_i(x) / Σ_i w_i`` from the members' own."""
    share = model.weights_ / model.weights_.sum()

    def exact(X: FloatArray) -> tuple[FloatArray, FloatArray]:
        X = model._check_X(X)
        phi, bias = 0.0, 0.0
        for weight, member in zip(share, members, strict=True):
            assert member.exact is not None
            member_phi, member_bias = member.exact(X)
            phi, bias = phi + weight * member_phi, bias + weight * member_bias
        return np.asarray(phi), np.asarray(bias)

    return exact


@describe.register
def _voting_classifier(model: VotingClassifier) -> Explainer:
    check_is_fitted(model)
    members = _exact_members(model, PROBABILITY) if model.voting == "soft" else None
    if members is None:
        return _sampled(model)
    space, output = native_output(model)
    return Explainer(
        space, output, _weighted_mean(model, members), getattr(model, "background_", None)
    )


@describe.register
def _voting_regressor(model: VotingRegressor) -> Explainer:
    check_is_fitted(model)
    members = _exact_members(model, PREDICTION)
    if members is None:
        return _sampled(model)
    space, output = native_output(model)
    return Explainer(
        space, output, _weighted_mean(model, members), getattr(model, "background_", None)
    )


def _final_map(final: Any) -> tuple[FloatArray, FloatArray] | None:
    """The final estimator as ``meta @ W + b`` when it is affine in the meta-features."""
    mapped = linear_map(final)
    if mapped is not None or not isinstance(final, EncodedClassifier | EncodedRegressor):
        return mapped
    inner = linear_map(final.estimator_)
    encoding = final.encoding_
    plain = encoding.indicators.size == 0 and encoding.categorical.size == 0
    if (
        inner is None
        or not plain
        or not np.array_equal(encoding.numeric, np.arange(encoding.width))
    ):
        return None
    W, b = inner
    scaled = W / encoding.scales[:, None]
    return scaled, b - encoding.means @ scaled


@describe.register
def _stacking(model: _BaseStacking) -> Explainer:
    check_is_fitted(model)
    final = describe(model.final_estimator_)
    background = getattr(model, "background_", None)

    def output(X: FloatArray) -> FloatArray:
        return final.output(model.transform(X))

    mapped = None if model.passthrough else _final_map(model.final_estimator_)
    members = [describe(member) for member in model.estimators_]
    n_classes = class_count(model)
    exact_members = mapped is not None and all(
        explainer.exact is not None
        and explainer.space == _CONSUMED[method]
        and (not n_classes or list(member.classes_) == list(range(n_classes)))
        for member, explainer, method in zip(
            model.estimators_, members, model.stack_method_, strict=True
        )
    )
    if mapped is None or not exact_members:
        return Explainer(final.space, output, background=background)
    W, b = mapped

    def exact(X: FloatArray) -> tuple[FloatArray, FloatArray]:
        X = model._check_X(X)
        phi = np.zeros((X.shape[0], X.shape[1], W.shape[1]))
        bias = b.astype(np.float64).copy()
        start = 0
        for member in members:
            assert member.exact is not None
            member_phi, member_bias = member.exact(X)
            block = W[start : start + member_phi.shape[2]]  # the member's meta-feature rows
            phi += member_phi @ block
            bias += member_bias @ block
            start += member_phi.shape[2]
        return phi, bias

    return Explainer(final.space, output, exact, background)


@describe.register(KNeighborsClassifier)
@describe.register(KNeighborsRegressor)
def _neighbours(model: Any) -> Explainer:
    check_is_fitted(model, "_fit_X")
    space, output = native_output(model)
    # k-NN keeps its training rows anyway; the background is drawn from them as fit would.
    background = background_sample(model._fit_X, model._fit_weight)
    return Explainer(space, output, background=background)
