"""Models fitted on the dense encoding of their input (``EncodedClassifier``/``Regressor``).

Every encoded column is a function of one input column (its imputed, standardised value, its
missing-value indicator, or one of its one-hot categories), so a model that is additive over
the encoded columns is additive over the input columns too: an input feature's contribution
is the sum of its encoded columns' contributions. Anything else is explained by sampling on
the input columns, against the background rows the wrapper kept at fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.base import check_is_fitted
from engine.explain._explainer import Exact, Explainer, describe
from engine.explain._linear import affine_exact, linear_map
from engine.preprocessing import DenseEncoding, EncodedClassifier, EncodedRegressor


def encoded_owners(encoding: DenseEncoding) -> NDArray[np.intp]:
    """The input column behind each encoded column, shape (encoding.width,)."""
    blocks = [encoding.numeric, encoding.indicators]
    blocks += [
        np.full(known.size, column)
        for column, known in zip(encoding.categorical, encoding.categories, strict=True)
    ]
    return np.concatenate(blocks).astype(np.intp)


def _inner_exact(model: Any, inner: Explainer) -> Exact | None:
    if inner.exact is not None or not model.standardize:
        return inner.exact
    # A linear model saved before models kept their training mean: the standardised encoded
    # columns have mean zero over the training rows, which is that mean.
    mapped = linear_map(model.estimator_)
    return None if mapped is None else affine_exact(*mapped, np.zeros(model.encoding_.width))


@describe.register(EncodedClassifier)
@describe.register(EncodedRegressor)
def _encoded(model: Any) -> Explainer:
    check_is_fitted(model, "estimator_")
    inner = describe(model.estimator_)
    inner_exact = _inner_exact(model, inner)
    background = getattr(model, "background_", None)

    def output(X: NDArray[np.float64]) -> NDArray[np.float64]:
        return inner.output(model._encoded(X))

    if inner_exact is None:
        return Explainer(inner.space, output, background=background)
    owners = encoded_owners(model.encoding_)
    if np.array_equal(owners, np.arange(model.n_features_in_)):  # one column each: as they are
        return Explainer(inner.space, output, lambda X: inner_exact(model._encoded(X)), background)
    # (width, n_features): sums the encoded columns of each input column.
    gather = np.zeros((owners.size, model.n_features_in_))
    gather[np.arange(owners.size), owners] = 1.0

    def exact(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        phi, bias = inner_exact(model._encoded(X))
        # (n, m, width) @ (width, p): a matrix product, many times faster than einsum here.
        return np.matmul(phi.transpose(0, 2, 1), gather).transpose(0, 2, 1), bias

    return Explainer(inner.space, output, exact, background)
