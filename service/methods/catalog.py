"""The one place that maps API method names to engine estimators.

A method is the snake_case family name of an engine estimator; one name covers both tasks.
Adding a method is adding one ``Method`` to ``CATALOG``. This module (and the rest of
``service.methods`` but its router and service) imports only the engine, so the training
child process can use it without loading the web stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import engine


class Task(StrEnum):
    CLASSIFICATION = "classification"
    REGRESSION = "regression"


# Parameters the service sets itself: a job cannot pass them.
SERVICE_CONTROLLED: Mapping[str, str] = MappingProxyType(
    {
        "n_jobs": "is set by the service (COPPICE_PROCESSES_PER_JOB)",
        "random_state": "is set from the job's 'seed'",
        "categorical_features": "is set from the dataset's column kinds",
        "callbacks": "is used by the service to report progress",
    }
)


@dataclass(frozen=True, slots=True)
class Method:
    """One trainable method: its estimator class per task, and what ``None`` learners mean."""

    name: str
    description: str
    classifier: type[Any] | None
    regressor: type[Any] | None
    # What one callback event of the estimator counts, for the job's stage text ("tree 3/100").
    progress_unit: str = "iteration"
    # Whether the estimator needs a complete numeric matrix (no NaN, no category codes): the
    # service then wraps it in engine.EncodedClassifier/EncodedRegressor (impute, one-hot,
    # standardise), so it trains on the same tables as the trees.
    dense_input: bool = False
    # What a nested-learner parameter left at None stands for, per task, as
    # {"method", "params"}; the service always passes it explicitly, so the dataset's
    # categorical features reach the members and resolved params show the learner.
    default_learners: Mapping[str, Mapping[Task, Mapping[str, Any]]] = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(
            task
            for task, cls in (
                (Task.CLASSIFICATION, self.classifier),
                (Task.REGRESSION, self.regressor),
            )
            if cls is not None
        )

    def estimator_class(self, task: Task) -> type[Any]:
        cls = self.classifier if task == Task.CLASSIFICATION else self.regressor
        if cls is None:
            raise KeyError(f"method '{self.name}' does not support {task.value}")
        return cls


def _tree(**params: Any) -> Mapping[str, Any]:
    return {"method": "decision_tree", "params": params}


_METHODS = (
    Method(
        name="decision_tree",
        progress_unit="tree",
        description="A single CART tree on quantile-binned features (max_depth=1 is a stump).",
        classifier=engine.DecisionTreeClassifier,
        regressor=engine.DecisionTreeRegressor,
    ),
    Method(
        name="bagging",
        progress_unit="member",
        description=(
            "Bootstrap aggregating over any learner (default: a full decision tree), with "
            "optional random feature subspaces; out-of-bag estimates."
        ),
        classifier=engine.BaggingClassifier,
        regressor=engine.BaggingRegressor,
        default_learners={
            "estimator": {Task.CLASSIFICATION: _tree(), Task.REGRESSION: _tree()},
        },
    ),
    Method(
        name="random_forest",
        progress_unit="tree",
        description=(
            "Breiman's random forest: bagged trees choosing each split among max_features "
            "features drawn at random; out-of-bag estimates."
        ),
        classifier=engine.RandomForestClassifier,
        regressor=engine.RandomForestRegressor,
    ),
    Method(
        name="extra_trees",
        progress_unit="tree",
        description=("Extremely randomised trees: random thresholds, the whole sample by default."),
        classifier=engine.ExtraTreesClassifier,
        regressor=engine.ExtraTreesRegressor,
    ),
    Method(
        name="adaboost",
        progress_unit="round",
        description=(
            "AdaBoost: discrete AdaBoost / SAMME for classification (default learner: a stump), "
            "AdaBoost.R2 for regression (default learner: a tree of depth 3)."
        ),
        classifier=engine.AdaBoostClassifier,
        regressor=engine.AdaBoostRegressor,
        default_learners={
            "estimator": {
                Task.CLASSIFICATION: _tree(max_depth=1),
                Task.REGRESSION: _tree(max_depth=3),
            },
        },
    ),
    Method(
        name="arc_x4",
        progress_unit="round",
        description=(
            "Breiman's Arc-x4: adaptive resampling with probabilities proportional to "
            "1 + m(i)^4, unweighted vote (default learner: a full tree)."
        ),
        classifier=engine.ArcX4Classifier,
        regressor=None,
        default_learners={"estimator": {Task.CLASSIFICATION: _tree()}},
    ),
    Method(
        name="region_boost",
        progress_unit="round",
        description=(
            "RegionBoost: AdaBoost whose members vote with their accuracy on the k nearest "
            "training rows (default learner: a stump)."
        ),
        classifier=engine.RegionBoostClassifier,
        regressor=None,
        default_learners={"estimator": {Task.CLASSIFICATION: _tree(max_depth=1)}},
    ),
    Method(
        name="gradient_boosting",
        progress_unit="stage",
        description="Friedman's gradient tree boosting (histogram trees).",
        classifier=engine.GradientBoostingClassifier,
        regressor=engine.GradientBoostingRegressor,
    ),
    Method(
        name="xgboost",
        progress_unit="round",
        description=(
            "XGBoost-style gradient boosting: second-order trees with L1/L2 leaf "
            "regularisation, gamma, min_child_weight and column subsampling."
        ),
        classifier=engine.XGBoostClassifier,
        regressor=engine.XGBoostRegressor,
    ),
)

_BASE_LEARNERS = (
    Method(
        name="logistic_regression",
        dense_input=True,
        description="L2-regularised logistic regression (binary and multinomial), Newton or L-BFGS.",
        classifier=engine.LogisticRegression,
        regressor=None,
    ),
    Method(
        name="linear_regression",
        dense_input=True,
        description="Ordinary least squares.",
        classifier=None,
        regressor=engine.LinearRegression,
    ),
    Method(
        name="ridge",
        dense_input=True,
        description="Least squares with an L2 penalty on the coefficients.",
        classifier=None,
        regressor=engine.Ridge,
    ),
    Method(
        name="perceptron",
        dense_input=True,
        progress_unit="epoch",
        description=(
            "Rosenblatt's perceptron (one-vs-rest beyond two classes); labels only, no "
            "probabilities, so its log loss and ROC AUC are null."
        ),
        classifier=engine.Perceptron,
        regressor=None,
    ),
    Method(
        name="k_neighbors",
        dense_input=True,
        description="k-nearest neighbours: majority vote or average of the k closest rows.",
        classifier=engine.KNeighborsClassifier,
        regressor=engine.KNeighborsRegressor,
    ),
    Method(
        name="gaussian_nb",
        dense_input=True,
        description="Gaussian naive Bayes: independent normal features per class.",
        classifier=engine.GaussianNB,
        regressor=None,
    ),
)

CATALOG: Mapping[str, Method] = MappingProxyType(
    {method.name: method for method in (*_METHODS, *_BASE_LEARNERS)}
)


def get_method(name: str) -> Method | None:
    return CATALOG.get(name)
