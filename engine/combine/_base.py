"""What every combiner shares: a named list of heterogeneous members and their parameters.

As in scikit-learn, ``estimators`` is a list of ``(name, estimator)`` pairs; an estimator may be
the string ``"drop"`` to leave that member out. Members are reachable through ``get_params`` and
``set_params`` as ``name`` and ``name__param`` (:mod:`engine.combine._named`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    DROP,
    Constraint,
    CVSplits,
    Interval,
    NamedEstimators,
    NoneValue,
    RandomStateValue,
)
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X
from engine.base import check_is_fitted
from engine.combine._folds import Splits, resolve_splits
from engine.combine._members import check_accepts_sample_weight
from engine.combine._named import NamedMembersEstimator

__all__ = ["BaseCombiner", "NumberSequence", "TransformMixin"]


@dataclass(frozen=True)
class NumberSequence(Constraint):
    """A list of finite non-negative numbers, e.g. vote weights."""

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str | bytes | Mapping):
            return False
        try:
            items = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        return items.ndim == 1 and bool(np.all(np.isfinite(items) & (items >= 0)))

    def describe(self) -> str:
        return "a sequence of non-negative numbers"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "number", "minimum": 0}}


COMBINER_CONSTRAINTS: dict[str, list[Constraint]] = {
    # Repeated names are refused in fit, with scikit-learn's message.
    "estimators": [NamedEstimators(allow_drop=True, distinct_names=False)],
    "n_jobs": [Interval("int", None, None), NoneValue()],
}
CV_CONSTRAINTS: dict[str, list[Constraint]] = {
    "cv": [CVSplits()],
    "random_state": [RandomStateValue()],
}


class TransformMixin:
    """``fit_transform`` for the combiners whose ``transform`` returns member outputs."""

    def fit_transform(self, X: Any, y: Any, **fit_params: Any) -> Any:
        """``fit``, then ``transform`` of the same rows by the members refitted on all rows."""
        return self.fit(X, y, **fit_params).transform(X)  # type: ignore[attr-defined]


class BaseCombiner(NamedMembersEstimator):
    """Members, parameters, input checks and fitted-state handling of all combiners."""

    _classification: bool = False

    estimators: Any
    n_jobs: int | None
    cv: Any  # in the combiners that learn from held-out folds
    random_state: Any
    estimators_: list[Any]
    member_names_: list[str]
    n_features_in_: int
    classes_: NDArray[Any]

    # -- members ------------------------------------------------------------------------

    def _active_members(self) -> tuple[list[str], list[Any], list[int]]:
        """Names, prototypes and positions (in ``estimators``) of the members not dropped."""
        self._check_member_names([name for name, _ in self.estimators])
        active = [
            (name, estimator, i)
            for i, (name, estimator) in enumerate(self.estimators)
            if not (isinstance(estimator, str) and estimator == DROP)
        ]
        if not active:
            raise ValueError("All estimators are dropped; at least one is required.")
        return [a[0] for a in active], [a[1] for a in active], [a[2] for a in active]

    @property
    def named_estimators_(self) -> dict[str, Any]:
        """The fitted members by name (``"drop"`` for members left out)."""
        check_is_fitted(self)
        fitted = dict(zip(self.member_names_, self.estimators_, strict=True))
        return {name: fitted.get(name, DROP) for name, _ in self.estimators}

    # -- input --------------------------------------------------------------------------

    def _fit_input(
        self, X: Any, y: Any, sample_weight: Any, names: list[str], prototypes: list[Any]
    ) -> tuple[NDArray[np.float64], NDArray[Any], NDArray[np.float64] | None, NDArray[Any]]:
        """Validated ``X``, target, weights (None when not given) and classes.

        Classifiers get their target encoded as 0 … n_classes − 1 (the members are fitted on
        these codes, as in scikit-learn) and the sorted labels as ``classes``; regressors get
        float targets and an empty ``classes``.
        """
        X = check_X(X, estimator=type(self).__name__)
        target = check_target(y, X.shape[0], numeric=not self._classification)
        weights = None
        if sample_weight is not None:
            weights = check_sample_weight(sample_weight, X.shape[0])
            check_accepts_sample_weight(names, prototypes)
        classes: NDArray[Any] = np.empty(0)
        if self._classification:
            classes, target = encode_labels(target)
        return X, target, weights, classes

    def _splits(self, target: NDArray[Any]) -> Splits:
        """The training and held-out rows of every split, from ``cv`` and ``random_state``.

        Folds are stratified by class for classifiers; explicit splits must partition the rows.
        """
        return resolve_splits(
            self.cv,
            n_samples=target.shape[0],
            classes=target if self._classification else None,
            random_state=self.random_state,
        )

    def _check_X(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self)
        return check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)

    def _nested_estimators(self) -> list[Any]:
        """Every estimator that sees the input features (for the NaN tag)."""
        return [e for _, e in self.estimators if not isinstance(e, str)]

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import TransformerTags, get_tags

        tags = super().__sklearn_tags__()
        if hasattr(self, "transform"):
            # Member outputs (float64, or int64 class codes), whatever the dtype of X.
            tags.transformer_tags = TransformerTags(preserves_dtype=[])
        nested = self._nested_estimators() if self._members_are_valid() else []
        # NaN reaches the members untouched: the combiner accepts it when they all do.
        tags.input_tags.allow_nan = all(get_tags(e).input_tags.allow_nan for e in nested)
        return tags
