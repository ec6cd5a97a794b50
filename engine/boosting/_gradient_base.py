"""Fitting and raw prediction shared by the gradient boosting classifier and regressor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue
from engine._threads import kernel_threads
from engine._validation import (
    check_sample_weight,
    check_target,
    check_X,
    resolve_seed_sequence,
    unit_weights,
)
from engine.base import BaseEstimator, check_is_fitted
from engine.boosting._losses import Loss, get_loss
from engine.boosting._packed_stages import PackedStagesMixin
from engine.boosting._stages import TrainingSet, ValidationSet, fit_stages, holdout_split
from engine.callbacks import Callback
from engine.parallel import resolve_n_jobs
from engine.tree._binned import Binned, BinningPlan, check_binned, plan_binning
from engine.tree._binning import BinMapper, categorical_mask
from engine.tree._classes import TREE_CONSTRAINTS, resolve_limits
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, TreeSpec

__all__ = ["BOOSTING_CONSTRAINTS", "BaseGradientBoosting"]

FloatArray = NDArray[np.float64]

# (row, tree) pairs descended at once when predicting; bounds the temporary arrays.
PREDICT_PAIRS = 1 << 21

BOOSTING_CONSTRAINTS: dict[str, list[Constraint]] = {
    **{name: c for name, c in TREE_CONSTRAINTS.items() if name != "splitter"},
    "learning_rate": [Interval("real", 0.0, None, closed="neither")],
    "n_estimators": [Interval("int", 1, None)],
    "subsample": [Interval("real", 0.0, 1.0, closed="right")],
    "alpha": [Interval("real", 0.0, 1.0, closed="neither")],
    "validation_fraction": [Interval("real", 0.0, 1.0, closed="neither")],
    "n_iter_no_change": [Interval("int", 1, None), NoneValue()],
    "tol": [Interval("real", 0.0, None)],
    "n_jobs": [Interval("int", None, None), NoneValue()],
}


class BaseGradientBoosting(PackedStagesMixin, BaseEstimator):
    """Fitting and raw prediction shared by the classifier and the regressor."""

    loss: str
    learning_rate: float
    n_estimators: int
    subsample: float
    min_samples_split: int | float
    min_samples_leaf: int | float
    min_weight_fraction_leaf: float
    max_depth: int | None
    min_impurity_decrease: float
    max_features: int | float | str | None
    max_leaf_nodes: int | None
    alpha: float
    validation_fraction: float
    n_iter_no_change: int | None
    tol: float
    categorical_features: Any
    max_bins: int
    random_state: Any
    n_jobs: int | None = None  # models saved before it existed load with this default

    estimators_: list[list[Tree]]
    init_: float | FloatArray
    bin_mapper_: BinMapper
    n_features_in_: int
    n_trees_per_iteration_: int

    _classification: ClassVar[bool] = False
    # n_jobs are threads inside each tree (engine._threads), not worker processes.
    n_jobs_kind: ClassVar[str] = "threads"

    # --- fitting ---------------------------------------------------------------------------

    def _fit(self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None) -> None:
        self._validate_params()
        for name in [key for key in vars(self) if key.endswith("_") and not key.startswith("_")]:
            delattr(self, name)  # a refit (or an interrupted one) never mixes two models
        self._forget_packed()
        given = X if isinstance(X, Binned) else None
        if given is None:
            X = check_X(X, estimator=type(self).__name__)
        elif self.n_iter_no_change is not None:
            raise ValueError(
                f"{type(self).__name__}: early stopping (n_iter_no_change) holds out rows of "
                "the values themselves; fit on X rather than on Binned codes."
            )
        target = check_target(y, X.shape[0], numeric=not self._classification)
        # No weights given: a stride-0 view of 1.0 (engine._validation.unit_weights), not an
        # array of ones held through every stage (12 MiB of 1.6 M rows).
        weights = (
            unit_weights(X.shape[0])
            if sample_weight is None
            else check_sample_weight(sample_weight, X.shape[0])
        )
        codes, n_classes, classes = self._encode_target(target)
        loss = get_loss(self.loss, n_classes=n_classes, alpha=self.alpha)
        y_loss = self._loss_target(target, codes, loss)

        root = resolve_seed_sequence(self.random_state)
        binning_seed, split_seed, subsample_seed, tree_seed = root.spawn(4)
        validation = None
        if given is not None:  # binned by the caller with the mapper of binning_plan
            check_binned(
                given,
                self.max_bins,
                categorical_mask(self.categorical_features, X.shape[1]),
                type(self).__name__,
            )
            mapper = given.mapper
            y_train, w_train = y_loss, weights
            data = BinnedData.from_mapper(given.codes, y_train, mapper)
            train = TrainingSet(data, None, y_train, w_train, mapper)
        else:
            validation_rows = None
            if self.n_iter_no_change is not None:
                validation_rows = holdout_split(
                    X.shape[0],
                    self.validation_fraction,
                    np.random.default_rng(split_seed),
                    codes,
                )
            train_rows = None if validation_rows is None else ~validation_rows
            X_train, y_train, w_train = _rows(train_rows, X, y_loss, weights)
            mapper = self._mapper(binning_seed)
            weighted = X_train if w_train.all() else X_train[w_train > 0]
            mapper.fit(weighted, categorical_mask(self.categorical_features, X.shape[1]))
            data = BinnedData.from_mapper(mapper.transform(X_train), y_train, mapper)
            train = TrainingSet(data, mapper.encode_for_prediction(X_train), y_train, w_train)
            if validation_rows is not None:
                X_val, y_val, w_val = _rows(validation_rows, X, y_loss, weights)
                validation = ValidationSet(mapper.encode_for_prediction(X_val), y_val, w_val)
        # The class indices (8 bytes a row) served the holdout's stratification only; y_loss
        # holds what the stages learn from.
        del codes

        limits = resolve_limits(self, y_train.shape[0], float(w_train.sum()), X.shape[1])
        spec = TreeSpec(criterion="squared_error", random_splits=False, limits=limits, n_classes=0)
        init_raw = loss.init_raw(y_train, w_train)
        with kernel_threads(self.n_jobs) as threads:
            result = fit_stages(
                train,
                validation,
                loss,
                spec,
                self,
                init_raw,
                np.random.default_rng(subsample_seed),
                np.random.default_rng(tree_seed),
                callbacks,
                type(self).__name__,
                threads,
            )

        if classes is not None:
            self.classes_ = classes
            self.n_classes_ = n_classes
        self.n_features_in_ = X.shape[1]
        self.n_trees_per_iteration_ = loss.n_trees
        self.max_features_ = limits.max_features
        self.bin_mapper_ = mapper
        self.init_ = float(init_raw[0]) if loss.n_trees == 1 else init_raw
        self.estimators_ = result.estimators
        self.n_estimators_ = len(result.estimators)
        self._packed()  # built now, so predicting never changes the fitted model's state
        self.train_score_ = np.array(result.train_score)
        if validation is not None:
            self.validation_score_ = np.array(result.validation_score)
        if self.subsample < 1.0:
            self.oob_scores_ = np.array(result.oob_scores)
            self.oob_improvement_ = np.array(result.oob_improvement)
            self.oob_score_ = float(self.oob_scores_[-1])

    def _mapper(self, binning_seed: np.random.SeedSequence) -> BinMapper:
        return BinMapper(self.max_bins, seed=int(binning_seed.generate_state(1)[0]))

    def binning_plan(self, n_rows: int, n_features: int, sample_weight: Any = None) -> BinningPlan:
        """The binning ``fit`` on an ``n_rows`` × ``n_features`` matrix would make (see
        :mod:`engine.tree._binned`); ``fit(Binned(codes, plan.fit(X[plan.rows])), y)`` then
        grows the stages ``fit(X, y)`` grows. Needs an integer ``random_state``, and no early
        stopping (its holdout is drawn from the rows before they are binned)."""
        self._validate_params()
        binning_seed = resolve_seed_sequence(self.random_state).spawn(4)[0]
        weights = check_sample_weight(sample_weight, n_rows)
        categorical = categorical_mask(self.categorical_features, n_features)
        return plan_binning(self._mapper(binning_seed), categorical, n_rows, weights > 0)

    def _encode_target(self, target: NDArray[Any]) -> tuple[Any, int, Any]:
        return None, 0, None

    def _loss_target(self, target: NDArray[Any], codes: Any, loss: Loss) -> FloatArray:
        return np.asarray(target, dtype=np.float64)

    # --- raw prediction --------------------------------------------------------------------

    def _prepare(self, X: Any) -> FloatArray:
        check_is_fitted(self, "estimators_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        return self.bin_mapper_.encode_for_prediction(X)

    def _init_raw(self, n_samples: int) -> FloatArray:
        init = np.atleast_1d(np.asarray(self.init_, dtype=np.float64))
        return np.tile(init, (n_samples, 1))

    def _raw_predict(self, X: Any) -> FloatArray:
        """F(x) for every row, shape (n_samples, K)."""
        encoded = self._prepare(X)
        raw = self._init_raw(encoded.shape[0])
        if not self.estimators_:
            return raw
        batch = max(1, PREDICT_PAIRS // len(self.estimators_))
        n_threads = resolve_n_jobs(self.n_jobs)
        for start in range(0, encoded.shape[0], batch):
            rows = encoded[start : start + batch]
            for k, packed in enumerate(self._packed()):
                raw[start : start + batch, k] += (
                    self.learning_rate * packed.leaf_value_sum(rows, n_threads)[:, 0]
                )
        return raw

    def _staged_raw_predict(self, X: Any) -> Iterator[FloatArray]:
        """F_m(x) after each stage m = 1..n_estimators_, each of shape (n_samples, K)."""
        encoded = self._prepare(X)
        raw = self._init_raw(encoded.shape[0])
        for stage in self.estimators_:
            for k, tree in enumerate(stage):
                raw[:, k] += self.learning_rate * tree.values[tree.apply(encoded), 0]
            yield raw.copy()

    def apply(self, X: Any) -> NDArray[np.intp]:
        """Leaf index of every row in every tree, shape (n_samples, n_estimators_, K)."""
        encoded = self._prepare(X)
        leaves = [[tree.apply(encoded) for tree in stage] for stage in self.estimators_]
        return np.asarray(leaves, dtype=np.intp).transpose(2, 0, 1)

    @property
    def feature_importances_(self) -> FloatArray:
        """Impurity-based importances, averaged over trees, normalised to sum to one.

        As scikit-learn: each tree's total (weighted) impurity decrease per feature divided by
        its root weight, averaged over the trees that split at all.
        """
        check_is_fitted(self, "estimators_")
        per_tree = [
            _raw_importances(tree)
            for stage in self.estimators_
            for tree in stage
            if tree.node_count > 1
        ]
        if not per_tree:
            return np.zeros(self.n_features_in_)
        mean = np.mean(per_tree, axis=0)
        total = mean.sum()
        return mean / total if total > 0 else mean


def _raw_importances(tree: Tree) -> FloatArray:
    nodes = tree.nodes
    internal = nodes["left_child"] >= 0
    decrease = np.bincount(
        nodes["feature"][internal],
        weights=tree.impurity_decrease()[internal],
        minlength=tree.n_features,
    )
    return np.asarray(decrease / nodes["weighted_n_samples"][0], dtype=np.float64)


def _rows(mask: Any, X: FloatArray, y: FloatArray, w: FloatArray) -> tuple[Any, Any, Any]:
    if mask is None:
        return X, y, w
    return X[mask], y[mask], w[mask]
