"""Decision tree estimators: ``DecisionTreeClassifier`` and ``DecisionTreeRegressor``.

A depth-1 tree (``max_depth=1``) is a decision stump.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    Constraint,
    Interval,
    MappingValue,
    NoneValue,
    Options,
    RandomStateValue,
    SequenceValue,
)
from engine._targets import class_weight_per_row, encode_labels
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, ClassifierMixin, RegressorMixin, check_is_fitted
from engine.callbacks import Callback, ProgressEvent, notify
from engine.tree._binned import Binned, BinningPlan, check_binned, plan_binning
from engine.tree._binning import MAX_BINS, BinMapper, categorical_mask
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, TreeSpec, build_tree, resolve_max_features
from engine.tree.grow.limits import GrowthLimits

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor"]

MAX_FEATURES: list[Constraint] = [
    Interval("int", 1, None),
    Interval("real", 0.0, 1.0, closed="right"),
    Options(("sqrt", "log2")),
    NoneValue(),
]

TREE_CONSTRAINTS: dict[str, list[Constraint]] = {
    "splitter": [Options(("best", "random"))],
    "max_depth": [Interval("int", 1, None), NoneValue()],
    "min_samples_split": [Interval("int", 2, None), Interval("real", 0.0, 1.0, closed="right")],
    "min_samples_leaf": [Interval("int", 1, None), Interval("real", 0.0, 1.0, closed="neither")],
    "min_weight_fraction_leaf": [Interval("real", 0.0, 0.5)],
    "max_features": MAX_FEATURES,
    "max_leaf_nodes": [Interval("int", 2, None), NoneValue()],
    "min_impurity_decrease": [Interval("real", 0.0, None)],
    "categorical_features": [SequenceValue(), NoneValue()],
    "max_bins": [Interval("int", 2, MAX_BINS)],
    "random_state": [RandomStateValue()],
}


def resolve_limits(
    params: Any, n_samples: int, total_weight: float, n_features: int
) -> GrowthLimits:
    """Turn tree hyperparameters (possibly fractions) into absolute growth limits."""
    min_split = params.min_samples_split
    if isinstance(min_split, float):
        min_split = max(2, math.ceil(min_split * n_samples))
    min_leaf = params.min_samples_leaf
    if isinstance(min_leaf, float):
        min_leaf = max(1, math.ceil(min_leaf * n_samples))
    return GrowthLimits(
        max_depth=params.max_depth,
        min_samples_split=int(min_split),
        min_samples_leaf=int(min_leaf),
        min_weight_leaf=params.min_weight_fraction_leaf * total_weight,
        min_impurity_decrease=params.min_impurity_decrease,
        max_features=resolve_max_features(params.max_features, n_features),
        max_leaf_nodes=params.max_leaf_nodes,
    )


class BaseDecisionTree(BaseEstimator):
    """Shared fitting and prediction of single trees."""

    criterion: str
    splitter: str
    max_depth: int | None
    min_samples_split: int | float
    min_samples_leaf: int | float
    min_weight_fraction_leaf: float
    max_features: int | float | str | None
    max_leaf_nodes: int | None
    min_impurity_decrease: float
    categorical_features: Any
    max_bins: int
    random_state: Any
    tree_: Tree
    bin_mapper_: BinMapper
    n_features_in_: int

    _classification: ClassVar[bool]

    def _fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        callbacks: list[Callback] | None,
    ) -> None:
        self._start_fit()
        if isinstance(X, Binned):  # binned by the caller with the mapper of binning_plan
            n_features = X.shape[1]
            check_binned(
                X, self.max_bins, categorical_mask(self.categorical_features, n_features), "tree"
            )
            target, weights, n_classes = self._check_target(y, sample_weight, X.shape[0])
            _, tree_seed = resolve_seed_sequence(self.random_state).spawn(2)
            self._grow(X.mapper, X.codes, target, weights, n_classes, tree_seed, callbacks)
            return
        X = check_X(X)
        target, weights, n_classes = self._check_target(y, sample_weight, X.shape[0])
        binning_seed, tree_seed = resolve_seed_sequence(self.random_state).spawn(2)
        mapper, binned = self._bin(X, weights, int(binning_seed.generate_state(1)[0]))
        self._grow(mapper, binned, target, weights, n_classes, tree_seed, callbacks)

    def binning_plan(self, n_rows: int, n_features: int, sample_weight: Any = None) -> BinningPlan:
        """The binning ``fit`` on an ``n_rows`` × ``n_features`` matrix would make (see
        :mod:`engine.tree._binned`); ``fit(Binned(codes, plan.fit(X[plan.rows])), y)`` then
        grows the tree ``fit(X, y)`` grows. Needs an integer ``random_state``."""
        self._validate_params()
        binning_seed, _ = resolve_seed_sequence(self.random_state).spawn(2)
        mapper = BinMapper(self.max_bins, seed=int(binning_seed.generate_state(1)[0]))
        weights = check_sample_weight(sample_weight, n_rows)
        categorical = categorical_mask(self.categorical_features, n_features)
        return plan_binning(mapper, categorical, n_rows, weights > 0)

    def _fit_binned(
        self,
        mapper: BinMapper,
        binned: NDArray[np.unsignedinteger[Any]],
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
        *,
        threads: Executor | None = None,
        leaves: NDArray[np.intp] | None = None,
    ) -> None:
        """Fit on rows already binned by ``mapper``, a mapper shared with other trees.

        The tree grows exactly as :meth:`fit` would grow it had its own binning produced
        ``mapper`` (same validation, class handling and tree seed); only the bin edges come
        from the caller. Ensembles whose members are trees bin their training set once and
        fit every member here. The fitted tree keeps ``mapper`` itself (not a copy) and
        predicts on raw features like any other.

        Parameters
        ----------
        mapper : BinMapper
            Fitted with this tree's ``max_bins`` and ``categorical_features``.
        binned : ndarray of uint8 (``uint16`` for exact binning), shape (n_samples, n_features)
            ``mapper.transform`` of the training rows.
        y, sample_weight :
            As in :meth:`fit`.
        threads : Executor, optional
            Threads the tree's kernels may share (a boosting fit's ``n_jobs``).
        leaves : ndarray of intp, shape (n_samples,), optional
            Filled with each row's leaf where growth learnt it, −1 elsewhere (see
            :func:`engine.tree.grow.build.build_tree`).
        """
        self._start_fit()
        n_samples, n_features = binned.shape
        expected = categorical_mask(self.categorical_features, n_features)
        if mapper.max_bins != self.max_bins or not np.array_equal(mapper.is_categorical_, expected):
            raise ValueError(
                f"{type(self).__name__} cannot grow on bins made with other max_bins or "
                "categorical_features than its own."
            )
        target, weights, n_classes = self._check_target(y, sample_weight, n_samples)
        _, tree_seed = resolve_seed_sequence(self.random_state).spawn(2)
        self._grow(
            mapper, binned, target, weights, n_classes, tree_seed, callbacks, threads, leaves
        )

    def _start_fit(self) -> None:
        self._validate_params()
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)  # a failed refit must not leave the previous model behind

    def _check_target(
        self, y: Any, sample_weight: Any, n_samples: int
    ) -> tuple[NDArray[Any], NDArray[np.float64], int]:
        """Encoded target, row weights (× class weights) and the number of classes (0 for
        regression); sets ``classes_`` and ``n_classes_`` of a classifier."""
        target = check_target(y, n_samples, numeric=not self._classification)
        weights = check_sample_weight(sample_weight, n_samples)
        if not self._classification:
            return target, weights, 0
        self.classes_, target = encode_labels(target)
        self.n_classes_ = int(self.classes_.size)
        weights = weights * class_weight_per_row(
            getattr(self, "class_weight", None), target, self.classes_
        )
        return target, weights, self.n_classes_

    def _bin(
        self, X: NDArray[np.float64], weights: NDArray[np.float64], seed: int
    ) -> tuple[BinMapper, NDArray[np.unsignedinteger[Any]]]:
        """A BinMapper fitted to ``X`` with this tree's settings, and ``X`` binned by it."""
        mapper = BinMapper(self.max_bins, seed=seed)
        # Rows of zero weight take no part in the tree, so they must not place bin edges
        # either: a zero weight then means the same as leaving the row out.
        weighted_rows = X if weights.all() else X[weights > 0]
        mapper.fit(weighted_rows, categorical_mask(self.categorical_features, X.shape[1]))
        return mapper, mapper.transform(X)

    def _grow(
        self,
        mapper: BinMapper,
        binned: NDArray[np.unsignedinteger[Any]],
        target: NDArray[Any],
        weights: NDArray[np.float64],
        n_classes: int,
        tree_seed: np.random.SeedSequence,
        callbacks: list[Callback] | None,
        threads: Executor | None = None,
        leaves: NDArray[np.intp] | None = None,
    ) -> None:
        n_samples, n_features = binned.shape
        data = BinnedData.from_mapper(binned, target, mapper)
        limits = resolve_limits(self, n_samples, float(weights.sum()), n_features)
        spec = TreeSpec(
            criterion=self.criterion,  # type: ignore[arg-type]  # validated above
            random_splits=self.splitter == "random",
            limits=limits,
            n_classes=n_classes,
        )
        rng = np.random.default_rng(tree_seed)
        tree = build_tree(data, weights, spec, rng, threads=threads, leaves=leaves)
        # The callback may interrupt; only a fit it lets finish becomes this model.
        notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
        self.tree_ = tree
        self.bin_mapper_ = mapper
        self.n_features_in_ = n_features
        self.max_features_ = limits.max_features

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self, "tree_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        return self.bin_mapper_.encode_for_prediction(X)

    def apply(self, X: Any) -> NDArray[np.intp]:
        """Index of the leaf each sample lands in, shape (n_samples,)."""
        X = self._prepare(X)
        return self.tree_.apply(X)

    def get_depth(self) -> int:
        check_is_fitted(self, "tree_")
        return self.tree_.max_depth

    def get_n_leaves(self) -> int:
        check_is_fitted(self, "tree_")
        return self.tree_.n_leaves

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Mean decrease in impurity per feature, normalised to sum to one."""
        check_is_fitted(self, "tree_")
        return self.tree_.feature_importances()


class DecisionTreeClassifier(ClassifierMixin, BaseDecisionTree):
    """A CART classification tree grown on quantile-binned features.

    Parameters
    ----------
    criterion : {"gini", "entropy", "log_loss"}
        Impurity measure; entropy (alias log_loss) gives information gain.
    splitter : {"best", "random"}
        "random" draws one threshold per candidate feature uniformly in the node's value
        range (extremely randomised trees).
    max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf,
    max_features, max_leaf_nodes, min_impurity_decrease :
        As in scikit-learn. ``max_features`` candidates are drawn afresh at every split;
        ``max_leaf_nodes`` grows the tree best-first.
    class_weight : "balanced", mapping or None
    categorical_features : indices, boolean mask or None
        Columns holding integer category codes; their splits are best binary partitions of
        the categories, and unseen categories follow the missing-value direction.
    max_bins : int
        Bins per numeric feature (≤ 255); a further bin holds missing values (NaN).
    random_state : int, Generator or None
    """

    _classification: ClassVar[bool] = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **TREE_CONSTRAINTS,
        "criterion": [Options(("gini", "entropy", "log_loss"))],
        "class_weight": [Options(("balanced",)), MappingValue(), NoneValue()],
    }

    def __init__(
        self,
        *,
        criterion: str = "gini",
        splitter: str = "best",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = None,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        class_weight: Any = None,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        random_state: Any = None,
    ) -> None:
        self.criterion = criterion
        self.splitter = splitter
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.class_weight = class_weight
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> DecisionTreeClassifier:
        self._fit(X, y, sample_weight, callbacks)
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities (leaf class proportions), shape (n_samples, n_classes)."""
        X = self._prepare(X)
        return self.tree_.predict(X)

    def predict(self, X: Any) -> NDArray[Any]:
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]


class DecisionTreeRegressor(RegressorMixin, BaseDecisionTree):
    """A CART regression tree (squared error) grown on quantile-binned features.

    Parameters are those of :class:`DecisionTreeClassifier` without ``class_weight``;
    ``criterion`` is "squared_error".
    """

    _classification: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **TREE_CONSTRAINTS,
        "criterion": [Options(("squared_error",))],
    }

    def __init__(
        self,
        *,
        criterion: str = "squared_error",
        splitter: str = "best",
        max_depth: int | None = None,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_features: int | float | str | None = None,
        max_leaf_nodes: int | None = None,
        min_impurity_decrease: float = 0.0,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        random_state: Any = None,
    ) -> None:
        self.criterion = criterion
        self.splitter = splitter
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> DecisionTreeRegressor:
        self._fit(X, y, sample_weight, callbacks)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        X = self._prepare(X)
        return self.tree_.predict(X)[:, 0]
