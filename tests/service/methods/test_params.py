"""Checking a job's params: unknown names, bounds, nested learners, caps, defaults."""

from __future__ import annotations

from typing import Any

import pytest

import engine
from service.methods.catalog import Task
from service.methods.params import (
    Limits,
    ParamsInvalid,
    build_estimator,
    resolve_params,
)

C, R = Task.CLASSIFICATION, Task.REGRESSION


def _paths(method: str, task: Task, params: dict[str, Any], limits: Limits = Limits()) -> list[str]:
    with pytest.raises(ParamsInvalid) as caught:
        resolve_params(method, task, params, limits)
    return [error.path for error in caught.value.errors]


def test_defaults_are_filled_in_and_nested_learners_expanded() -> None:
    resolved = resolve_params("adaboost", C, {"n_estimators": 7})
    assert resolved["n_estimators"] == 7
    assert resolved["learning_rate"] == 1.0
    assert resolved["estimator"]["method"] == "decision_tree"
    assert resolved["estimator"]["params"]["max_depth"] == 1
    assert resolved["estimator"]["params"]["criterion"] == "gini"
    regression = resolve_params("adaboost", R, {})
    assert regression["estimator"]["params"]["max_depth"] == 3
    assert "random_state" not in resolved and "n_jobs" not in resolve_params("random_forest", C, {})


def test_unknown_names_are_all_named() -> None:
    assert _paths("random_forest", C, {"n_trees": 5, "depth": 3, "n_estimators": 5}) == [
        "params.n_trees",
        "params.depth",
    ]


def test_task_specific_param_is_unknown_for_the_other_task() -> None:
    assert _paths("random_forest", R, {"class_weight": "balanced"}) == ["params.class_weight"]


@pytest.mark.parametrize("name", ["random_state", "n_jobs", "categorical_features"])
def test_service_controlled_params_are_refused(name: str) -> None:
    with pytest.raises(ParamsInvalid, match=name):
        resolve_params("random_forest", C, {name: 1})


def test_out_of_bounds_values_are_named_with_the_allowed_range() -> None:
    with pytest.raises(ParamsInvalid) as caught:
        resolve_params("random_forest", C, {"n_estimators": 0, "max_features": "cube"})
    errors = {e.path: e.message for e in caught.value.errors}
    assert set(errors) == {"params.n_estimators", "params.max_features"}
    assert "an integer in [1, inf]" in errors["params.n_estimators"]
    assert "got 0" in errors["params.n_estimators"]


def test_booleans_are_not_numbers_and_floats_are_not_integers() -> None:
    assert sorted(_paths("gradient_boosting", R, {"n_estimators": True, "max_depth": 2.0})) == [
        "params.max_depth",
        "params.n_estimators",
    ]


def test_nested_learner_errors_have_dotted_names() -> None:
    params = {"estimator": {"method": "decision_tree", "params": {"max_depth": 0, "bogus": 1}}}
    paths = _paths("bagging", C, params)
    assert sorted(paths) == ["params.estimator.params.bogus", "params.estimator.params.max_depth"]


def test_nested_learner_shape_is_checked() -> None:
    assert _paths("bagging", C, {"estimator": "tree"}) == ["params.estimator"]
    assert _paths("bagging", C, {"estimator": {"method": "svm"}}) == ["params.estimator.method"]
    assert _paths("bagging", R, {"estimator": {"method": "arc_x4"}}) == ["params.estimator.method"]
    assert _paths("bagging", C, {"estimator": {"method": "decision_tree", "x": 1}}) == [
        "params.estimator"
    ]


def test_caps_apply_at_every_level() -> None:
    limits = Limits(max_estimators=50, max_depth=8)
    assert sorted(_paths("random_forest", C, {"n_estimators": 51, "max_depth": 9}, limits)) == [
        "params.max_depth",
        "params.n_estimators",
    ]
    nested = {"estimator": {"method": "random_forest", "params": {"n_estimators": 500}}}
    assert _paths("bagging", C, nested, limits) == ["params.estimator.params.n_estimators"]
    assert resolve_params("random_forest", C, {"n_estimators": 50, "max_depth": None}, limits)


def test_oob_without_out_of_bag_rows_is_refused_up_front() -> None:
    assert _paths("extra_trees", C, {"oob_score": True}) == ["params.oob_score"]
    assert resolve_params("extra_trees", C, {"oob_score": True, "bootstrap": True})


def test_build_estimator_passes_service_settings_down() -> None:
    resolved = resolve_params("adaboost", C, {"n_estimators": 3})
    model = build_estimator("adaboost", C, resolved, random_state=7, categorical_features=[1])
    assert isinstance(model, engine.AdaBoostClassifier)
    assert model.random_state == 7 and model.n_estimators == 3
    assert isinstance(model.estimator, engine.DecisionTreeClassifier)
    assert model.estimator.categorical_features == [1]
    assert model.estimator.max_depth == 1
    forest = build_estimator(
        "random_forest", R, resolve_params("random_forest", R, {}), n_jobs=2, random_state=1
    )
    assert forest.n_jobs == 2 and forest.categorical_features is None


def test_combiner_members_default_to_three_kinds_of_learner() -> None:
    resolved = resolve_params("voting", C, {})
    members = resolved["estimators"]
    assert [m["name"] for m in members] == ["forest", "boosting", "logistic"]
    assert members[0]["params"]["n_estimators"] == 100  # the default member, expanded
    assert members[2]["params"]["C"] == 1.0
    assert [m["name"] for m in resolve_params("voting", R, {})["estimators"]][-1] == "ridge"


def test_member_lists_are_checked_item_by_item() -> None:
    params = {
        "estimators": [
            {"name": "a", "method": "ridge", "params": {"alpha": -1}},
            {"name": "a", "method": "nope"},
            {"method": "ridge"},
            {"name": "b", "method": "ridge", "colour": "red"},
        ]
    }
    assert _paths("voting", R, params) == [
        "params.estimators[0].params.alpha",
        "params.estimators[1].name",
        "params.estimators[1].method",
        "params.estimators[2].name",
        "params.estimators[3]",
    ]
    assert _paths("stacking", C, {"estimators": []}) == ["params.estimators"]
    assert _paths("bks_combiner", C, {"prefit": True}) == ["params.prefit"]


def test_build_estimator_seeds_members_and_routes_categorical_features() -> None:
    members = [
        {"name": "forest", "method": "random_forest", "params": {"n_estimators": 5}},
        {"name": "linear", "method": "logistic_regression"},
    ]
    resolved = resolve_params("stacking", C, {"estimators": members})
    model = build_estimator("stacking", C, resolved, random_state=7, categorical_features=[1])

    (_, forest), (_, linear) = model.estimators
    assert model.random_state == 7
    # Members are not seeded by the combiner: the service derives a seed for each.
    assert forest.random_state == 8 and forest.categorical_features == [1]
    assert isinstance(linear, engine.EncodedClassifier) and linear.categorical_features == [1]
    # The final estimator learns from out-of-fold predictions, not the dataset's columns.
    assert isinstance(model.final_estimator, engine.EncodedClassifier)
    assert model.final_estimator.categorical_features is None


def test_mixture_of_experts_sees_the_encoded_matrix() -> None:
    resolved = resolve_params("mixture_of_experts", R, {"n_experts": 3})
    model = build_estimator("mixture_of_experts", R, resolved, categorical_features=[0])

    assert isinstance(model, engine.EncodedRegressor) and model.categorical_features == [0]
    expert = model.estimator.estimator
    # Inside the encoding there are no category codes left: the expert is not told of any.
    assert isinstance(expert, engine.EncodedRegressor) and expert.categorical_features is None
