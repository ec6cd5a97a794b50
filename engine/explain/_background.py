"""The training rows a model keeps for sampled explanations, and its training mean.

Interventional Shapley values (Janzing, Minorics & Blöbaum 2020; Lundberg & Lee 2017, eq. 11
under feature independence) replace the features outside a coalition by values drawn from the
data distribution. A model that can only be explained by sampling therefore keeps a small,
fixed sample of its training rows: at most ``BACKGROUND_SIZE`` rows, chosen at fit with
probability proportional to the sample weight, so a saved model explains exactly as it did
before it was saved.

Estimators call :func:`background_sample` at the end of ``fit``; this module imports nothing
but NumPy, so estimator modules can import it without an import cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BACKGROUND_SIZE", "background_sample", "training_mean"]

BACKGROUND_SIZE = 100
# The rows are drawn from a generator of their own, never from the model's random_state: a
# model must fit exactly as it did before it kept a background, and the sample must not depend
# on how many random numbers the fit happened to draw.
_SEED = 20140101


def background_sample(
    X: NDArray[np.float64], sample_weight: Any = None, *, size: int = BACKGROUND_SIZE
) -> NDArray[np.float64]:
    """At most ``size`` training rows, drawn without replacement ∝ their weight.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
        The training rows as ``fit`` received them (NaN allowed).
    sample_weight : ndarray of shape (n_samples,) or None
        Rows of zero weight are never chosen.
    size : int

    Returns
    -------
    ndarray of float64, shape (min(size, n_positive), n_features), C-contiguous
        In their training order.
    """
    X = np.asarray(X, dtype=np.float64)
    weights = (
        np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, np.float64)
    )
    rows = np.flatnonzero(weights > 0)
    if rows.size > size:
        rng = np.random.default_rng(_SEED)
        share = weights[rows] / weights[rows].sum()
        rows = np.sort(rng.choice(rows, size=size, replace=False, p=share))
    return np.ascontiguousarray(X[rows])


def training_mean(X: NDArray[np.float64], sample_weight: Any = None) -> NDArray[np.float64]:
    """The weighted column means of the training rows, shape (n_features,).

    A linear model's exact contributions are ``coef · (x − mean)`` (Lundberg & Lee 2017,
    Corollary 1, with the interventional expectation taken over the training rows).
    """
    X = np.asarray(X, dtype=np.float64)
    if sample_weight is None:
        return X.mean(axis=0)
    return np.average(X, axis=0, weights=np.asarray(sample_weight, dtype=np.float64))
