"""The stage loop of gradient tree boosting (Friedman 2001; Hastie et al. 2009, Algorithm 10.3).

    F0 = argmin_γ Σ L(y_i, γ)
    for m = 1..M:
        r_im = −∂L(y_i, F)/∂F at F_{m−1}                   (negative gradient)
        fit a regression tree to r_im → terminal regions R_jm
        γ_jm = the loss's line search over the rows of R_jm
        F_m = F_{m−1} + ν Σ_j γ_jm 1(x ∈ R_jm)              (shrinkage ν)

X is binned once per fit; every stage's tree is grown on the same binned matrix with a new
target (the negative gradient) and row weights (sample weight × the stage's subsample mask).
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.boosting._losses import Loss
from engine.callbacks import OOB_LOSS, TRAIN_LOSS, VALIDATION_LOSS, Callback, ProgressEvent, notify
from engine.early_stopping import EarlyStopping
from engine.tree._binned import apply_codes
from engine.tree._binning import BinMapper
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, TreeSpec, build_tree

__all__ = ["StageResult", "TrainingSet", "ValidationSet", "fit_stages", "holdout_split"]

FloatArray = NDArray[np.float64]


@dataclass
class TrainingSet:
    """What the stage loop reads: binned rows, encoded raw rows, targets, weights."""

    data: BinnedData  # binned matrix; its target is replaced per tree
    # Raw X with categorical codes, for Tree.apply; None when the fit was given codes alone
    # (engine.tree.Binned), which are then decoded through ``mapper`` a chunk at a time.
    encoded: FloatArray | None
    y: FloatArray  # (n,) or one-hot (n, K)
    weights: FloatArray
    mapper: BinMapper | None = None

    def leaves(self, tree: Tree) -> NDArray[np.intp]:
        """The leaf of every training row in ``tree``."""
        if self.encoded is not None:
            return tree.apply(self.encoded)
        assert self.mapper is not None
        return apply_codes(tree, self.mapper, self.data.binned)


@dataclass
class ValidationSet:
    encoded: FloatArray
    y: FloatArray
    weights: FloatArray


@dataclass
class StageResult:
    """Everything the loop produces; assigned to the estimator only when it finishes."""

    estimators: list[list[Tree]] = field(default_factory=list)
    train_score: list[float] = field(default_factory=list)
    validation_score: list[float] = field(default_factory=list)
    oob_scores: list[float] = field(default_factory=list)
    oob_improvement: list[float] = field(default_factory=list)

    def truncate(self, keep: int) -> None:
        """Keep the first ``keep`` stages: boosting's prefix is the model of that many."""
        for stages in vars(self).values():
            del stages[keep:]


def fit_stages(
    train: TrainingSet,
    validation: ValidationSet | None,
    loss: Loss,
    spec: TreeSpec,
    params: Any,
    init_raw: FloatArray,
    subsample_rng: np.random.Generator,
    tree_rng: np.random.Generator,
    callbacks: list[Callback] | None,
    name: str,
    threads: Executor | None = None,
) -> StageResult:
    """Run up to ``params.n_estimators`` stages, or fewer when a callback ends training
    (``n_iter_no_change`` is such a callback, on the validation loss).

    ``threads`` share each tree's kernel work (``n_jobs``; see :mod:`engine._threads`).
    """
    n_samples = train.weights.size
    n_stages = int(params.n_estimators)
    nu = float(params.learning_rate)
    raw = np.tile(init_raw, (n_samples, 1))
    val_raw = None if validation is None else np.tile(init_raw, (validation.weights.size, 1))
    subsampling = params.subsample < 1.0
    n_inbag = max(1, int(params.subsample * n_samples))
    result = StageResult()
    listeners = [*(callbacks or ()), *stopping_callbacks(params, validation)]
    for m in range(n_stages):
        if subsampling:
            in_bag = np.zeros(n_samples, dtype=bool)
            in_bag[subsample_rng.choice(n_samples, n_inbag, replace=False)] = True
            stage_weights = np.where(in_bag, train.weights, 0.0)
            rows: NDArray[np.intp] | None = np.flatnonzero(in_bag)
            oob = ~in_bag
            if m == 0:
                previous_oob = loss.report(train.y[oob], raw[oob], train.weights[oob])
        else:
            stage_weights = train.weights
            rows = None
        trees = _fit_one_stage(train, loss, spec, raw, stage_weights, rows, nu, tree_rng, threads)
        result.estimators.append(trees)
        if val_raw is not None and validation is not None:
            for k, tree in enumerate(trees):
                val_raw[:, k] += nu * tree.values[tree.apply(validation.encoded), 0]
        metrics: dict[str, float] = {}
        if rows is not None:
            train_loss = loss.report(train.y[rows], raw[rows], train.weights[rows])
            oob_loss = loss.report(train.y[oob], raw[oob], train.weights[oob])
            result.oob_improvement.append(previous_oob - oob_loss)
            result.oob_scores.append(oob_loss)
            previous_oob = oob_loss
            metrics[OOB_LOSS] = oob_loss
        else:
            train_loss = loss.report(train.y, raw, train.weights)
        result.train_score.append(train_loss)
        metrics[TRAIN_LOSS] = train_loss
        if val_raw is not None and validation is not None:
            val_loss = loss.report(validation.y, val_raw, validation.weights)
            result.validation_score.append(val_loss)
            metrics[VALIDATION_LOSS] = val_loss
        stop = notify(listeners, ProgressEvent(name, m + 1, n_stages, metrics))
        if stop is not None:
            if stop.keep is not None:
                result.truncate(stop.keep)
            break
    return result


def stopping_callbacks(params: Any, validation: ValidationSet | None) -> list[Callback]:
    """``n_iter_no_change`` as the one early-stopping callback, on the validation loss.

    As scikit-learn's gradient boosting: keep going while each stage's validation loss beats
    at least one of the last ``n_iter_no_change`` by more than ``tol``; the stage that failed
    is kept.
    """
    if validation is None or params.n_iter_no_change is None:
        return []
    return [
        EarlyStopping(
            VALIDATION_LOSS, patience=params.n_iter_no_change, min_delta=params.tol, rule="last"
        )
    ]


def _fit_one_stage(
    train: TrainingSet,
    loss: Loss,
    spec: TreeSpec,
    raw: FloatArray,
    stage_weights: FloatArray,
    rows: NDArray[np.intp] | None,
    nu: float,
    rng: np.random.Generator,
    threads: Executor | None = None,
) -> list[Tree]:
    """Grow the K trees of one stage, set their leaf values γ and update ``raw`` in place."""
    y, weights = train.y, train.weights
    y_in, raw_in, w_in = (y, raw, weights) if rows is None else (y[rows], raw[rows], weights[rows])
    loss.prepare_stage(y_in, raw_in, w_in)
    negative_gradient = -loss.gradient(y, raw)
    data = train.data
    trees = []
    updates = []
    for k in range(loss.n_trees):
        target = np.ascontiguousarray(negative_gradient[:, k])
        stage_data = BinnedData(
            data.binned,
            target,
            data.thresholds,
            data.bin_values,
            data.is_categorical,
            data.n_bins,
        )
        leaves = np.empty(y.shape[0], dtype=np.intp)  # one-hot y of K classes has K columns
        tree = build_tree(stage_data, stage_weights, spec, rng, threads=threads, leaves=leaves)
        if leaves.min() < 0:  # rows out of the subsample, or a best-first tree
            leaves = train.leaves(tree)
        leaves_in = leaves if rows is None else leaves[rows]
        gamma = loss.leaf_values(y_in, raw_in, w_in, leaves_in, tree.node_count, k)
        is_leaf = tree.nodes["left_child"] < 0
        tree.values[is_leaf, 0] = gamma[is_leaf]
        trees.append(tree)
        updates.append(tree.values[leaves, 0])
    # All K trees of a stage see F_{m−1}; the update lands once they are all grown.
    for k, update in enumerate(updates):
        raw[:, k] += nu * update
    return trees


def holdout_split(
    n_samples: int,
    fraction: float,
    rng: np.random.Generator,
    classes: NDArray[np.int64] | None,
) -> NDArray[np.bool_]:
    """Validation mask: ``fraction`` of the rows, stratified by class when ``classes`` given.

    Every class keeps at least one training row; the holdout must not be empty.
    """
    mask = np.zeros(n_samples, dtype=bool)
    groups = [np.arange(n_samples)] if classes is None else _class_rows(classes)
    for members in groups:
        wanted = fraction * members.size
        n_val = min(math.ceil(wanted) if classes is None else round(wanted), members.size - 1)
        if n_val > 0:
            mask[rng.choice(members, n_val, replace=False)] = True
    if not mask.any():
        raise ValueError(
            f"validation_fraction={fraction} leaves no rows for validation out of "
            f"{n_samples}; use a larger fraction or more data."
        )
    return mask


def _class_rows(classes: NDArray[np.int64]) -> list[NDArray[np.intp]]:
    order = np.argsort(classes, kind="stable")
    counts = np.bincount(classes)
    return [part for part in np.split(order, np.cumsum(counts)[:-1]) if part.size]
