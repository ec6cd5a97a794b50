"""The estimator contract every engine model follows.

It mirrors scikit-learn's (``get_params``/``set_params``, ``fit`` returning ``self``, fitted
attributes ending in ``_``) without importing scikit-learn, so engine models work with
scikit-learn's tooling and with the service alike.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, ClassVar

import numpy as np

from engine._params import Constraint, InvalidParameterError, validate_parameter
from engine._validation import NotFittedError, check_is_fitted
from engine.metrics import r2_score

__all__ = [
    "BaseEstimator",
    "ClassifierMixin",
    "NotFittedError",
    "RegressorMixin",
    "check_is_fitted",
    "clone",
]


class BaseEstimator:
    """Parameter handling shared by all estimators.

    Subclasses list their hyperparameters as explicit keyword arguments of ``__init__``,
    store them unchanged under the same names, and declare ``_parameter_constraints``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}

    @classmethod
    def _get_param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        signature = inspect.signature(init)
        return sorted(
            name
            for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        )

    @classmethod
    def parameter_defaults(cls) -> dict[str, Any]:
        """The constructor defaults, by parameter name."""
        signature = inspect.signature(cls.__init__)
        return {
            name: p.default
            for name, p in signature.parameters.items()
            if name != "self" and p.default is not inspect.Parameter.empty
        }

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                for sub_name, sub_value in value.get_params(deep=True).items():
                    params[f"{name}__{sub_name}"] = sub_value
            params[name] = value
        return params

    def set_params(self, **params: Any) -> BaseEstimator:
        valid = set(self._get_param_names())
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub_key = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                    f"Valid parameters are: {sorted(valid)!r}."
                )
            if sub_key:
                nested.setdefault(name, {})[sub_key] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def _validate_params(self) -> None:
        """Check every constructor parameter against the constraint table."""
        for name in self._get_param_names():
            constraints = self._parameter_constraints.get(name)
            if constraints is None:
                continue
            value = getattr(self, name)
            validate_parameter(name, value, constraints)
            if hasattr(value, "_validate_params") and not isinstance(value, type):
                try:
                    value._validate_params()
                except InvalidParameterError as exc:
                    raise InvalidParameterError(
                        f"{name}.{exc.parameter}", exc.value, str(exc)
                    ) from None

    def __repr__(self) -> str:
        defaults = self.parameter_defaults()
        changed = []
        for name in self._get_param_names():
            value = getattr(self, name, None)
            default = defaults.get(name, inspect.Parameter.empty)
            if _differs(value, default):
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        # Called only by scikit-learn's own tooling (e.g. its estimator checks), so
        # importing scikit-learn here never makes it a run-time dependency of the engine.
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        tags = Tags(estimator_type=None, target_tags=TargetTags(required=True))
        tags.input_tags.allow_nan = True
        if isinstance(self, ClassifierMixin):
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        elif isinstance(self, RegressorMixin):
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags


def _differs(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty:
        return True
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return True
    try:
        return bool(value != default)
    except Exception:  # incomparable values are shown rather than hidden
        return True


def clone(estimator: Any) -> Any:
    """A new unfitted estimator with the same parameters (nested estimators cloned too)."""
    params = estimator.get_params(deep=False)
    cloned = {
        name: clone(value)
        if hasattr(value, "get_params") and not isinstance(value, type)
        else copy.deepcopy(value)
        for name, value in params.items()
    }
    return type(estimator)(**cloned)


class ClassifierMixin:
    """Accuracy as the default score."""

    _estimator_type = "classifier"

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        predicted = self.predict(X)  # type: ignore[attr-defined]
        correct = (np.asarray(predicted) == np.asarray(y)).astype(np.float64)
        return float(np.average(correct, weights=sample_weight))


class RegressorMixin:
    """Coefficient of determination R² as the default score."""

    _estimator_type = "regressor"

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        return r2_score(y, self.predict(X), sample_weight=sample_weight)  # type: ignore[attr-defined]
