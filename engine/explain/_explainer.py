"""What explaining a model means: its explained output, and an exact method when it has one.

Every model is explained in one space, the one in which its output is a sum of per-feature
terms when it is one (a tree's probability, a linear model's log-odds, a boosted model's
decision function); the explained output is written with ``m`` columns: 1 for regression and
for two classes (the second class), one per class beyond.

``describe(model)`` returns an :class:`Explainer`: that output as a function, the exact
explanation when the model's structure gives one, and the background rows for sampling. Model
families register their own description with ``@describe.register``; a model nobody registered
is explained by sampling its ``predict_proba`` (classifiers) or ``predict`` (regressors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.explain._sampling import Output

__all__ = [
    "DECISION",
    "LOG_ODDS",
    "PREDICTION",
    "PROBABILITY",
    "Exact",
    "Explainer",
    "class_count",
    "decision_output",
    "describe",
    "native_output",
    "prediction_output",
    "probability_output",
]

PROBABILITY = "probability"  # predict_proba
DECISION = "decision"  # decision_function: log-odds, margins, vote scores
LOG_ODDS = "log_odds"  # naive Bayes' class log-likelihoods (no decision_function)
PREDICTION = "prediction"  # a regressor's predict

# rows (n, p) -> (contributions (n, p, m), bias (m,)).
Exact = Callable[[NDArray[np.float64]], tuple[NDArray[np.float64], NDArray[np.float64]]]


@dataclass(frozen=True)
class Explainer:
    """How one fitted model is explained.

    Attributes
    ----------
    space : str
        What the output is: ``PROBABILITY``, ``DECISION``, ``LOG_ODDS`` or ``PREDICTION``.
    output : callable
        The explained output of rows (n, p) as (n, m).
    exact : callable or None
        Exact contributions (n, p, m) and bias (m,) of rows (n, p), adding up to ``output``.
    background : ndarray of shape (n_background, p) or None
        The training rows kept at fit for sampling (None: the model kept none).
    """

    space: str
    output: Output
    exact: Exact | None = None
    background: NDArray[np.float64] | None = None


def class_count(model: Any) -> int:
    """Classes of a classifier; 0 for a regressor."""
    return len(model.classes_) if hasattr(model, "classes_") else 0


def _columns(values: Any) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    return array.reshape(array.shape[0], -1)


def probability_output(model: Any) -> Output:
    """``predict_proba``: the second class's column for two classes, every column beyond."""

    def output(X: NDArray[np.float64]) -> NDArray[np.float64]:
        proba = _columns(model.predict_proba(X))
        return proba[:, 1:] if proba.shape[1] == 2 else proba

    return output


def decision_output(model: Any) -> Output:
    return lambda X: _columns(model.decision_function(X))


def prediction_output(model: Any) -> Output:
    return lambda X: _columns(model.predict(X))


def native_output(model: Any) -> tuple[str, Output]:
    """The space a model without structure to exploit is explained in, and that output."""
    if not class_count(model):
        return PREDICTION, prediction_output(model)
    if hasattr(model, "predict_proba"):
        return PROBABILITY, probability_output(model)
    return DECISION, decision_output(model)


@functools.singledispatch
def describe(model: Any) -> Explainer:
    """The :class:`Explainer` of a fitted model (the extension point for model families).

    Dispatch follows the class hierarchy, so a registration for a subclass overrides its
    base class's.
    """
    space, output = native_output(model)
    return Explainer(space, output, background=getattr(model, "background_", None))
