"""Ensembles of trees fitted independently: the machinery behind forests and tree bagging.

The training set is binned once in the parent; the binned matrix, targets and weights are
shared with the workers (:mod:`engine.parallel`), and each task receives only its member's
seed and the tree spec. Members come back in order, so out-of-bag predictions, the OOB curve,
progress callbacks and OOB early stopping are all decided in the parent, identically for any
``n_jobs``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._targets import class_weight_per_row, encode_labels
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, check_is_fitted
from engine.callbacks import OOB_ERROR, Callback, ProgressEvent, notify
from engine.early_stopping import EarlyStopping
from engine.ensemble import _sampling
from engine.ensemble._few_rows import NUMERIC_ROWS_KEY
from engine.ensemble._sampling import (
    MemberSampling,
    draw_member,
    member_seeds,
    regenerate_counts,
    resolve_count,
)
from engine.parallel import SharedData, make_executor, predict_threads
from engine.tree._binned import (
    ROUTING_CHUNK_ROWS,
    Binned,
    BinningPlan,
    check_binned,
    decode,
    plan_binning,
    routing_table,
)
from engine.tree._binning import BinMapper, categorical_mask
from engine.tree._classes import resolve_limits
from engine.tree._tree import Tree
from engine.tree.grow.build import BinnedData, TreeSpec, build_tree
from engine.tree.predict.packing import PackedTrees

__all__ = ["BaseTreeEnsemble"]

# (row, tree) pairs traversed per prediction chunk: bounds memory for large batches.
PREDICT_PAIRS_PER_CHUNK = 500_000


def _one_hot_argmax(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each member's class vote: 1 for its most probable class, along the last axis."""
    votes = np.zeros_like(values)
    np.put_along_axis(votes, values.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return votes


@dataclass(frozen=True)
class _MemberTask:
    seed: int
    spec: TreeSpec
    sampling: MemberSampling
    balanced_subsample: bool
    out_of_bag: bool


@dataclass(frozen=True)
class _MemberResult:
    member: Any  # a Tree, or a generic bagging member with the same predict()
    features: NDArray[np.int64] | None
    oob_rows: NDArray[np.int64] | None
    oob_values: NDArray[np.float64] | None


def _fit_member(shared: SharedData, task: _MemberTask) -> _MemberResult:
    """Grow one member on the shared training set (runs in a worker)."""
    data = BinnedData.from_arrays(shared)
    rng = np.random.default_rng(task.seed)
    counts, features = draw_member(rng, task.sampling, task.seed)
    weights = shared["sample_weight"] * counts.astype(np.float64)
    if task.balanced_subsample:
        n_classes = task.spec.n_classes
        in_bag = np.bincount(data.target, weights=counts, minlength=n_classes)
        per_class = counts.sum() / (n_classes * np.maximum(in_bag, 1.0))
        weights = weights * per_class[data.target]
    tree = build_tree(data, weights, task.spec, rng, features)
    if not task.out_of_bag:
        return _MemberResult(tree, features, None, None)
    oob_rows = np.flatnonzero(counts == 0)
    return _MemberResult(tree, features, oob_rows, _predict_rows(tree, shared, oob_rows))


def _predict_rows(member: Any, shared: SharedData, rows: NDArray[np.int64]) -> NDArray[np.float64]:
    """A member's predictions for training rows: from the encoded values, or, when the fit was
    given codes only, from values that route as the codes do, a chunk of rows at a time."""
    if "X" in shared:
        return np.asarray(member.predict(shared["X"][rows]))
    table, binned = shared["routing"], shared["binned"]
    pieces = [
        member.predict(decode(table, binned[rows[start : start + ROUTING_CHUNK_ROWS]]))
        for start in range(0, rows.size, ROUTING_CHUNK_ROWS)
    ]
    return np.concatenate(pieces) if pieces else member.predict(decode(table, binned[rows]))


class BaseTreeEnsemble(BaseEstimator):
    """Fit, predict and inspect an ensemble of independently grown trees.

    Subclasses provide the tree hyperparameters (:meth:`_tree_settings`) and the member
    sampling scheme (:meth:`_sampling_settings`), and say whether they classify.
    """

    _classification: bool = False
    _random_splits: bool = False
    _hard_voting: bool = False
    # The packed prediction arrays are rebuilt on first use after loading.
    _persistence_exclude: ClassVar[tuple[str, ...]] = ("_packed_cache", NUMERIC_ROWS_KEY)

    n_estimators: int
    n_jobs: int | None
    random_state: Any
    oob_score: bool
    early_stopping: str | None
    n_iter_no_change: int
    tol: float

    members_: list[Any]  # Tree, or a fitted-estimator adapter in generic bagging
    bin_mapper_: BinMapper
    n_features_in_: int

    # -- hooks --------------------------------------------------------------------------

    def _tree_settings(self) -> Any:
        """An object with the tree hyperparameters as attributes (self, or a nested tree)."""
        raise NotImplementedError

    def _sampling_settings(self) -> tuple[Any, bool, Any, bool]:
        """``(max_samples, bootstrap, max_features_per_member, bootstrap_features)``."""
        raise NotImplementedError

    def _class_weight(self) -> Any:
        return None

    # -- fitting ------------------------------------------------------------------------

    def _fit(self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None) -> None:
        self._validate_params()
        self._forget_fit()
        given = X if isinstance(X, Binned) else None
        if given is None:
            X = check_X(X)
        n_samples, n_features = X.shape
        target = check_target(y, n_samples, numeric=not self._classification)
        weights = check_sample_weight(sample_weight, n_samples)
        settings = self._tree_settings()
        class_weight = self._class_weight()
        n_classes = 0
        if self._classification:
            self.classes_, target = encode_labels(target)
            self.n_classes_ = n_classes = int(self.classes_.size)
            if class_weight not in (None, "balanced_subsample"):
                weights = weights * class_weight_per_row(class_weight, target, self.classes_)
        root = resolve_seed_sequence(self.random_state)
        binning_seed, members_seed = root.spawn(2)
        categorical = categorical_mask(settings.categorical_features, n_features)
        if given is not None:  # binned by the caller with the mapper of binning_plan
            check_binned(given, settings.max_bins, categorical, type(self).__name__)
            mapper = given.mapper
            data = BinnedData.from_mapper(given.codes, target, mapper)
        else:
            mapper = BinMapper(settings.max_bins, seed=int(binning_seed.generate_state(1)[0]))
            # Rows of zero weight take no part in any member, so they place no bin edges either.
            weighted_rows = X if weights.all() else X[weights > 0]
            mapper.fit(weighted_rows, categorical)
            data = BinnedData.from_mapper(mapper.transform(X), target, mapper)
        sampling = self._resolve_sampling(n_samples, n_features)
        spec = TreeSpec(
            criterion=settings.criterion,
            random_splits=self._random_splits or settings.splitter == "random",
            limits=resolve_limits(settings, n_samples, float(weights.sum()), n_features),
            n_classes=n_classes,
        )
        track_oob = self.oob_score or self.early_stopping == "oob"
        if track_oob and not sampling.bootstrap and sampling.n_draws == n_samples:
            raise ValueError("Out-of-bag estimates need bootstrap=True or max_samples < 1.")
        seeds = member_seeds(members_seed, self.n_estimators)
        tasks = [
            _MemberTask(int(seed), spec, sampling, class_weight == "balanced_subsample", track_oob)
            for seed in seeds
        ]
        shared = {**data.as_arrays(), "sample_weight": weights}
        if track_oob and given is None:
            shared["X"] = mapper.encode_for_prediction(X)
        elif track_oob:
            shared["routing"] = routing_table(mapper)
        self._fit_members(_fit_member, shared, tasks, target, seeds, callbacks, track_oob)
        # Assigned only once every member succeeded: an interrupted fit leaves no state.
        self.bin_mapper_ = mapper
        self.n_features_in_ = n_features
        self._sampling = sampling

    def binning_plan(self, n_rows: int, n_features: int, sample_weight: Any = None) -> BinningPlan:
        """The binning ``fit`` on an ``n_rows`` × ``n_features`` matrix would make (see
        :mod:`engine.tree._binned`); ``fit(Binned(codes, plan.fit(X[plan.rows])), y)`` then
        grows the ensemble ``fit(X, y)`` grows. Needs an integer ``random_state``."""
        self._validate_params()
        settings = self._tree_settings()
        binning_seed, _ = resolve_seed_sequence(self.random_state).spawn(2)
        mapper = BinMapper(settings.max_bins, seed=int(binning_seed.generate_state(1)[0]))
        weights = check_sample_weight(sample_weight, n_rows)
        categorical = categorical_mask(settings.categorical_features, n_features)
        return plan_binning(mapper, categorical, n_rows, weights > 0)

    def _forget_fit(self) -> None:
        """Drop everything a previous ``fit`` left, so a failed refit leaves no stale model."""
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            delattr(self, name)
        for name in ("_sampling", "_packed_cache", NUMERIC_ROWS_KEY):
            self.__dict__.pop(name, None)

    def _resolve_sampling(self, n_samples: int, n_features: int) -> MemberSampling:
        max_samples, bootstrap, max_features, bootstrap_features = self._sampling_settings()
        return MemberSampling(
            n_samples=n_samples,
            n_draws=resolve_count(max_samples, n_samples, "max_samples"),
            bootstrap=bootstrap,
            n_features=n_features,
            n_feature_draws=resolve_count(max_features, n_features, "max_features"),
            bootstrap_features=bootstrap_features,
            block_rows=_sampling.BOOTSTRAP_BLOCK_ROWS,  # read at fit time: tests shrink it
        )

    def _fit_members(
        self,
        task_function: Any,
        shared: dict[str, NDArray[Any]],
        tasks: list[Any],
        target: NDArray[Any],
        seeds: NDArray[np.uint64],
        callbacks: list[Callback] | None,
        track_oob: bool,
    ) -> None:
        n_samples = target.shape[0]
        n_outputs = max(getattr(self, "n_classes_", 1), 1)
        oob_sum = np.zeros((n_samples, n_outputs))
        oob_n = np.zeros(n_samples, dtype=np.int64)
        members: list[Any] = []
        features: list[NDArray[np.int64] | None] = []
        curve: list[float] = []
        total = len(tasks)
        name = type(self).__name__
        listeners = [*(callbacks or ()), *self._stopping_callbacks()]
        stop = None
        with make_executor(shared, self.n_jobs, total) as executor:
            for done, result in enumerate(executor.map(task_function, tasks), start=1):
                members.append(result.member)
                features.append(result.features)
                metrics: dict[str, float] = {}
                if track_oob:
                    assert result.oob_rows is not None and result.oob_values is not None
                    oob_sum[result.oob_rows] += self._member_votes(result.oob_values)
                    oob_n[result.oob_rows] += 1
                    curve.append(self._oob_error(oob_sum, oob_n, target))
                    metrics[OOB_ERROR] = curve[-1]
                stop = notify(listeners, ProgressEvent(name, done, total, metrics))
                if stop is not None:
                    break
        if stop is not None and stop.keep is not None and stop.keep < len(members):
            # Members are independent, so the first ``keep`` of them are the forest a fit of
            # ``keep`` members grows; its out-of-bag votes are counted again from them alone.
            del members[stop.keep :], features[stop.keep :], curve[stop.keep :]
            if track_oob:
                oob_sum, oob_n = self._count_oob(members, tasks, shared, n_samples, n_outputs)
        self.members_ = members
        self.estimators_features_ = features
        self.estimators_seeds_ = seeds[: len(members)]
        self.n_estimators_ = len(members)
        if track_oob:
            self.oob_curve_ = np.asarray(curve)
            self._store_oob(oob_sum, oob_n, target)

    def _stopping_callbacks(self) -> list[Callback]:
        """``early_stopping="oob"`` as the one early-stopping callback, on the OOB error.

        Stop adding members once the OOB error has not fallen by ``tol`` within the last
        ``n_iter_no_change`` of them (Hastie, Tibshirani and Friedman 2009, §15.3.1: the OOB
        error settles where the test error does); every member grown is kept.
        """
        if self.early_stopping != "oob":
            return []
        return [
            EarlyStopping(
                OOB_ERROR, patience=self.n_iter_no_change, min_delta=self.tol, rule="window"
            )
        ]

    def _count_oob(
        self,
        members: list[Any],
        tasks: list[Any],
        shared: dict[str, NDArray[Any]],
        n_samples: int,
        n_outputs: int,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """The out-of-bag vote sums and counts of ``members``, in member order."""
        oob_sum = np.zeros((n_samples, n_outputs))
        oob_n = np.zeros(n_samples, dtype=np.int64)
        for member, task in zip(members, tasks, strict=False):
            rows = np.flatnonzero(regenerate_counts(task.seed, task.sampling) == 0)
            oob_sum[rows] += self._member_votes(_predict_rows(member, shared, rows))
            oob_n[rows] += 1
        return oob_sum, oob_n

    def _member_votes(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        if self._classification and self._hard_voting:
            return _one_hot_argmax(values)
        return values

    def _oob_error(
        self, oob_sum: NDArray[np.float64], oob_n: NDArray[np.int64], target: NDArray[Any]
    ) -> float:
        seen = oob_n > 0
        if not seen.any():
            return float("nan")
        if self._classification:
            return float(np.mean(oob_sum[seen].argmax(axis=1) != target[seen]))
        prediction = oob_sum[seen, 0] / oob_n[seen]
        return float(np.mean((prediction - target[seen]) ** 2))

    def _store_oob(
        self, oob_sum: NDArray[np.float64], oob_n: NDArray[np.int64], target: NDArray[Any]
    ) -> None:
        seen = oob_n > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            averaged = oob_sum / oob_n[:, None]
        if self._classification:
            self.oob_decision_function_ = averaged
            correct = averaged[seen].argmax(axis=1) == target[seen]
            self.oob_score_ = float(correct.mean()) if seen.any() else float("nan")
        else:
            self.oob_prediction_ = averaged[:, 0]
            residual = averaged[seen, 0] - target[seen]
            spread = target[seen] - target[seen].mean()
            denominator = float((spread**2).sum())
            self.oob_score_ = (
                1.0 - float((residual**2).sum()) / denominator if denominator > 0 else 0.0
            )

    # -- prediction ---------------------------------------------------------------------

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self, "members_")
        X = check_X(X, n_features=self.n_features_in_)
        mapper = getattr(self, "bin_mapper_", None)
        return X if mapper is None else mapper.encode_for_prediction(X)

    def _packed(self) -> PackedTrees | None:
        """All member trees packed for joint traversal (built on first use, not persisted)."""
        cached = self.__dict__.get("_packed_cache")
        if cached is not None and cached.n_trees == len(self.members_):
            return cached
        if not all(isinstance(member, Tree) for member in self.members_):
            return None
        cached = PackedTrees(self.members_)
        mapper = getattr(self, "bin_mapper_", None)
        self.__dict__[NUMERIC_ROWS_KEY] = mapper is None or not mapper.is_categorical_.any()
        self.__dict__["_packed_cache"] = cached
        return cached

    def _mean_member_output(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        packed = self._packed()
        if packed is None:
            total = self._member_votes(self.members_[0].predict(X))
            for member in self.members_[1:]:
                total += self._member_votes(member.predict(X))
            return total / len(self.members_)
        n_jobs = predict_threads(self.n_jobs)
        if not (self._classification and self._hard_voting):
            # The mean as ``mean(axis=0)`` computes it: the sum, then one division. The sum
            # holds no (trees × rows) block, so a batch is not chunked: each chunk would read
            # the whole forest once more. Large batches share their rows among threads (the
            # kernels release the GIL, and a row's sum is the same whichever thread adds it).
            return packed.leaf_value_sum(X, n_jobs) / packed.n_trees
        # Hard votes: chunks bound the (trees × rows × outputs) leaf-value block held at once,
        # and spread large batches over threads.
        chunk = max(1, PREDICT_PAIRS_PER_CHUNK // packed.n_trees)
        starts = range(0, X.shape[0], chunk)

        def predict_chunk(start: int) -> NDArray[np.float64]:
            return _one_hot_argmax(packed.leaf_values(X[start : start + chunk])).mean(axis=0)

        n_threads = min(n_jobs, len(starts))
        if n_threads <= 1:
            return np.concatenate([predict_chunk(start) for start in starts])
        with ThreadPoolExecutor(n_threads) as pool:
            return np.concatenate(list(pool.map(predict_chunk, starts)))

    @property
    def trees_(self) -> list[Tree]:
        """The members as flat trees (tree ensembles only)."""
        check_is_fitted(self, "members_")
        if not all(isinstance(member, Tree) for member in self.members_):
            raise AttributeError(f"{type(self).__name__} members are not trees.")
        return list(self.members_)

    def apply(self, X: Any) -> NDArray[np.intp]:
        """Leaf index of every sample in every member, shape (n_samples, n_estimators)."""
        X = self._prepare(X)
        packed = self._packed()
        if packed is None:
            raise AttributeError(f"{type(self).__name__} members are not trees.")
        return packed.local_leaves(X)

    # -- inspection ---------------------------------------------------------------------

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Mean decrease in impurity, averaged over members and normalised to sum to one."""
        per_tree = [tree.feature_importances() for tree in self.trees_ if tree.node_count > 1]
        if not per_tree:
            return np.zeros(self.n_features_in_)
        mean = np.mean(per_tree, axis=0)
        return mean / mean.sum() if mean.sum() > 0 else mean

    def in_bag_counts(self, member: int) -> NDArray[np.int64]:
        """How often each training row was drawn for ``member`` (0 = out of bag)."""
        check_is_fitted(self, "members_")
        return regenerate_counts(self.estimators_seeds_[member], self._sampling)

    def proximity(self, X: Any, *, out_of_bag: bool = False) -> NDArray[np.float64]:
        """Share of members in which two samples land in the same leaf, shape (n, n).

        With ``out_of_bag=True``, ``X`` must be the training set: a pair only counts in
        members for which both rows were out of bag (Breiman's OOB proximities), and the
        share is taken over those members.
        """
        leaves = self.apply(X)
        n = leaves.shape[0]
        same = np.zeros((n, n))
        counted = np.zeros((n, n))
        for member in range(leaves.shape[1]):
            column = leaves[:, member]
            match = column[:, None] == column[None, :]
            if out_of_bag:
                if n != self._sampling.n_samples:
                    raise ValueError("OOB proximities are defined on the training rows only.")
                oob = self.in_bag_counts(member) == 0
                both = oob[:, None] & oob[None, :]
                same += match & both
                counted += both
            else:
                same += match
        if not out_of_bag:
            return same / leaves.shape[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counted > 0, same / counted, 0.0)

    def oob_permutation_importance(
        self, X: Any, y: Any, *, n_repeats: int = 1, random_state: Any = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Breiman's OOB permutation importance on the training set ``(X, y)``.

        For each member, permute feature j among that member's out-of-bag rows and measure
        the drop in its accuracy (classification) or the rise in its squared error
        (regression); average over members. Returns ``(mean, std)`` over members.
        """
        X_encoded = self._prepare(X)
        n_samples = X_encoded.shape[0]
        if n_samples != self._sampling.n_samples:
            raise ValueError("OOB permutation importance needs the training set.")
        if self._classification:
            index = {label: i for i, label in enumerate(self.classes_.tolist())}
            target = np.array([index[label] for label in np.asarray(y).tolist()])
        else:
            target = np.asarray(y, dtype=np.float64)
        rng = np.random.default_rng(resolve_seed_sequence(random_state))
        drops = np.zeros((len(self.trees_), self.n_features_in_))
        for member, tree in enumerate(self.trees_):
            rows = np.flatnonzero(self.in_bag_counts(member) == 0)
            if rows.size < 2:
                continue
            X_oob = X_encoded[rows]
            baseline = self._member_loss(tree, X_oob, target[rows])
            used = np.unique(tree.nodes["feature"][tree.nodes["feature"] >= 0])
            for feature in used:
                losses = []
                for _ in range(n_repeats):
                    permuted = X_oob.copy()
                    permuted[:, feature] = permuted[rng.permutation(rows.size), feature]
                    losses.append(self._member_loss(tree, permuted, target[rows]))
                drops[member, feature] = np.mean(losses) - baseline
        return drops.mean(axis=0), drops.std(axis=0)

    def _member_loss(self, tree: Tree, X: NDArray[np.float64], target: NDArray[Any]) -> float:
        output = tree.predict(X)
        if self._classification:
            return float(np.mean(output.argmax(axis=1) != target))
        return float(np.mean((output[:, 0] - target) ** 2))
