"""Declarative parameter constraints.

Every estimator declares one table, ``_parameter_constraints``, mapping each constructor
parameter to the constraints its value may satisfy (any one of them suffices). The table is
used three times: to validate in ``fit``, to render the JSON Schema the service publishes at
``GET /v1/methods``, and to name the offending parameter in an error.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "DROP",
    "Boolean",
    "CVSplits",
    "CallableValue",
    "Constraint",
    "EstimatorValue",
    "Interval",
    "InvalidParameterError",
    "MappingValue",
    "NamedEstimators",
    "NoneValue",
    "Options",
    "RandomStateValue",
    "SequenceValue",
    "json_schema_for",
    "validate_parameter",
]

DROP = "drop"
"""What stands for an estimator in :class:`NamedEstimators` to leave that member out."""


class InvalidParameterError(ValueError):
    """A hyperparameter has a value outside its declared constraints.

    Attributes
    ----------
    parameter : str
        Name of the offending parameter (dotted for nested estimators).
    value : object
        The rejected value.
    """

    def __init__(self, parameter: str, value: Any, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value


class Constraint:
    """One admissible shape of a parameter value."""

    def is_satisfied_by(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        raise NotImplementedError


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integral(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class Interval(Constraint):
    """A number in ``[low, high]`` with configurable open/closed ends.

    ``kind="int"`` admits integers only; ``kind="real"`` admits any real number (ints too),
    but never booleans and never NaN.
    """

    kind: Literal["int", "real"]
    low: float | None
    high: float | None
    closed: Literal["both", "left", "right", "neither"] = "both"

    def is_satisfied_by(self, value: Any) -> bool:
        if self.kind == "int" and not _is_integral(value):
            return False
        if not _is_real(value) or math.isnan(float(value)):
            return False
        if self.low is not None:
            below = value < self.low if self.closed in ("both", "left") else value <= self.low
            if below:
                return False
        if self.high is not None:
            above = value > self.high if self.closed in ("both", "right") else value >= self.high
            if above:
                return False
        return True

    def describe(self) -> str:
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        noun = "an integer" if self.kind == "int" else "a number"
        return f"{noun} in {left}{low}, {high}{right}"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer" if self.kind == "int" else "number"}
        if self.low is not None:
            key = "minimum" if self.closed in ("both", "left") else "exclusiveMinimum"
            schema[key] = self.low
        if self.high is not None:
            key = "maximum" if self.closed in ("both", "right") else "exclusiveMaximum"
            schema[key] = self.high
        return schema


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of strings."""

    values: tuple[str, ...]

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.values)}


class Boolean(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, bool) or type(value).__name__ == "bool_"

    def describe(self) -> str:
        return "a boolean"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


class NoneValue(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "null"}


class RandomStateValue(Constraint):
    """A seed: None, a non-negative integer, or a ``numpy.random.Generator``."""

    def is_satisfied_by(self, value: Any) -> bool:
        if value is None:
            return True
        if _is_integral(value):
            return bool(0 <= value < 2**32)
        return type(value).__name__ in ("Generator", "RandomState")

    def describe(self) -> str:
        return "None, an integer in [0, 2**32) or a numpy Generator"

    def json_schema(self) -> dict[str, Any]:
        return {"type": ["integer", "null"], "minimum": 0, "maximum": 2**32 - 1}


class CallableValue(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return callable(value) and not isinstance(value, type)

    def describe(self) -> str:
        return "a callable"

    def json_schema(self) -> dict[str, Any]:
        # Callables cannot cross HTTP; the service omits parameters that only accept them.
        return {"not": {}}


class EstimatorValue(Constraint):
    """An unfitted engine estimator (a nested learner)."""

    def is_satisfied_by(self, value: Any) -> bool:
        return (
            hasattr(value, "fit") and hasattr(value, "get_params") and not isinstance(value, type)
        )

    def describe(self) -> str:
        return "an estimator"

    def json_schema(self) -> dict[str, Any]:
        return {"$ref": "#/$defs/learner"}


@dataclass(frozen=True)
class NamedEstimators(Constraint):
    """A non-empty list of ``(name, estimator)`` pairs: the members of a combiner.

    ``allow_drop`` also admits the string ``"drop"`` for an estimator (the member is left
    out, as in scikit-learn's voting and stacking). ``distinct_names`` refuses a name given
    twice here; without it the combiner refuses duplicates in ``fit``, with scikit-learn's
    message. That names hold no ``__`` and differ from the combiner's own parameters only the
    combiner can tell (``engine.combine._named``).
    """

    allow_drop: bool = False
    distinct_names: bool = True

    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or not value:
            return False
        pairs_ok = all(
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and isinstance(pair[0], str)
            and (self._is_drop(pair[1]) or EstimatorValue().is_satisfied_by(pair[1]))
            for pair in value
        )
        if not pairs_ok:
            return False
        return not self.distinct_names or len({pair[0] for pair in value}) == len(value)

    def _is_drop(self, estimator: Any) -> bool:
        return self.allow_drop and isinstance(estimator, str) and estimator == DROP

    def describe(self) -> str:
        member = 'estimator or "drop"' if self.allow_drop else "estimator"
        distinct = " with distinct names" if self.distinct_names else ""
        return f"a non-empty list of (name, {member}) pairs{distinct}"

    def json_schema(self) -> dict[str, Any]:
        learner: dict[str, Any] = EstimatorValue().json_schema()
        if self.allow_drop:
            learner = {"anyOf": [learner, {"const": DROP}]}
        pair = {
            "type": "array",
            "prefixItems": [{"type": "string"}, learner],
            "minItems": 2,
            "maxItems": 2,
        }
        return {"type": "array", "items": pair, "minItems": 1}


_FOLD_COUNT = Interval("int", 2, None)


@dataclass(frozen=True)
class CVSplits(Constraint):
    """Cross-validation: a number of folds (an integer ≥ 2) or explicit splits.

    Explicit splits are scikit-learn's form: a sequence of at least ``min_splits``
    ``(train_indices, test_indices)`` pairs of 1-D integer row indices. A one-shot iterator
    (a generator) is refused: validating it would consume it before ``fit`` reads it.
    """

    min_splits: int = 2

    def is_satisfied_by(self, value: Any) -> bool:
        if _FOLD_COUNT.is_satisfied_by(value):
            return True
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
            return False
        try:
            if iter(value) is value:
                return False
            splits = list(value)
        except TypeError:  # e.g. a 0-d array
            return False
        return len(splits) >= self.min_splits and all(_is_split(split) for split in splits)

    def describe(self) -> str:
        return f"{_FOLD_COUNT.describe()} or a sequence of (train_indices, test_indices) pairs"

    def json_schema(self) -> dict[str, Any]:
        rows = {"type": "array", "items": {"type": "integer", "minimum": 0}}
        pair = {"type": "array", "prefixItems": [rows, rows], "minItems": 2, "maxItems": 2}
        splits = {"type": "array", "items": pair, "minItems": self.min_splits}
        return {"anyOf": [_FOLD_COUNT.json_schema(), splits]}


def _is_split(split: Any) -> bool:
    if not isinstance(split, tuple | list) or len(split) != 2:
        return False
    for rows in split:
        array = np.asarray(rows)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            return False
    return True


@dataclass(frozen=True)
class MappingValue(Constraint):
    """A mapping, e.g. ``class_weight={0: 1.0, 1: 3.0}``; values must be non-negative numbers."""

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, Mapping) and all(
            _is_real(v) and float(v) >= 0 for v in value.values()
        )

    def describe(self) -> str:
        return "a mapping of class label to non-negative weight"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}


@dataclass(frozen=True)
class SequenceValue(Constraint):
    """A list/tuple/array of integers or booleans, e.g. ``categorical_features=[0, 3]``."""

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str | bytes | Mapping):
            return False
        try:
            items = list(value)
        except TypeError:
            return False
        return all(_is_integral(v) or isinstance(v, bool) or hasattr(v, "__index__") for v in items)

    def describe(self) -> str:
        return "a sequence of column indices or a boolean mask"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": ["integer", "boolean"]}}


def validate_parameter(name: str, value: Any, constraints: list[Constraint]) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` satisfies one constraint."""
    if any(c.is_satisfied_by(value) for c in constraints):
        return
    allowed = " or ".join(c.describe() for c in constraints)
    raise InvalidParameterError(
        name, value, f"The '{name}' parameter must be {allowed}; got {value!r}."
    )


def json_schema_for(constraints: list[Constraint], default: Any) -> dict[str, Any]:
    """JSON Schema of one parameter: ``anyOf`` its constraints, with the default."""
    schemas = [c.json_schema() for c in constraints if not isinstance(c, CallableValue)]
    schema: dict[str, Any] = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if default is None or isinstance(default, bool | int | float | str):
        schema = {**schema, "default": default}
    return schema
