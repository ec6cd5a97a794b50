"""What :class:`~engine.boosting._xgboost.XGBoostRegressor` and ``XGBoostClassifier`` share.

Their parameter constraints and :class:`BaseXGBoost`: fitting (binning, the base score, the
rounds), each round's tree settings, the monotone-constraint checks, the raw score and
XGBoost's importance kinds. The algorithm is described in :mod:`engine.boosting._xgboost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    Constraint,
    Interval,
    NoneValue,
    Options,
    RandomStateValue,
    SequenceValue,
)
from engine._threads import kernel_threads
from engine._validation import (
    check_sample_weight,
    check_target,
    check_X,
    resolve_seed_sequence,
    unit_weights,
)
from engine.base import BaseEstimator, check_is_fitted
from engine.boosting._objectives import Objective, resolve_objective
from engine.boosting._packed_stages import PackedStagesMixin
from engine.boosting._xgboost_rounds import Rounds
from engine.callbacks import Callback, eval_set_name
from engine.parallel import predict_threads
from engine.parallel._parts import DataPart, KeptRows, PartReader
from engine.tree._binned import Binned, BinningPlan, check_binned, plan_binning
from engine.tree._binning import MAX_BINS, BinMapper, categorical_mask
from engine.tree._criteria import Newton
from engine.tree._monotone import resolve_monotone_constraints
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, TreeSpec
from engine.tree.grow.limits import GrowthLimits

__all__ = ["XGBOOST_CONSTRAINTS", "BaseXGBoost"]

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
    # n_jobs are threads inside each tree (engine._threads), not worker processes.
    n_jobs_kind: ClassVar[str] = "threads"

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
        given = X if isinstance(X, Binned) else None
        if given is None:
            X = check_X(X, estimator=type(self).__name__)
        target, weights, n_outputs = self._prepare_target(y, X.shape[0], sample_weight)
        objective = self._objective()
        root = resolve_seed_sequence(self.random_state)
        binning_seed, rounds_seed = root.spawn(2)
        categorical = categorical_mask(self.categorical_features, X.shape[1])
        X_encoded: FloatArray | Binned
        if given is not None:  # binned by the caller with the mapper of binning_plan
            check_binned(given, self.max_bins, categorical, type(self).__name__)
            if given.mapper.exact != (self.tree_method == "exact"):
                raise ValueError(f"{type(self).__name__}: Binned input of another tree_method.")
            mapper = given.mapper
            data = BinnedData.from_mapper(given.codes, target, mapper)
            X_encoded = given
        else:
            mapper = self._mapper(binning_seed)
            weighted = weights > 0
            with kernel_threads(self.n_jobs) as threads:
                # Every row weighs in a plain fit: X itself, not a copy of it.
                mapper.fit(X if weighted.all() else X[weighted], categorical, threads)
            data = BinnedData.from_mapper(mapper.transform(X), target, mapper)
            X_encoded = mapper.encode_for_prediction(X)
        base = (
            np.full(n_outputs, float(self.base_score))
            if self.base_score is not None
            else np.broadcast_to(objective.base_score(target, weights), (n_outputs,)).copy()
        )
        evaluations = [
            (eval_set_name(i), *self._evaluation_arrays(mapper, X_eval, y_eval, X.shape[1]))
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

    def _mapper(self, binning_seed: np.random.SeedSequence) -> BinMapper:
        return BinMapper(
            self.max_bins,
            seed=int(binning_seed.generate_state(1)[0]),
            exact=self.tree_method == "exact",
        )

    def binning_plan(self, n_rows: int, n_features: int, sample_weight: Any = None) -> BinningPlan:
        """The binning ``fit`` on an ``n_rows`` × ``n_features`` matrix would make (see
        :mod:`engine.tree._binned`); ``fit(Binned(codes, plan.fit(X[plan.rows])), y)`` then
        grows the trees ``fit(X, y)`` grows. Needs an integer ``random_state``. Exact binning
        reads every row: its plan names them all."""
        self._validate_params()
        binning_seed, _ = resolve_seed_sequence(self.random_state).spawn(2)
        weights = check_sample_weight(sample_weight, n_rows)
        categorical = categorical_mask(self.categorical_features, n_features)
        return plan_binning(self._mapper(binning_seed), categorical, n_rows, weights > 0)

    def out_of_core_refusals(self) -> list[str]:
        """The settings that keep :meth:`fit_parts` from fitting out of core on a cluster
        (it raises ValueError naming them); empty when it can."""
        from engine.boosting._xgboost_parts import out_of_core_refusals

        self._validate_params()
        return out_of_core_refusals(self)

    def fit_parts(
        self,
        parts: Sequence[DataPart],
        read: PartReader,
        callbacks: list[Callback] | None = None,
        keep: KeptRows | None = None,
    ) -> Any:
        """Fit on a table held as parts that ``read`` opens, out of core on a cluster.

        ``parts`` tile the table's rows in order (:class:`engine.parallel.DataPart`: an opaque
        ``source``, its global row offset and row count); ``read(source)`` is a module-level
        function returning ``(X, y, sample_weight or None)`` of one part. Inside
        :func:`engine.parallel_backend` the Dask workers read, bin and keep the rows and this
        process never holds them; otherwise the parts are read here and :meth:`fit` runs.
        Either way the model is the one ``fit`` learns on the whole table with the same seed
        (up to the order of floating-point additions; see
        :mod:`engine.boosting._xgboost_parts`), except that on a cluster rows of weight 0 take
        no part at all: a classifier's classes and the reported training metric are those of
        the rows of positive weight (a validation split can ride along with weight 0).

        ``keep`` (:class:`engine.parallel.KeptRows`) names global rows whose bin codes the
        caller wants after the fit; the fit fills it in, with the float values of the rows
        the bin edges were placed by, so a caller scoring the model never opens a part.
        """
        from engine.boosting._xgboost_parts import fit_parts

        fit_parts(self, parts, read, callbacks, keep)
        return self

    def _prepare_target(
        self, y: Any, n_samples: int, sample_weight: Any
    ) -> tuple[FloatArray, FloatArray, int]:
        target = check_target(y, n_samples, numeric=True)
        if sample_weight is None:
            return target, unit_weights(n_samples), 1
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
        n_threads = predict_threads(self.n_jobs)
        for k, packed in enumerate(self._packed()):
            raw[:, k] += packed.leaf_value_sum(encoded, n_threads)[:, 0]
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
