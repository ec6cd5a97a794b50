"""The constraints combiners share: named members and cross-validation splits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import GaussianNB
from engine._params import CVSplits, NamedEstimators, json_schema_for, validate_parameter

HALVES = [(np.arange(2, 4), np.arange(2)), (np.arange(2), np.arange(2, 4))]


@pytest.mark.parametrize(
    ("value", "plain", "with_drop"),
    [
        ([("a", GaussianNB()), ("b", GaussianNB())], True, True),
        ((("a", GaussianNB()),), True, True),
        ([("a", GaussianNB()), ("a", GaussianNB())], False, True),
        ([("a", "drop"), ("b", GaussianNB())], False, True),
        ([("a", "keep")], False, False),
        ([], False, False),
        ([GaussianNB()], False, False),
        ([(1, GaussianNB())], False, False),
        ([("a", GaussianNB)], False, False),  # a class, not an estimator
        ("a", False, False),
    ],
)
def test_named_estimators(value: Any, plain: bool, with_drop: bool) -> None:
    assert NamedEstimators().is_satisfied_by(value) is plain
    sklearn_like = NamedEstimators(allow_drop=True, distinct_names=False)
    assert sklearn_like.is_satisfied_by(value) is with_drop


def test_named_estimators_describe_and_schema() -> None:
    plain, sklearn_like = NamedEstimators(), NamedEstimators(allow_drop=True, distinct_names=False)
    assert plain.describe() == "a non-empty list of (name, estimator) pairs with distinct names"
    assert sklearn_like.describe() == 'a non-empty list of (name, estimator or "drop") pairs'
    learner = {"$ref": "#/$defs/learner"}
    assert plain.json_schema()["items"]["prefixItems"] == [{"type": "string"}, learner]
    assert sklearn_like.json_schema()["items"]["prefixItems"][1] == {
        "anyOf": [learner, {"const": "drop"}]
    }
    assert plain.json_schema()["minItems"] == 1


@pytest.mark.parametrize(
    ("value", "at_least_two", "at_least_one"),
    [
        (5, True, True),
        (np.int64(2), True, True),
        (1, False, False),
        (2.0, False, False),
        (True, False, False),
        (HALVES, True, True),
        (tuple(HALVES), True, True),
        ([([2, 3], [0, 1]), ([0, 1], [2, 3])], True, True),
        (HALVES[:1], False, True),
        ([(np.arange(2, 4), np.array([]))] * 2, True, True),  # an empty side is fine
        ([(np.arange(2.0, 4.0), np.arange(2))] * 2, False, False),  # float indices
        ([(np.arange(2, 4)[:, None], np.arange(2))] * 2, False, False),  # 2-D indices
        ([(np.arange(2),)] * 2, False, False),
        (iter(HALVES), False, False),  # validating would consume it
        (np.array(3.0), False, False),
        ("ab", False, False),
        ({"a": 1}, False, False),
    ],
)
def test_cv_splits(value: Any, at_least_two: bool, at_least_one: bool) -> None:
    assert CVSplits().is_satisfied_by(value) is at_least_two
    assert CVSplits(min_splits=1).is_satisfied_by(value) is at_least_one


def test_cv_splits_describe_and_schema() -> None:
    constraint = CVSplits()
    with pytest.raises(ValueError, match=r"an integer in \[2, inf\] or a sequence of \(train"):
        validate_parameter("cv", 1, [constraint])
    schema = json_schema_for([constraint], 5)
    count, splits = schema["anyOf"]
    assert count == {"type": "integer", "minimum": 2}
    assert splits["minItems"] == 2 and splits["items"]["minItems"] == 2
    assert schema["default"] == 5
    assert CVSplits(min_splits=1).json_schema()["anyOf"][1]["minItems"] == 1
