"""XGBoost-style boosting: second-order trees with regularised leaf weights (seeds 002/003).

Each round computes every row's gradient g and hessian h of the loss at the current raw
score, grows a tree with the :class:`~engine.tree._criteria.Newton` criterion — split gain
``½[G_L²/(H_L+λ) + G_R²/(H_R+λ) − (G_L+G_R)²/(H_L+H_R+λ)] − γ``, leaf weight
``w* = −G/(H+λ)`` (L1 ``reg_alpha`` soft-thresholds G), ``min_child_weight`` on the hessian
cover — and adds ``learning_rate · w*`` of the row's leaf to its score. Features are binned
once per fit: into quantile bins (``tree_method="hist"``, seed 003's approximate global split
finding) or one bin per distinct value (``"exact"``, exact greedy search). Seed 002 prints the
gain with H_L where H_R belongs in the second term; the correct form is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    CallableValue,
    Constraint,
    Interval,
    NoneValue,
    Options,
    RandomStateValue,
    SequenceValue,
)
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, ClassifierMixin, RegressorMixin, check_is_fitted
from engine.boosting._objectives import OBJECTIVES, Objective, resolve_objective, softmax
from engine.boosting._packed_stages import PackedStagesMixin
from engine.boosting._xgboost_rounds import Rounds
from engine.callbacks import Callback
from engine.tree._binning import MAX_BINS, BinMapper, categorical_mask
from engine.tree._build import BinnedData, TreeSpec
from engine.tree._criteria import Newton
from engine.tree._growth import GrowthLimits
from engine.tree._monotone import resolve_monotone_constraints
from engine.tree._tree import Tree

__all__ = ["XGBoostClassifier", "XGBoostRegressor"]

FloatArray = NDArray[np.float64]
UNIT_INTERVAL = Interval("real", 0.0, 1.0, closed="right")
NON_NEGATIVE = Interval("real", 0.0, None)
EVAL_METRICS = ("rmse", "mae", "logloss", "mlogloss", "error", "merror", "poisson-nloglik")
IMPORTANCE_TYPES = ("weight", "gain", "total_gain", "cover", "total_cover")

XGBOOST_CONSTRAINTS: dict[str, list[Constraint]] = {
    "n_estimators": [Interval("int", 1, None)],
    "learning_rate": [Interval("real", 0.0, None, closed="neither")],
    "max_depth": [Interval("int", 1, None), NoneValue()],
    "max_leaves": [Interval("int", 2, None), NoneValue()],
    "grow_policy": [Options(("depthwise", "lossguide"))],
    "min_child_weight": [NON_NEGATIVE],
    "gamma": [NON_NEGATIVE],
    "reg_lambda": [NON_NEGATIVE],
    "reg_alpha": [NON_NEGATIVE],
    "max_delta_step": [NON_NEGATIVE],
    "subsample": [UNIT_INTERVAL],
    "colsample_bytree": [UNIT_INTERVAL],
    "colsample_bylevel": [UNIT_INTERVAL],
    "colsample_bynode": [UNIT_INTERVAL],
    "tree_method": [Options(("hist", "exact"))],
    "max_bins": [Interval("int", 2, MAX_BINS)],
    "monotone_constraints": [SequenceValue(), NoneValue()],
    "quantile_alpha": [Interval("real", 0.0, 1.0, closed="neither")],
    "base_score": [Interval("real", None, None), NoneValue()],
    "early_stopping_rounds": [Interval("int", 1, None), NoneValue()],
    "eval_metric": [Options(EVAL_METRICS), NoneValue()],
    "categorical_features": [SequenceValue(), NoneValue()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
    "random_state": [RandomStateValue()],
}


class BaseXGBoost(PackedStagesMixin, BaseEstimator):
    """Second-order boosting shared by the classifier and the regressor."""

    _classification: ClassVar[bool] = False

    n_estimators: int
    learning_rate: float
    max_depth: int | None
    max_leaves: int | None
    grow_policy: str
    min_child_weight: float
    gamma: float
    reg_lambda: float
    reg_alpha: float
    max_delta_step: float
    subsample: float
    colsample_bytree: float
    colsample_bynode: float
    max_bins: int
    # Parameters newer than the first saved models: those load with these values.
    colsample_bylevel: float = 1.0
    tree_method: str = "hist"
    n_jobs: int | None = None
    monotone_constraints: Any = None
    objective: Any
    quantile_alpha: float
    base_score: float | None
    early_stopping_rounds: int | None
    eval_metric: str | None
    categorical_features: Any
    random_state: Any

    estimators_: list[list[Tree]]
    base_score_: FloatArray
    bin_mapper_: BinMapper
    n_features_in_: int

    # --- fitting ---------------------------------------------------------------------------

    def _objective(self) -> Objective:
        return resolve_objective(self.objective, self.quantile_alpha)

    def _fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        eval_set: Any,
        callbacks: list[Callback] | None,
    ) -> None:
        self._validate_params()
        for name in [key for key in vars(self) if key.endswith("_") and not key.startswith("_")]:
            delattr(self, name)  # a refit (or an interrupted one) never mixes two models
        self._forget_packed()
        X = check_X(X, estimator=type(self).__name__)
        target, weights, n_outputs = self._prepare_target(y, X.shape[0], sample_weight)
        objective = self._objective()
        root = resolve_seed_sequence(self.random_state)
        binning_seed, rounds_seed = root.spawn(2)
        mapper = BinMapper(
            self.max_bins,
            seed=int(binning_seed.generate_state(1)[0]),
            exact=self.tree_method == "exact",
        )
        mapper.fit(X[weights > 0], categorical_mask(self.categorical_features, X.shape[1]))
        data = BinnedData.from_mapper(mapper.transform(X), target, mapper)
        X_encoded = mapper.encode_for_prediction(X)
        base = (
            np.full(n_outputs, float(self.base_score))
            if self.base_score is not None
            else np.broadcast_to(objective.base_score(target, weights), (n_outputs,)).copy()
        )
        evaluations = [
            (f"validation_{i}", *self._evaluation_arrays(mapper, X_eval, y_eval, X.shape[1]))
            for i, (X_eval, y_eval) in enumerate(eval_set or ())
        ]
        monotone = self._monotone(mapper, objective)
        rounds = Rounds(
            self, objective, data, X_encoded, target, weights, base, evaluations, monotone
        )
        rounds.run(np.random.default_rng(rounds_seed), callbacks)
        self.estimators_ = rounds.trees
        self.base_score_ = base
        self.bin_mapper_ = mapper
        self.n_features_in_ = X.shape[1]
        self.n_estimators_ = len(rounds.trees)
        self.evals_result_ = rounds.history
        self.best_iteration_ = rounds.best_iteration
        self.best_score_ = rounds.best_score
        self.objective_ = objective.name
        self._packed()  # built now, so predicting never changes the fitted model's state

    def _prepare_target(
        self, y: Any, n_samples: int, sample_weight: Any
    ) -> tuple[FloatArray, FloatArray, int]:
        target = check_target(y, n_samples, numeric=True)
        return target, check_sample_weight(sample_weight, n_samples), 1

    def _evaluation_arrays(
        self, mapper: BinMapper, X: Any, y: Any, n_features: int
    ) -> tuple[FloatArray, FloatArray]:
        X = check_X(X, n_features=n_features, name="eval_set X")
        return mapper.encode_for_prediction(X), self._encode_eval_target(y)

    def _encode_eval_target(self, y: Any) -> FloatArray:
        return np.asarray(y, dtype=np.float64)

    def _tree_spec(self, n_candidates: int, monotone: NDArray[np.int8] | None) -> TreeSpec:
        """One round's tree settings; ``n_candidates`` features survived ``colsample_bytree``.

        As XGBoost, the column samples nest: each depth level draws ``colsample_bylevel`` of
        the tree's features and each split ``colsample_bynode`` of its level's.
        """
        lossguide = self.grow_policy == "lossguide"
        n_level = max(1, round(self.colsample_bylevel * n_candidates))
        limits = GrowthLimits(
            max_depth=self.max_depth if not lossguide or self.max_depth else None,
            min_weight_leaf=self.min_child_weight,
            max_features=max(1, round(self.colsample_bynode * n_level)),
            level_features=n_level if n_level < n_candidates else None,
            max_leaf_nodes=self.max_leaves if lossguide else None,
            min_split_gain=self.gamma,
        )
        criterion = Newton(
            l2=self.reg_lambda, l1=self.reg_alpha, max_delta_step=self.max_delta_step
        )
        return TreeSpec(
            criterion=criterion,
            random_splits=False,
            limits=limits,
            n_classes=0,
            monotone=monotone,
        )

    def _monotone(self, mapper: BinMapper, objective: Objective) -> NDArray[np.int8] | None:
        """The validated ``monotone_constraints``; None when there is nothing to enforce."""
        monotone = resolve_monotone_constraints(
            self.monotone_constraints, mapper.is_categorical_.size
        )
        if monotone is None:
            return None
        constrained_categorical = np.flatnonzero(mapper.is_categorical_ & (monotone != 0))
        if constrained_categorical.size:
            raise ValueError(
                "monotone_constraints apply to numeric features; categorical feature(s) "
                f"{constrained_categorical.tolist()} have a non-zero constraint."
            )
        if objective.name in ("reg:absoluteerror", "reg:quantileerror"):
            raise ValueError(
                f"monotone_constraints are not supported with {objective.name}: its leaves "
                "are reset to residual quantiles after the tree is grown, which the "
                "constraints' weight bounds do not cover."
            )
        return monotone

    # --- prediction ------------------------------------------------------------------------

    def _raw_score(self, X: Any) -> FloatArray:
        check_is_fitted(self, "estimators_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        encoded = self.bin_mapper_.encode_for_prediction(X)
        raw = np.tile(self.base_score_, (encoded.shape[0], 1))
        for k, packed in enumerate(self._packed()):
            raw[:, k] += packed.leaf_value_sum(encoded)[:, 0]
        return raw

    def importance(self, importance_type: str = "gain") -> FloatArray:
        """Per-feature importance as XGBoost defines its kinds.

        ``weight``: number of splits on the feature; ``total_gain``/``gain``: the sum/mean of
        their loss reductions; ``total_cover``/``cover``: the sum/mean of the hessian cover of
        the nodes they split.
        """
        check_is_fitted(self, "estimators_")
        if importance_type not in IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {IMPORTANCE_TYPES}.")
        p = self.n_features_in_
        count, gain, cover = np.zeros(p), np.zeros(p), np.zeros(p)
        for stage in self.estimators_:
            for tree in stage:
                internal = tree.nodes["left_child"] >= 0
                feature = tree.nodes["feature"][internal]
                count += np.bincount(feature, minlength=p)
                gain += np.bincount(
                    feature, weights=tree.impurity_decrease()[internal], minlength=p
                )
                cover += np.bincount(
                    feature, weights=tree.nodes["weighted_n_samples"][internal], minlength=p
                )
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {
                "weight": count,
                "total_gain": gain,
                "gain": np.where(count > 0, gain / count, 0.0),
                "total_cover": cover,
                "cover": np.where(count > 0, cover / count, 0.0),
            }
        return values[importance_type]

    @property
    def feature_importances_(self) -> FloatArray:
        """Mean gain per split of each feature, normalised to sum to one (XGBoost's default)."""
        gain = self.importance("gain")
        total = gain.sum()
        return gain / total if total > 0 else gain


REGRESSION_OBJECTIVES = (
    "reg:squarederror",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "reg:quantileerror",
    "count:poisson",
)


class XGBoostRegressor(RegressorMixin, BaseXGBoost):
    """XGBoost-style gradient boosting for regression.

    Parameters
    ----------
    n_estimators, learning_rate (η), max_depth, max_leaves, grow_policy
        Rounds, shrinkage and tree size: ``"depthwise"`` grows level by level to
        ``max_depth``; ``"lossguide"`` grows best-first to ``max_leaves``.
    min_child_weight : float
        Minimum hessian cover of a child.
    gamma : float
        Minimum gain of a split (γ).
    reg_lambda, reg_alpha : float
        L2 (λ) and L1 (α) penalties on leaf weights.
    max_delta_step : float
        Leaf weights are clipped to ±max_delta_step when positive.
    subsample, colsample_bytree, colsample_bylevel, colsample_bynode : float
        Row fraction per round; feature fraction per tree, of those per depth level, and of
        those per split (the samples nest, as in XGBoost).
    tree_method : {"hist", "exact"}
        ``"hist"``: split search over ``max_bins`` quantile bins per feature (seed 003's
        approximate global method). ``"exact"``: every distinct value is its own bin (up to
        65,535 per feature; ``max_bins`` is ignored), so every midpoint between consecutive
        sorted values is a candidate threshold — exact greedy search, for small data.
    monotone_constraints : sequence of {-1, 0, 1} or None
        Per feature: the raw score must not decrease (1) or not increase (−1) in it, all
        other features fixed. Enforced as XGBoost does (leaf-weight bounds propagated from
        each constrained split's midpoint; see ``engine.tree._monotone``). Numeric features
        only; not with ``reg:absoluteerror`` or ``reg:quantileerror``.
    objective : str or callable
        ``reg:squarederror``, ``reg:pseudohubererror``, ``reg:absoluteerror``,
        ``reg:quantileerror`` (with ``quantile_alpha``), ``count:poisson``, or
        ``objective(y, raw) -> (grad, hess)``.
    base_score : float or None
        Initial raw score; None estimates it from y (mean, median, quantile, log mean).
    early_stopping_rounds, eval_metric :
        Stop when the metric on the last ``eval_set`` passed to ``fit`` has not improved
        for this many rounds; the model keeps the rounds up to ``best_iteration_``.
    n_jobs : int or None
        Threads that share each tree's histogram building (rounds stay sequential); ``-1``
        uses every CPU. The model is the same for any value.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **XGBOOST_CONSTRAINTS,
        "objective": [Options(REGRESSION_OBJECTIVES), CallableValue()],
    }

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        learning_rate: float = 0.3,
        max_depth: int | None = 6,
        max_leaves: int | None = None,
        grow_policy: str = "depthwise",
        min_child_weight: float = 1.0,
        gamma: float = 0.0,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        max_delta_step: float = 0.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        colsample_bylevel: float = 1.0,
        colsample_bynode: float = 1.0,
        tree_method: str = "hist",
        max_bins: int = MAX_BINS,
        monotone_constraints: Any = None,
        objective: str | Callable[..., Any] = "reg:squarederror",
        quantile_alpha: float = 0.5,
        base_score: float | None = None,
        early_stopping_rounds: int | None = None,
        eval_metric: str | None = None,
        categorical_features: Any = None,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.min_child_weight = min_child_weight
        self.gamma = gamma
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.tree_method = tree_method
        self.max_bins = max_bins
        self.monotone_constraints = monotone_constraints
        self.objective = objective
        self.quantile_alpha = quantile_alpha
        self.base_score = base_score
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.categorical_features = categorical_features
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> XGBoostRegressor:
        self._fit(X, y, sample_weight, eval_set, callbacks)
        return self

    def decision_function(self, X: Any) -> FloatArray:
        """The raw additive score, shape (n_samples,)."""
        return self._raw_score(X)[:, 0]

    def predict(self, X: Any) -> FloatArray:
        raw = self.decision_function(X)
        return np.exp(raw) if self.objective_ == "count:poisson" else raw


class XGBoostClassifier(ClassifierMixin, BaseXGBoost):
    """XGBoost-style gradient boosting for classification.

    Parameters as :class:`XGBoostRegressor`, plus ``scale_pos_weight`` (weight of the
    positive class in binary problems); ``objective`` is ``binary:logistic`` for two classes
    and ``multi:softprob`` (one tree per class and round) for more, or a callable.
    """

    _classification = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **XGBOOST_CONSTRAINTS,
        "objective": [Options(("binary:logistic", "multi:softprob")), CallableValue(), NoneValue()],
        "scale_pos_weight": [Interval("real", 0.0, None, closed="neither")],
    }

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        learning_rate: float = 0.3,
        max_depth: int | None = 6,
        max_leaves: int | None = None,
        grow_policy: str = "depthwise",
        min_child_weight: float = 1.0,
        gamma: float = 0.0,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        max_delta_step: float = 0.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        colsample_bylevel: float = 1.0,
        colsample_bynode: float = 1.0,
        tree_method: str = "hist",
        max_bins: int = MAX_BINS,
        monotone_constraints: Any = None,
        objective: str | Callable[..., Any] | None = None,
        quantile_alpha: float = 0.5,
        base_score: float | None = None,
        scale_pos_weight: float = 1.0,
        early_stopping_rounds: int | None = None,
        eval_metric: str | None = None,
        categorical_features: Any = None,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.min_child_weight = min_child_weight
        self.gamma = gamma
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.tree_method = tree_method
        self.max_bins = max_bins
        self.monotone_constraints = monotone_constraints
        self.objective = objective
        self.quantile_alpha = quantile_alpha
        self.base_score = base_score
        self.scale_pos_weight = scale_pos_weight
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.categorical_features = categorical_features
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _objective(self) -> Objective:
        if self.objective is None:
            name = "binary:logistic" if self._n_classes == 2 else "multi:softprob"
            return OBJECTIVES[name]
        return resolve_objective(self.objective, self.quantile_alpha)

    def _prepare_target(
        self, y: Any, n_samples: int, sample_weight: Any
    ) -> tuple[FloatArray, FloatArray, int]:
        labels = check_target(y, n_samples, numeric=False)
        classes, encoded = encode_labels(labels)
        if classes.size < 2:
            raise ValueError(
                "y contains 1 class; classification needs at least two classes in the target."
            )
        self.classes_ = classes
        self.n_classes_ = self._n_classes = int(classes.size)
        weights = check_sample_weight(sample_weight, n_samples)
        if classes.size == 2 and self.scale_pos_weight != 1.0:
            weights = weights * np.where(encoded == 1, self.scale_pos_weight, 1.0)
        return encoded.astype(np.float64), weights, 1 if classes.size == 2 else int(classes.size)

    def _encode_eval_target(self, y: Any) -> FloatArray:
        index = {label: i for i, label in enumerate(self.classes_.tolist())}
        return np.array([index[label] for label in np.asarray(y).tolist()], dtype=np.float64)

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        eval_set: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> XGBoostClassifier:
        self._fit(X, y, sample_weight, eval_set, callbacks)
        return self

    def decision_function(self, X: Any) -> FloatArray:
        """Raw additive scores: shape (n_samples,) for two classes, (n_samples, K) beyond."""
        raw = self._raw_score(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X: Any) -> FloatArray:
        raw = self._raw_score(X)
        if raw.shape[1] == 1:
            positive = 1.0 / (1.0 + np.exp(-raw[:, 0]))
            return np.column_stack([1.0 - positive, positive])
        return softmax(raw)

    def predict(self, X: Any) -> NDArray[Any]:
        return self.classes_[self.predict_proba(X).argmax(axis=1)]
