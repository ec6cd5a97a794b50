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
    # Parameters holding a list of named learners, [{"name", "method", "params"}, ...].
    learner_lists: tuple[str, ...] = ()
    # Learners that see features the method derives (stacking's out-of-fold predictions), not
    # the dataset's columns: they get no categorical features.
    derived_input_learners: tuple[str, ...] = ()
    # Parameters the service fixes for this method and a job cannot set, with their values.
    fixed_params: Mapping[str, Any] = field(default_factory=dict)
    # What a nested-learner parameter left at None stands for, per task, as
    # {"method", "params"} (or a list of named learners for a ``learner_lists`` parameter);
    # the service always passes it explicitly, so the dataset's categorical features reach the
    # members and resolved params show the learner.
    default_learners: Mapping[str, Mapping[Task, Any]] = field(default_factory=dict)

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


def _named(name: str, method: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "method": method, "params": params}


# What a combiner combines when a job names no members: three different kinds of learner, so
# their errors differ (the point of combining), each good on its own.
_DEFAULT_MEMBERS: Mapping[Task, list[dict[str, Any]]] = {
    Task.CLASSIFICATION: [
        _named("forest", "random_forest", n_estimators=100),
        _named("boosting", "gradient_boosting"),
        _named("logistic", "logistic_regression"),
    ],
    Task.REGRESSION: [
        _named("forest", "random_forest", n_estimators=100),
        _named("boosting", "gradient_boosting"),
        _named("ridge", "ridge"),
    ],
}
_CLASSIFIER_MEMBERS = {Task.CLASSIFICATION: _DEFAULT_MEMBERS[Task.CLASSIFICATION]}


def _label_fusion(name: str, description: str, classifier: type[Any]) -> Method:
    return Method(
        name=name,
        progress_unit="model",
        description=description,
        classifier=classifier,
        regressor=None,
        learner_lists=("estimators",),
        default_learners={"estimators": _CLASSIFIER_MEMBERS},
        fixed_params={"prefit": False},
    )


_COMBINERS = (
    Method(
        name="voting",
        progress_unit="model",
        description=(
            "Majority (hard) or probability-averaging (soft) vote of different learners, "
            "optionally weighted, e.g. by out-of-fold log-odds of their accuracy."
        ),
        classifier=engine.VotingClassifier,
        regressor=engine.VotingRegressor,
        learner_lists=("estimators",),
        default_learners={"estimators": _DEFAULT_MEMBERS},
    ),
    Method(
        name="stacking",
        progress_unit="model",
        description=(
            "Stacked generalisation: a final learner trained on the members' out-of-fold "
            "predictions (k folds), the members then refitted on all rows."
        ),
        classifier=engine.StackingClassifier,
        regressor=engine.StackingRegressor,
        learner_lists=("estimators",),
        derived_input_learners=("final_estimator",),
        default_learners={
            "estimators": _DEFAULT_MEMBERS,
            "final_estimator": {
                Task.CLASSIFICATION: {"method": "logistic_regression", "params": {}},
                Task.REGRESSION: {"method": "ridge", "params": {}},
            },
        },
    ),
    Method(
        name="grading",
        progress_unit="model",
        description=(
            "Grading: per member, a grader learns from the features where that member is "
            "right; the members graded right vote."
        ),
        classifier=engine.GradingClassifier,
        regressor=None,
        learner_lists=("estimators",),
        default_learners={
            "estimators": _CLASSIFIER_MEMBERS,
            "grader": {
                Task.CLASSIFICATION: {"method": "decision_tree", "params": {"min_samples_leaf": 5}}
            },
        },
    ),
    _label_fusion(
        "naive_bayes_combiner",
        "Naive Bayes fusion of the members' labels through their out-of-fold confusion matrices.",
        engine.NaiveBayesCombiner,
    ),
    _label_fusion(
        "bks_combiner",
        "Behaviour knowledge space: the most frequent true class of each combination of "
        "member labels, falling back to the majority vote.",
        engine.BKSCombiner,
    ),
    _label_fusion(
        "wernecke_combiner",
        "Wernecke's method: behaviour knowledge space cells trusted only when their "
        "confidence interval says so.",
        engine.WerneckeCombiner,
    ),
    _label_fusion(
        "dependence_tree_combiner",
        "First-order dependence tree (Chow-Liu) over the members' labels, per class.",
        engine.DependenceTreeCombiner,
    ),
    _label_fusion(
        "svd_combiner",
        "SVD combination: correspondence analysis of the members' decision profiles, "
        "nearest class template.",
        engine.SVDCombiner,
    ),
    Method(
        name="mixture_of_experts",
        dense_input=True,
        description=(
            "Mixture of experts: a softmax gate over the inputs weighting experts, trained by EM "
            "(default experts: logistic / linear regression)."
        ),
        classifier=engine.MixtureOfExpertsClassifier,
        regressor=engine.MixtureOfExpertsRegressor,
        default_learners={
            "estimator": {
                Task.CLASSIFICATION: {"method": "logistic_regression", "params": {}},
                Task.REGRESSION: {"method": "linear_regression", "params": {}},
            },
        },
    ),
)

CATALOG: Mapping[str, Method] = MappingProxyType(
    {method.name: method for method in (*_METHODS, *_BASE_LEARNERS, *_COMBINERS)}
)


def get_method(name: str) -> Method | None:
    return CATALOG.get(name)
