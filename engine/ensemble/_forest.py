"""Random forests and extremely randomised trees.

Random forest (Breiman 2001): B trees, each grown on a bootstrap sample, each split choosing
the best of ``m`` features drawn at random; ``m = ⌊√p⌋`` for classification and ``⌊p/3⌋``
for regression by default, the defaults Hastie, Tibshirani and Friedman (2009, §15.3)
recommend. Extra trees (Geurts, Ernst and Wehenkel 2006) draw the threshold of each candidate
feature at random too, and use the whole sample by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, Interval, MappingValue, NoneValue, Options
from engine._validation import check_X
from engine.base import ClassifierMixin, RegressorMixin, check_is_fitted
from engine.callbacks import Callback
from engine.ensemble._few_rows import few_rows_mean_output
from engine.ensemble._tree_ensemble import BaseTreeEnsemble
from engine.tree._binning import MAX_BINS
from engine.tree._classes import TREE_CONSTRAINTS

if TYPE_CHECKING:
    from engine.parallel._parts import DataPart, KeptRows, PartReader

__all__ = [
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]

ENSEMBLE_CONSTRAINTS: dict[str, list[Constraint]] = {
    "n_estimators": [Interval("int", 1, None)],
    "bootstrap": [Boolean()],
    "oob_score": [Boolean()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
    "max_samples": [
        Interval("int", 1, None),
        Interval("real", 0.0, 1.0, closed="right"),
        NoneValue(),
    ],
    "early_stopping": [Options(("oob",)), NoneValue()],
    "n_iter_no_change": [Interval("int", 1, None)],
    "tol": [Interval("real", 0.0, None)],
}

FOREST_CONSTRAINTS: dict[str, list[Constraint]] = {
    **{k: v for k, v in TREE_CONSTRAINTS.items() if k != "splitter"},
    **ENSEMBLE_CONSTRAINTS,
}


def prepare_input(ensemble: BaseTreeEnsemble, X: Any) -> NDArray[np.float64]:
    """``X`` validated against the fitted ensemble and encoded for its members.

    As ``BaseTreeEnsemble._prepare``, but naming the estimator in the feature-count error,
    as scikit-learn's tooling expects; the override can go once that method does so itself.
    """
    check_is_fitted(ensemble, "members_")
    X = check_X(X, n_features=ensemble.n_features_in_, estimator=type(ensemble).__name__)
    mapper = getattr(ensemble, "bin_mapper_", None)
    return X if mapper is None else mapper.encode_for_prediction(X)


def finish_fit(ensemble: BaseTreeEnsemble) -> None:
    """Build the packed prediction arrays now, so that predicting never changes the model."""
    ensemble._packed()


class BaseForest(BaseTreeEnsemble):
    """Forest hyperparameters live on the forest itself; each tree reads them from there."""

    splitter = "best"
    max_samples: Any
    bootstrap: bool

    def _tree_settings(self) -> Any:
        return self

    def _sampling_settings(self) -> tuple[Any, bool, Any, bool]:
        return self.max_samples, self.bootstrap, None, False

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        return prepare_input(self, X)

    def out_of_core_refusals(self) -> list[str]:
        """The settings that keep :meth:`fit_parts` from fitting out of core on a cluster
        (it raises ValueError naming them); empty when it can."""
        from engine.ensemble._forest_parts import forest_refusals

        self._validate_params()
        return forest_refusals(self)

    def fit_parts(
        self,
        parts: Sequence[DataPart],
        read: PartReader,
        callbacks: list[Callback] | None = None,
        keep: KeptRows | None = None,
    ) -> Any:
        """Fit on a table held as parts that ``read`` opens, out of core on a cluster.

        As :meth:`engine.XGBoostRegressor.fit_parts`: inside :func:`engine.parallel_backend`
        the Dask workers read, bin and keep the rows, and this process never holds them;
        otherwise the parts are read here and :meth:`fit` runs. Either way the forest is the
        one ``fit`` grows on the whole table with the same seed (up to the order of
        floating-point additions; see :mod:`engine.ensemble._forest_parts`), except that on
        a cluster rows of weight 0 take no part at all: the forest is the one ``fit`` grows
        on the rows of positive weight (a validation split can ride along with weight 0).
        """
        from engine.ensemble._forest_parts import fit_parts

        fit_parts(self, parts, read, callbacks, keep)
        return self


class _ForestClassifier(ClassifierMixin, BaseForest):
    _classification = True
    class_weight: Any

    def _class_weight(self) -> Any:
        return self.class_weight

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> Any:
        self._fit(X, y, sample_weight, callbacks)
        finish_fit(self)
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Mean of the members' class probabilities, shape (n_samples, n_classes)."""
        few = few_rows_mean_output(self, X)
        return self._mean_member_output(self._prepare(X)) if few is None else few

    def predict(self, X: Any) -> NDArray[Any]:
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]


class _ForestRegressor(RegressorMixin, BaseForest):
    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> Any:
        self._fit(X, y, sample_weight, callbacks)
        finish_fit(self)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Mean of the members' predictions, shape (n_samples,)."""
        few = few_rows_mean_output(self, X)
        return (self._mean_member_output(self._prepare(X)) if few is None else few)[:, 0]


CLASSIFIER_CONSTRAINTS: dict[str, list[Constraint]] = {
    **FOREST_CONSTRAINTS,
    "criterion": [Options(("gini", "entropy", "log_loss"))],
    "class_weight": [Options(("balanced", "balanced_subsample")), MappingValue(), NoneValue()],
}
REGRESSOR_CONSTRAINTS: dict[str, list[Constraint]] = {
    **FOREST_CONSTRAINTS,
    "criterion": [Options(("squared_error",))],
}


class RandomForestClassifier(_ForestClassifier):
    """Random forest classifier (Breiman 2001) on histogram trees.

    Parameters
    ----------
    n_estimators : int
        Maximum number of trees (fewer when OOB early stopping ends training).
    criterion, max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf,
    max_leaf_nodes, min_impurity_decrease, categorical_features, max_bins :
        Tree hyperparameters, see :class:`engine.DecisionTreeClassifier`.
    max_features : int, float, "sqrt", "log2" or None
        Features drawn at every split; default ``"sqrt"``.
    bootstrap : bool
        Grow each tree on a bootstrap sample (default) or on the whole sample.
    oob_score : bool
        Compute ``oob_score_`` (accuracy) and ``oob_decision_function_``.
    max_samples : int, float or None
        Rows drawn per tree (m' ≤ m); default all.
    class_weight : "balanced", "balanced_subsample", mapping or None
    early_stopping : "oob" or None
        Stop adding trees once the OOB error has not improved by ``tol`` over the last
        ``n_iter_no_change`` trees (Hastie, Tibshirani and Friedman 2009, §15.3.1: the OOB
        error tracks cross-validation, so a forest can be grown until it stabilises).
    n_jobs : int or None
        Worker processes (-1: all cores); results do not depend on it.
    random_state : int, Generator or None

    Attributes
    ----------
    trees_ : list of Tree
    oob_curve_ : ndarray of shape (n_estimators_,)
        OOB misclassification rate after 1..B trees (when OOB is tracked).
    oob_score_, oob_decision_function_, feature_importances_, n_estimators_
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = CLASSIFIER_CONSTRAINTS

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "gini",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = "sqrt",
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = True,
        oob_score: bool = False,
        max_samples: int | float | None = None,
        class_weight: Any = None,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.class_weight = class_weight
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.early_stopping = early_stopping
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state


class RandomForestRegressor(_ForestRegressor):
    """Random forest regressor; ``max_features`` defaults to ⌊p/3⌋ (Hastie et al. 2009, §15.3).

    Parameters as :class:`RandomForestClassifier` without ``class_weight``; ``oob_score_``
    is R² and ``oob_prediction_`` holds the OOB predictions; ``oob_curve_`` the OOB MSE.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = REGRESSOR_CONSTRAINTS

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "squared_error",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = 1.0 / 3.0,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = True,
        oob_score: bool = False,
        max_samples: int | float | None = None,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.max_samples = max_samples
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.early_stopping = early_stopping
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state


class ExtraTreesClassifier(RandomForestClassifier):
    """Extremely randomised trees (Geurts et al. 2006): random thresholds, no bootstrap.

    Parameters as :class:`RandomForestClassifier`; ``bootstrap`` defaults to False.
    """

    _random_splits = True

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "gini",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = "sqrt",
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = False,
        oob_score: bool = False,
        max_samples: int | float | None = None,
        class_weight: Any = None,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        super().__init__(
            n_estimators,
            criterion=criterion,
            max_depth=max_depth,
            min_samples_split=min_samples_split,
            min_samples_leaf=min_samples_leaf,
            min_weight_fraction_leaf=min_weight_fraction_leaf,
            max_features=max_features,
            max_leaf_nodes=max_leaf_nodes,
            min_impurity_decrease=min_impurity_decrease,
            bootstrap=bootstrap,
            oob_score=oob_score,
            max_samples=max_samples,
            class_weight=class_weight,
            categorical_features=categorical_features,
            max_bins=max_bins,
            early_stopping=early_stopping,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            n_jobs=n_jobs,
            random_state=random_state,
        )


class ExtraTreesRegressor(RandomForestRegressor):
    """Extremely randomised regression trees; all features per split by default.

    Parameters as :class:`RandomForestRegressor`; ``bootstrap`` defaults to False and
    ``max_features`` to 1.0, the setting Geurts et al. recommend for regression.
    """

    _random_splits = True

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "squared_error",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = 1.0,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        bootstrap: bool = False,
        oob_score: bool = False,
        max_samples: int | float | None = None,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        early_stopping: str | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        super().__init__(
            n_estimators,
            criterion=criterion,
            max_depth=max_depth,
            min_samples_split=min_samples_split,
            min_samples_leaf=min_samples_leaf,
            min_weight_fraction_leaf=min_weight_fraction_leaf,
            max_features=max_features,
            max_leaf_nodes=max_leaf_nodes,
            min_impurity_decrease=min_impurity_decrease,
            bootstrap=bootstrap,
            oob_score=oob_score,
            max_samples=max_samples,
            categorical_features=categorical_features,
            max_bins=max_bins,
            early_stopping=early_stopping,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            n_jobs=n_jobs,
            random_state=random_state,
        )
