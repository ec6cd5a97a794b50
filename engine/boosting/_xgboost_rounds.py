"""The boosting loop of one XGBoost-style fit: trees, raw scores, metrics, early stopping.

Each round computes the objective's gradients and hessians at the current raw scores, draws
the round's rows (``subsample``) and the tree's features (``colsample_bytree``), grows one
second-order tree per output and adds its leaf weights, shrunk by η, to the raw scores of
the training rows and of every ``eval_set``.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Executor
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from engine._threads import kernel_threads
from engine.boosting._losses import grouped_weighted_quantile
from engine.boosting._objectives import Objective, sigmoid, softmax
from engine.callbacks import Callback, ProgressEvent, eval_set_metric, notify, train_metric
from engine.early_stopping import EarlyStopping
from engine.parallel import HistogramSource, active_backend
from engine.tree._binned import Binned, apply_codes
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, build_newton_trees
from engine.tree.grow.whole_tree import TreeWorkspace

if TYPE_CHECKING:
    from engine.boosting._xgboost import BaseXGBoost

__all__ = ["Rounds"]

FloatArray = NDArray[np.float64]


class Rounds:
    """The boosting loop of one fit: trees, scores, evaluation history, early stopping."""

    def __init__(
        self,
        model: BaseXGBoost,
        objective: Objective,
        data: BinnedData,
        X_encoded: FloatArray | Binned,
        target: FloatArray,
        weights: FloatArray,
        base: FloatArray,
        evaluations: list[tuple[str, FloatArray, FloatArray]],
        monotone: NDArray[np.int8] | None = None,
    ) -> None:
        self.model = model
        self.monotone = monotone
        self.objective = objective
        self.data = data
        self.X_encoded = X_encoded
        self.target = target
        self.weights = weights
        n_outputs = base.size
        self.raw = np.tile(base, (target.size, 1))
        self.evaluations = [
            (name, X_eval, y_eval, np.tile(base, (X_eval.shape[0], 1)))
            for name, X_eval, y_eval in evaluations
        ]
        self.metric = model.eval_metric or _default_metric(objective.name, n_outputs)
        self.trees: list[list[Tree]] = []
        self.history: dict[str, dict[str, list[float]]] = {
            name: {self.metric: []} for name, *_ in self.evaluations
        }
        self.tracker = self._best_round_tracker()

    def run(self, rng: np.random.Generator, callbacks: list[Callback] | None) -> None:
        backend = active_backend()
        # On a cluster (engine.parallel_backend) the rows' histograms are built where the
        # rows' partitions live; exact binning's uint16 codes never use histograms.
        distributed = backend is not None and self.data.binned.dtype == np.uint8
        with contextlib.ExitStack() as stack:
            threads = stack.enter_context(kernel_threads(self.model.n_jobs))
            histograms = (
                stack.enter_context(backend.histograms(self.data.binned))
                if backend is not None and distributed
                else None
            )
            self._run(rng, callbacks, threads, histograms)

    def _run(
        self,
        rng: np.random.Generator,
        callbacks: list[Callback] | None,
        threads: Executor | None,
        histograms: HistogramSource | None = None,
    ) -> None:
        model = self.model
        n_rows, n_features = self.X_encoded.shape
        n_outputs = self.raw.shape[1]
        listeners = [*(callbacks or ()), *([self.tracker] if self.tracker else [])]
        # One fit's histograms, row partitions and node arrays; one per output when the K
        # trees of a round grow side by side on threads.
        workspaces = [TreeWorkspace() for _ in range(n_outputs if threads is not None else 1)]
        for round_index in range(model.n_estimators):
            if n_outputs == 1:
                # Side by side, as the tree's channels lay them: on unit weights the tree
                # takes this array as its channels (engine.tree.grow.build).
                pairs = self.objective.pairs(self.target, self.raw)
                gradient, hessian = pairs[:, 0:1], pairs[:, 1:2]
                del pairs
            else:
                gradient, hessian = self.objective(self.target, self.raw)
                gradient = gradient.reshape(n_rows, -1)
                hessian = hessian.reshape(n_rows, -1)
            weights = self.weights
            if model.subsample < 1.0:
                weights = weights * (rng.random(n_rows) < model.subsample)
            subset = None
            n_candidates = n_features
            if model.colsample_bytree < 1.0:
                n_candidates = max(1, round(model.colsample_bytree * n_features))
                subset = np.sort(rng.choice(n_features, n_candidates, replace=False))
            spec = model._tree_spec(n_candidates, self.monotone)
            leaves = np.empty((n_outputs, n_rows), dtype=np.intp)
            stage = build_newton_trees(
                self.data,
                gradient,
                hessian,
                weights,
                spec,
                rng,
                subset,
                threads,
                leaves,
                histograms,
                workspaces,
            )
            for k, tree in enumerate(stage):
                self._refresh_leaves(tree, weights)
                tree.values *= model.learning_rate
                # Rows the tree grew on are routed by their bins exactly as predict routes
                # their values, so the grower's leaves spare descending the tree again.
                tree_leaves = leaves[k]
                if tree_leaves.min() < 0:
                    tree_leaves = self._apply(tree)
                self.raw[:, k] += tree.values[tree_leaves, 0]
                for _, X_eval, _, raw_eval in self.evaluations:
                    raw_eval[:, k] += tree.predict(X_eval)[:, 0]
            # The round's per-row arrays go before the metric's and the next round's come.
            del gradient, hessian, weights, leaves, tree_leaves
            self.trees.append(stage)
            # The training metric is for listeners (progress, early stopping) only: a fit
            # that no one watches skips it, as LightGBM evaluates no metric it was not
            # asked for (a pass of logarithms over every row, each round).
            metrics = self._evaluate(train=bool(listeners))
            event = ProgressEvent(
                type(model).__name__, round_index + 1, model.n_estimators, metrics
            )
            stop = notify(listeners, event)
            if stop is not None:
                if stop.keep is not None:
                    del self.trees[stop.keep :]
                break

    def _best_round_tracker(self) -> EarlyStopping | None:
        """The metric on the last ``eval_set`` watched by the one early-stopping callback.

        It always finds ``best_iteration_``; with ``early_stopping_rounds`` it also stops
        when that many rounds pass without a better value and keeps the rounds up to the
        best, as XGBoost does (Chen and Guestrin 2016). Without it, its patience is every
        round, which no fit exhausts.
        """
        if not self.evaluations:
            return None
        rounds = self.model.early_stopping_rounds
        return EarlyStopping(
            eval_set_metric(len(self.evaluations) - 1, self.metric),
            patience=self.model.n_estimators if rounds is None else rounds,
            keep_best=rounds is not None,
        )

    @property
    def best_iteration(self) -> int | None:
        return None if self.tracker is None else self.tracker.best_iteration

    @property
    def best_score(self) -> float | None:
        return None if self.tracker is None else self.tracker.best_score

    def _apply(self, tree: Tree, rows: NDArray[np.bool_] | None = None) -> NDArray[np.intp]:
        """Leaves of the training rows (``rows`` of them): from their encoded values, or from
        their codes when the fit was given codes only (``engine.tree._binned``)."""
        source = self.X_encoded
        if isinstance(source, Binned):
            codes = source.codes if rows is None else source.codes[rows]
            return apply_codes(tree, source.mapper, codes)
        return tree.apply(source if rows is None else source[rows])

    def _refresh_leaves(self, tree: Tree, weights: FloatArray) -> None:
        """Absolute and quantile losses: set leaves to the residual quantile, as XGBoost does.

        Their hessian is constant, so Newton leaf weights take tiny steps; the weighted
        quantile of each leaf's residuals is the exact minimiser of the loss in the leaf.
        """
        level = {"reg:absoluteerror": 0.5, "reg:quantileerror": self.model.quantile_alpha}
        if self.objective.name not in level:
            return
        in_bag = weights > 0
        leaves = self._apply(tree, in_bag)
        residual = self.target[in_bag] - self.raw[in_bag, 0]
        quantiles = grouped_weighted_quantile(
            residual, weights[in_bag], leaves, tree.node_count, level[self.objective.name]
        )
        is_leaf = tree.nodes["left_child"] < 0
        tree.values[is_leaf, 0] = quantiles[is_leaf]

    def _evaluate(self, train: bool = True) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if train:
            metrics[train_metric(self.metric)] = _metric(
                self.metric, self.target, self.raw, self.objective
            )
        for index, (name, _, y_eval, raw_eval) in enumerate(self.evaluations):
            value = _metric(self.metric, y_eval, raw_eval, self.objective)
            self.history[name][self.metric].append(value)
            metrics[eval_set_metric(index, self.metric)] = value
        return metrics


def _default_metric(objective: str, n_outputs: int) -> str:
    return {
        "reg:absoluteerror": "mae",
        "binary:logistic": "logloss",
        "multi:softprob": "mlogloss",
        "count:poisson": "poisson-nloglik",
    }.get(objective, "mlogloss" if n_outputs > 1 else "rmse")


def _metric(name: str, y: FloatArray, raw: FloatArray, objective: Objective) -> float:
    """An evaluation metric (lower is better) of raw scores against targets."""
    if name == "rmse":
        return float(np.sqrt(np.mean((raw[:, 0] - y) ** 2)))
    if name == "mae":
        return float(np.mean(np.abs(raw[:, 0] - y)))
    if name == "poisson-nloglik":
        mean = np.exp(raw[:, 0])
        return float(np.mean(mean - y * raw[:, 0]))
    if name in ("logloss", "error"):
        p = sigmoid(raw[:, 0])
        np.clip(p, 1e-15, 1 - 1e-15, out=p)
        if name == "error":
            return float(np.mean((p > 0.5) != (y > 0.5)))
        # y·log p + (1 − y)·log(1 − p), in place: three arrays of the rows at once, not six.
        total = np.log(p)
        total *= y
        np.subtract(1.0, p, out=p)
        np.log(p, out=p)
        p *= 1 - y
        total += p
        return float(-np.mean(total))
    probabilities = np.clip(softmax(raw), 1e-15, 1.0)
    labels = y.astype(np.intp)
    if name == "merror":
        return float(np.mean(probabilities.argmax(axis=1) != labels))
    return float(-np.mean(np.log(probabilities[np.arange(labels.size), labels])))
