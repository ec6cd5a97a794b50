"""What every combiner shares: a named list of heterogeneous members and their parameters.

As in scikit-learn, ``estimators`` is a list of ``(name, estimator)`` pairs; an estimator may be
the string ``"drop"`` to leave that member out. ``get_params(deep=True)`` exposes each member
under its name and its parameters as ``name__param``, and ``set_params`` accepts both, so grid
searches reach inside the ensemble.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, EstimatorValue, Interval, NoneValue, RandomStateValue
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X
from engine.base import BaseEstimator, check_is_fitted
from engine.combine._folds import resolve_folds
from engine.combine._members import accepts_sample_weight

__all__ = ["BaseCombiner", "CVSplits", "NamedEstimators", "NumberSequence", "TransformMixin"]

DROP = "drop"


@dataclass(frozen=True)
class NamedEstimators(Constraint):
    """A non-empty list of ``(name, estimator or "drop")`` pairs."""

    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or not value:
            return False
        return all(
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and (pair[1] == DROP or EstimatorValue().is_satisfied_by(pair[1]))
            for pair in value
        )

    def describe(self) -> str:
        return 'a non-empty list of (name, estimator or "drop") pairs'

    def json_schema(self) -> dict[str, Any]:
        pair = {
            "type": "array",
            "prefixItems": [
                {"type": "string"},
                {"anyOf": [{"$ref": "#/$defs/learner"}, {"const": DROP}]},
            ],
            "minItems": 2,
            "maxItems": 2,
        }
        return {"type": "array", "items": pair, "minItems": 1}


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


@dataclass(frozen=True)
class CVSplits(Constraint):
    """Explicit folds: a sequence of at least two ``(train_rows, test_rows)`` index pairs."""

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
            return False
        try:
            splits = list(value)
        except TypeError:
            return False
        return len(splits) >= 2 and all(_is_split(split) for split in splits)

    def describe(self) -> str:
        return "a sequence of (train_indices, test_indices) pairs"

    def json_schema(self) -> dict[str, Any]:
        rows = {"type": "array", "items": {"type": "integer", "minimum": 0}}
        pair = {"type": "array", "prefixItems": [rows, rows], "minItems": 2, "maxItems": 2}
        return {"type": "array", "items": pair, "minItems": 2}


def _is_split(split: Any) -> bool:
    if not isinstance(split, tuple | list) or len(split) != 2:
        return False
    for rows in split:
        array = np.asarray(rows)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            return False
    return True


COMBINER_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimators": [NamedEstimators()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
}
CV_CONSTRAINTS: dict[str, list[Constraint]] = {
    "cv": [Interval("int", 2, None), CVSplits()],
    "random_state": [RandomStateValue()],
}


class TransformMixin:
    """``fit_transform`` for the combiners whose ``transform`` returns member outputs."""

    def fit_transform(self, X: Any, y: Any, **fit_params: Any) -> Any:
        """``fit``, then ``transform`` of the same rows by the members refitted on all rows."""
        return self.fit(X, y, **fit_params).transform(X)  # type: ignore[attr-defined]


class BaseCombiner(BaseEstimator):
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

    # -- parameters ---------------------------------------------------------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        if deep and self._pairs_are_valid():
            for name, estimator in self.estimators:
                params[name] = estimator
                if hasattr(estimator, "get_params"):
                    for key, value in estimator.get_params(deep=True).items():
                        params[f"{name}__{key}"] = value
        return params

    def set_params(self, **params: Any) -> BaseCombiner:
        if "estimators" in params:
            self.estimators = params.pop("estimators")
        names = [name for name, _ in self.estimators] if self._pairs_are_valid() else []
        own: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub_key = key.partition("__")
            if name not in names:
                own[key] = value
            elif sub_key:
                nested.setdefault(name, {})[sub_key] = value
            else:
                self._replace_member(name, value)
        for name, sub_params in nested.items():
            dict(self.estimators)[name].set_params(**sub_params)
        super().set_params(**own)
        return self

    def _pairs_are_valid(self) -> bool:
        return NamedEstimators().is_satisfied_by(self.estimators)

    def _replace_member(self, name: str, estimator: Any) -> None:
        self.estimators = [(n, estimator if n == name else e) for n, e in self.estimators]

    # -- members ------------------------------------------------------------------------

    def _active_members(self) -> tuple[list[str], list[Any], list[int]]:
        """Names, prototypes and positions (in ``estimators``) of the members not dropped."""
        names = [name for name, _ in self.estimators]
        if len(set(names)) != len(names):
            raise ValueError(f"Names provided are not unique: {names!r}.")
        own = set(self._get_param_names())
        for name in names:
            if "__" in name:
                raise ValueError(f"Estimator names must not contain __: got {name!r}.")
            if name in own:
                raise ValueError(f"Estimator names conflict with constructor arguments: {name!r}.")
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

    def _forget_fit(self) -> None:
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)

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
            for name, prototype in zip(names, prototypes, strict=True):
                if not accepts_sample_weight(prototype):
                    raise TypeError(
                        f"Member {name!r} ({type(prototype).__name__}) does not accept "
                        "sample_weight."
                    )
        classes: NDArray[Any] = np.empty(0)
        if self._classification:
            classes, target = encode_labels(target)
        return X, target, weights, classes

    def _folds(self, target: NDArray[Any]) -> tuple[NDArray[np.int64], int]:
        """The fold of every row and the number of folds, from ``cv`` and ``random_state``.

        Folds are stratified by class for classifiers.
        """
        return resolve_folds(
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
        nested = self._nested_estimators() if self._pairs_are_valid() else []
        # NaN reaches the members untouched: the combiner accepts it when they all do.
        tags.input_tags.allow_nan = all(get_tags(e).input_tags.allow_nan for e in nested)
        return tags
