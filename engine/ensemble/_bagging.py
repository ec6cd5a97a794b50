"""Bagging (bootstrap aggregating; Breiman 1996): B members, each fitted on a bootstrap sample.

Members may also draw a random subspace of features (``max_features``, optionally with
replacement: Ho 1998's random subspace method) and a smaller sample (``max_samples``,
m' ≤ m). Classification combines members by averaging their probabilities
(``voting="soft"``) or by majority vote (``"hard"``); regression averages.

When the member is an engine decision tree, bagging takes the forest path: one binned
matrix shared with all workers. Any other engine estimator is fitted on its rows and
feature columns of the raw matrix (with the bootstrap counts as ``sample_weight`` when it
accepts weights, by repeating rows otherwise).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, EstimatorValue, Interval, NoneValue, Options
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import ClassifierMixin, RegressorMixin, clone
from engine.callbacks import Callback
from engine.ensemble._forest import ENSEMBLE_CONSTRAINTS, finish_fit, prepare_input
from engine.ensemble._sampling import MemberSampling, draw_member, member_seeds
from engine.ensemble._tree_ensemble import BaseTreeEnsemble, _MemberResult
from engine.explain._background import background_sample
from engine.parallel import SharedData
from engine.tree._binning import categorical_mask
from engine.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor

__all__ = ["BaggingClassifier", "BaggingRegressor"]

BAGGING_CONSTRAINTS: dict[str, list[Constraint]] = {
    **{k: v for k, v in ENSEMBLE_CONSTRAINTS.items() if k != "max_samples"},
    "estimator": [EstimatorValue(), NoneValue()],
    "max_samples": [Interval("int", 1, None), Interval("real", 0.0, 1.0, closed="right")],
    "max_features": [Interval("int", 1, None), Interval("real", 0.0, 1.0, closed="right")],
    "bootstrap_features": [ENSEMBLE_CONSTRAINTS["bootstrap"][0]],
}


@dataclass
class EstimatorMember:
    """A fitted estimator seen through the members' common ``predict`` interface.

    ``predict`` returns shape (n, n_outputs): class probabilities over *all* classes of the
    ensemble (a member may have seen only some of them), or the regression prediction.
    """

    estimator: Any
    features: NDArray[np.int64] | None
    n_classes: int

    def predict(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        columns = X if self.features is None else X[:, self.features]
        if not self.n_classes:
            return np.asarray(self.estimator.predict(columns), dtype=np.float64)[:, None]
        seen = np.asarray(self.estimator.classes_, dtype=np.int64)
        output = np.zeros((X.shape[0], self.n_classes))
        if hasattr(self.estimator, "predict_proba"):
            output[:, seen] = self.estimator.predict_proba(columns)
        else:
            predicted = np.asarray(self.estimator.predict(columns), dtype=np.int64)
            output[np.arange(X.shape[0]), predicted] = 1.0
        return output


@dataclass(frozen=True)
class _EstimatorTask:
    seed: int
    estimator: Any
    sampling: MemberSampling
    n_classes: int
    out_of_bag: bool


def _accepts_sample_weight(estimator: Any) -> bool:
    return "sample_weight" in inspect.signature(estimator.fit).parameters


def _fit_estimator_member(shared: SharedData, task: _EstimatorTask) -> _MemberResult:
    """Fit one generic member on its rows and features (runs in a worker)."""
    rng = np.random.default_rng(task.seed)
    counts, features = draw_member(rng, task.sampling, task.seed)
    X, target, weights = shared["X"], shared["target"], shared["sample_weight"]
    estimator = clone(task.estimator)
    params = estimator.get_params(deep=False)
    if "random_state" in params:
        estimator.set_params(random_state=int(rng.integers(2**31)))
    if features is not None and params.get("categorical_features") is not None:
        # The member sees only its subspace: its categorical columns, renumbered.
        categorical = categorical_mask(params["categorical_features"], X.shape[1])
        estimator.set_params(categorical_features=np.flatnonzero(categorical[features]).tolist())
    rows = np.flatnonzero(counts)
    if not _accepts_sample_weight(estimator):
        rows = np.repeat(rows, counts[rows])
        member_weights = None
    else:
        member_weights = weights[rows] * counts[rows]
    columns = X[rows] if features is None else X[np.ix_(rows, features)]
    if member_weights is None:
        estimator.fit(columns, target[rows])
    else:
        estimator.fit(columns, target[rows], sample_weight=member_weights)
    member = EstimatorMember(estimator, features, task.n_classes)
    if not task.out_of_bag:
        return _MemberResult(member, features, None, None)
    oob_rows = np.flatnonzero(counts == 0)
    return _MemberResult(member, features, oob_rows, member.predict(X[oob_rows]))


class BaseBagging(BaseTreeEnsemble):
    estimator: Any
    max_samples: Any
    max_features: Any
    bootstrap: bool
    bootstrap_features: bool

    def _default_tree(self) -> Any:
        raise NotImplementedError

    def _member_prototype(self) -> Any:
        return self._default_tree() if self.estimator is None else self.estimator

    def _tree_settings(self) -> Any:
        return self._member_prototype()

    def _sampling_settings(self) -> tuple[Any, bool, Any, bool]:
        return self.max_samples, self.bootstrap, self.max_features, self.bootstrap_features

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        return prepare_input(self, X)

    def _bagging_fit(
        self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None
    ) -> None:
        prototype = self._member_prototype()
        if isinstance(prototype, DecisionTreeClassifier | DecisionTreeRegressor):
            self._fit(X, y, sample_weight, callbacks)
            finish_fit(self)
            return
        self._validate_params()
        self._forget_fit()
        X = check_X(X)
        n_samples, n_features = X.shape
        target = check_target(y, n_samples, numeric=not self._classification)
        weights = check_sample_weight(sample_weight, n_samples)
        n_classes = 0
        if self._classification:
            self.classes_, target = encode_labels(target)
            self.n_classes_ = n_classes = int(self.classes_.size)
        sampling = self._resolve_sampling(n_samples, n_features)
        track_oob = self.oob_score or self.early_stopping == "oob"
        if track_oob and not sampling.bootstrap and sampling.n_draws == n_samples:
            raise ValueError("Out-of-bag estimates need bootstrap=True or max_samples < 1.")
        seeds = member_seeds(resolve_seed_sequence(self.random_state), self.n_estimators)
        tasks = [
            _EstimatorTask(int(seed), prototype, sampling, n_classes, track_oob) for seed in seeds
        ]
        shared = {"X": X, "target": target, "sample_weight": weights}
        self._fit_members(_fit_estimator_member, shared, tasks, target, seeds, callbacks, track_oob)
        self.n_features_in_ = n_features
        self._sampling = sampling
        self.background_ = background_sample(X, weights)  # for sampled explanations

    @property
    def estimators_(self) -> list[Any]:
        """The fitted members (generic bagging) or the member trees."""
        members = self.members_
        return [getattr(member, "estimator", member) for member in members]


class BaggingClassifier(ClassifierMixin, BaseBagging):
    """Bagging classifier over any engine estimator (default: a full decision tree).

    Parameters
    ----------
    estimator : engine estimator or None
        The member learner; None means ``DecisionTreeClassifier()``.
    n_estimators : int
    max_samples : int or float
        Rows drawn per member (m' ≤ m).
    max_features : int or float
        Features per member (random subspace).
    bootstrap, bootstrap_features : bool
        Draw rows / features with replacement.
    oob_score : bool
    voting : {"soft", "hard"}
        Average probabilities, or majority vote of the members' predicted classes.
    early_stopping, n_iter_no_change, tol : OOB early stopping, as in random forests.
    n_jobs, random_state :
    """

    _classification = True

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **BAGGING_CONSTRAINTS,
        "voting": [Options(("soft", "hard"))],
    }

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 10,
        *,
        max_samples: int | float = 1.0,
        max_features: int | float = 1.0,
        bootstrap: bool = True,
        bootstrap_features: bool = False,
        oob_score: bool = False,
        voting: str = "soft",
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.bootstrap_features = bootstrap_features
        self.oob_score = oob_score
        self.voting = voting
        self.early_stopping = early_stopping
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state

    @property
    def _hard_voting(self) -> bool:  # type: ignore[override]
        return self.voting == "hard"

    def _default_tree(self) -> Any:
        return DecisionTreeClassifier()

    def _class_weight(self) -> Any:
        return getattr(self._member_prototype(), "class_weight", None)

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> BaggingClassifier:
        self._bagging_fit(X, y, sample_weight, callbacks)
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Averaged member probabilities (soft) or vote shares (hard), (n_samples, n_classes)."""
        return self._mean_member_output(self._prepare(X))

    def predict(self, X: Any) -> NDArray[Any]:
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]


class BaggingRegressor(RegressorMixin, BaseBagging):
    """Bagging regressor over any engine estimator (default: a full regression tree).

    Parameters as :class:`BaggingClassifier` without ``voting``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = BAGGING_CONSTRAINTS

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 10,
        *,
        max_samples: int | float = 1.0,
        max_features: int | float = 1.0,
        bootstrap: bool = True,
        bootstrap_features: bool = False,
        oob_score: bool = False,
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.bootstrap_features = bootstrap_features
        self.oob_score = oob_score
        self.early_stopping = early_stopping
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _default_tree(self) -> Any:
        return DecisionTreeRegressor()

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> BaggingRegressor:
        self._bagging_fit(X, y, sample_weight, callbacks)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        return self._mean_member_output(self._prepare(X))[:, 0]
