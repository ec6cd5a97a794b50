"""XGBoost-style boosting: second-order trees with regularised leaf weights (Chen and Guestrin
2016).

Each round computes every row's gradient g and hessian h of the loss at the current raw
score, grows a tree with the :class:`~engine.tree._criteria.Newton` criterion — split gain
``½[G_L²/(H_L+λ) + G_R²/(H_R+λ) − (G_L+G_R)²/(H_L+H_R+λ)] − γ``, leaf weight
``w* = −G/(H+λ)`` (L1 ``reg_alpha`` soft-thresholds G), ``min_child_weight`` on the hessian
cover — and adds ``learning_rate · w*`` of the row's leaf to its score. Features are binned
once per fit: into quantile bins (``tree_method="hist"``, the approximate algorithm of Chen and
Guestrin's §3.2 with candidates proposed once, their "global" variant) or one bin per distinct
value (``"exact"``, their exact greedy algorithm, §3.1). The gain is their eq. (7); note H_R,
not H_L, under G_R² (a common misprint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import CallableValue, Constraint, Interval, NoneValue, Options
from engine._targets import encode_labels
from engine._validation import check_sample_weight, check_target, unit_weights
from engine.base import ClassifierMixin, RegressorMixin
from engine.boosting._objectives import OBJECTIVES, Objective, resolve_objective, softmax
from engine.boosting._xgboost_base import EVAL_METRICS as EVAL_METRICS
from engine.boosting._xgboost_base import IMPORTANCE_TYPES as IMPORTANCE_TYPES
from engine.boosting._xgboost_base import NON_NEGATIVE as NON_NEGATIVE
from engine.boosting._xgboost_base import UNIT_INTERVAL as UNIT_INTERVAL
from engine.boosting._xgboost_base import XGBOOST_CONSTRAINTS, BaseXGBoost, FloatArray
from engine.callbacks import Callback
from engine.tree._binning import MAX_BINS

__all__ = ["XGBoostClassifier", "XGBoostRegressor"]


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
        ``"hist"``: split search over ``max_bins`` quantile bins per feature (the approximate
        global method of Chen and Guestrin 2016, §3.2). ``"exact"``: every distinct value
        is its own bin (up to 65,535 per feature; ``max_bins`` is ignored), so every midpoint
        between consecutive sorted values is a candidate threshold — exact greedy search
        (ibid., §3.1), for small data.
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
        weights = (
            unit_weights(n_samples)
            if sample_weight is None
            else check_sample_weight(sample_weight, n_samples)
        )
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
