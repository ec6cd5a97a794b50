"""Named members as parameters, shared by engine.combine and engine.fusion."""

from __future__ import annotations

from typing import Any

import pytest

from engine import GaussianNB, LogisticRegression
from engine.combine import StackingClassifier, VotingClassifier
from engine.fusion import BKSCombiner


def _members() -> list[tuple[str, Any]]:
    return [("lr", LogisticRegression()), ("nb", GaussianNB())]


@pytest.mark.parametrize("cls", [VotingClassifier, StackingClassifier, BKSCombiner])
def test_members_are_replaced_before_their_parameters_are_set(cls: Any) -> None:
    model = cls(_members())
    model.set_params(nb__var_smoothing=1e-5, nb=GaussianNB(var_smoothing=1e-3), lr__C=0.5)
    params = model.get_params(deep=True)
    assert params["nb__var_smoothing"] == 1e-5 and params["lr__C"] == 0.5
    assert params["nb"] is dict(model.estimators)["nb"]


@pytest.mark.parametrize("cls", [VotingClassifier, StackingClassifier, BKSCombiner])
def test_a_member_named_like_a_parameter_hides_nothing(cls: Any) -> None:
    model = cls([("cv", GaussianNB())])
    params = model.get_params(deep=True)
    assert params["cv"] == 5 and not any(key.startswith("cv__") for key in params)
    model.set_params(cv=3)
    assert model.cv == 3 and isinstance(model.estimators[0][1], GaussianNB)
