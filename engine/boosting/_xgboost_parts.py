"""XGBoost-style boosting on a table held as parts, out of core on a Dask cluster.

``model.fit_parts(parts, read)`` fits the model ``model.fit(X, y, sample_weight)`` would fit
on the table the parts make up, with the same seed. Without a cluster
(:func:`engine.parallel_backend`) the parts are read here and :meth:`fit` runs. On a cluster the
table never passes through this process (notes/distributed-data.md, §4): the workers read
their rows (:mod:`engine.parallel._dask_parts`), the bin edges are fitted here from the rows a
single-machine fit would sample (:meth:`BinMapper.sample_rows`), and each round's trees grow
from the workers' summed histograms (:mod:`engine.tree.grow.remote`) on the first worker's
actor, which exchanges each level with the others (:meth:`DaskPartitions.grow_round`), while
the rows, their scores and their nodes stay on the workers. This process draws the round's
random numbers (the stream travels with the round and comes back) and holds the edge sample
(at most ``BinMapper.subsample`` rows) and the trees, whatever the rows.

The model equals the single-machine one up to the order of additions: each worker sums its
own rows in the local order, then the workers' sums are added (and the base score's weighted
mean is formed from the workers' sums). With one worker every sum is the local one's; the
remaining difference is that the local grower searches deep levels from rows once dense
histograms cost more than the rows, and the same bins summed in another order there.

What needs every row in one place is refused with a ValueError naming it: exact binning,
best-first growth, per-split column sampling, eval sets, and the absolute and quantile losses
(their leaves are residual quantiles; their base score a weighted median).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import resolve_seed_sequence
from engine.boosting._objectives import Objective, softmax
from engine.boosting._xgboost_rounds import _default_metric
from engine.callbacks import Callback, ProgressEvent, notify, train_metric
from engine.parallel import WorkerCrashedError, active_backend
from engine.parallel._out_of_core import codes_of, gather_sample, keep_local, replace_lost
from engine.parallel._parts import DataPart, KeptRows, PartReader, check_parts, read_parts
from engine.tree._binning import BinMapper, categorical_mask
from engine.tree._common import NARROW_CODE_DTYPE
from engine.tree._tree import Tree
from engine.tree.grow.remote import RoundPlan
from engine.tree.split.context import SplitContext

if TYPE_CHECKING:
    from engine.boosting._xgboost_base import BaseXGBoost
    from engine.parallel._dask_parts import DaskPartitions, Replay

__all__ = ["fit_parts", "out_of_core_refusals"]

FloatArray = NDArray[np.float64]
# Objectives whose base score is a weighted mean of the targets (or zero): formed from the
# workers' sums. The others need base_score set.
MEAN_BASE = ("reg:squarederror", "count:poisson", "binary:logistic", "multi:softprob", "custom")
# Objectives whose leaves are reset to residual quantiles after each tree: refused.
QUANTILE_LEAVES = ("reg:absoluteerror", "reg:quantileerror")


def fit_parts(
    model: BaseXGBoost,
    parts: Sequence[DataPart],
    read: PartReader,
    callbacks: list[Callback] | None = None,
    keep: KeptRows | None = None,
) -> None:
    """Fit ``model`` on the table of ``parts`` (see the module's docstring); fill ``keep``."""
    check_parts(parts)
    backend = active_backend()
    if backend is None:
        X, y, w = read_parts(parts, read)
        model._fit(X, y, w, None, callbacks)
        if keep is not None:
            keep_local(model, X, w, keep)
        return
    model._validate_params()
    _check_out_of_core(model, None)
    for name in [key for key in vars(model) if key.endswith("_") and not key.startswith("_")]:
        delattr(model, name)
    model._forget_packed()
    from engine.parallel._dask_parts import DaskPartitions, PartitionsLost

    with DaskPartitions(backend.client, parts, read) as table:  # type: ignore[attr-defined]
        try:
            _fit_on(model, table, callbacks, keep)
        except PartitionsLost as lost:  # before the rounds: nothing to replay onto yet
            raise WorkerCrashedError(
                f"Lost the Dask workers of partitions {lost.lost} while the workers read and "
                "binned the table; retry the fit."
            ) from lost


def out_of_core_refusals(model: BaseXGBoost) -> list[str]:
    """What in ``model``'s settings needs every row in one place (empty: it fits out of
    core). A classifier's objective follows its classes, and both of its fit."""
    objective = None if model._classification else model._objective()
    return _refusals(model, objective)


def _refusals(model: BaseXGBoost, objective: Objective | None) -> list[str]:
    name = "" if objective is None else objective.name
    refused = {
        "tree_method='exact'": model.tree_method == "exact",
        "grow_policy='lossguide'": model.grow_policy == "lossguide",
        "colsample_bynode < 1": model.colsample_bynode < 1.0,
        f"objective {name!r}": name in QUANTILE_LEAVES,
        f"objective {name!r} without base_score": objective is not None
        and model.base_score is None
        and name not in (*MEAN_BASE, *QUANTILE_LEAVES),
    }
    return [name for name, refuse in refused.items() if refuse]


def _check_out_of_core(model: BaseXGBoost, objective: Objective | None) -> None:
    """Refuse what needs every row in one place (``objective`` once the classes are known)."""
    named = _refusals(model, objective)
    if named:
        raise ValueError(
            "An out-of-core fit (fit_parts on a cluster) cannot use " + ", ".join(named) + "."
        )


def _fit_on(
    model: BaseXGBoost,
    table: DaskPartitions,
    callbacks: list[Callback] | None,
    keep: KeptRows | None,
) -> None:
    infos = table.call(
        "load",
        table.groups,
        [table.read] * len(table.groups),
        [model._classification] * len(table.groups),
    )
    # The training metric's mean is over the rows the fit learns from (positive weight).
    n_rows = sum(info["n_positive"] for info in infos)
    n_features = infos[0]["n_features"]
    if any(info["bad_targets"] for info in infos):
        raise ValueError("The target holds NaN or infinite values.")
    if any(info["bad_weights"] for info in infos):
        raise ValueError("The row weights must be finite and non-negative.")
    classes = None
    n_outputs = 1
    positive_scale = 1.0
    if model._classification:
        classes = np.unique(np.concatenate([info["labels"] for info in infos]))
        if classes.size < 2:
            raise ValueError(
                "y contains 1 class; classification needs at least two classes in the target."
            )
        model.classes_ = classes  # type: ignore[attr-defined]
        model.n_classes_ = model._n_classes = int(classes.size)  # type: ignore[attr-defined]
        n_outputs = 1 if classes.size == 2 else int(classes.size)
        positive_scale = float(getattr(model, "scale_pos_weight", 1.0))
    objective = model._objective()
    _check_out_of_core(model, objective)
    sums = np.sum(table.each("encode", classes, positive_scale), axis=0)

    root = resolve_seed_sequence(model.random_state)
    binning_seed, rounds_seed = root.spawn(2)
    mapper = model._mapper(binning_seed)  # the mapper fit() builds: its bins, its seed
    sample = gather_sample(table, infos, mapper)
    mapper.fit_sample(sample, categorical_mask(model.categorical_features, n_features))
    table.each("bin", mapper)
    if keep is not None:
        keep.sample = sample
    del sample

    base = (
        np.full(n_outputs, float(model.base_score))
        if model.base_score is not None
        else _base_score(objective.name, float(sums[0]), float(sums[1]), n_outputs)
    )
    monotone = model._monotone(mapper, objective)
    table.each("start", base, objective)
    metric = model.eval_metric or _default_metric(objective.name, n_outputs)
    from engine.parallel._dask_parts import Replay

    replay = Replay(model._classification, classes, positive_scale, mapper, base, objective, [])
    trees = _rounds(
        model,
        table,
        [info["n_rows"] for info in infos],
        replay,
        monotone,
        metric,
        n_rows,
        np.random.default_rng(rounds_seed),
        callbacks,
        n_outputs,
    )
    if keep is not None:
        keep.codes = codes_of(table, [info["n_rows"] for info in infos], keep.rows, replay)
    model.estimators_ = trees
    model.base_score_ = base
    model.bin_mapper_ = mapper
    model.n_features_in_ = n_features
    model.n_estimators_ = len(trees)
    model.evals_result_ = {}
    model.best_iteration_ = None
    model.best_score_ = None
    model.objective_ = objective.name
    model._packed()
    if keep is not None and keep.evaluate is not None:  # the model whole, the rows still here
        keep.evaluation = _evaluate(table, keep.evaluate, replay)


def _evaluate(table: DaskPartitions, evaluate: Any, replay: Replay) -> Any:
    """``evaluate`` on the actors' rows and final scores (``KeptRows.evaluate``), again from
    its start with a new actor when one is lost."""
    from engine.parallel._dask_parts import ActorCalls, PartitionsLost

    while replay.rescore:
        try:  # the scores hold dropped trees: start them afresh and add the kept ones
            table.each("start", replay.base, replay.objective)
            table.each("replay", replay.mapper, replay.stages)
            replay.rescore = False
        except PartitionsLost as lost:
            replace_lost(table, lost.lost, replay)
    while True:
        try:
            return evaluate(ActorCalls(table))
        except PartitionsLost as lost:  # the new actor replays the trees: its scores are set
            replace_lost(table, lost.lost, replay)


def _base_score(name: str, weighted_sum: float, weight: float, n_outputs: int) -> FloatArray:
    """The objectives' base scores (engine.boosting._objectives) from ``Σ w·y`` and ``Σ w``."""
    mean = weighted_sum / weight
    if name == "reg:squarederror":
        score = mean
    elif name == "binary:logistic":
        p = float(np.clip(mean, 1e-6, 1 - 1e-6))
        score = float(np.log(p / (1.0 - p)))
    elif name == "count:poisson":
        score = float(np.log(max(mean, 1e-12)))
    else:  # multi:softprob and custom objectives start at 0
        score = 0.0
    return np.full(n_outputs, score)


def _rounds(
    model: BaseXGBoost,
    table: DaskPartitions,
    sizes: list[int],
    replay: Replay,
    monotone: NDArray[np.int8] | None,
    metric: str,
    n_rows: int,
    rng: np.random.Generator,
    callbacks: list[Callback] | None,
    n_outputs: int,
) -> list[list[Tree]]:
    """The rounds of :class:`engine.boosting._xgboost_rounds.Rounds`, drawing the same numbers
    from ``rng`` in the same order (a subsample's uniforms worker by worker, the same stream).

    A round that loses a worker's actor is repeated from its start (the generator's state
    restored) once a new actor has replayed the rounds before it; a loss while the round's
    trees are added to the scores replays them too and only asks for the sums again.
    """
    from engine.parallel._dask_parts import PartitionsLost

    trees: list[list[Tree]] = replay.stages
    terms = partial(_metric_terms, metric)
    round_index = 0
    while round_index < model.n_estimators:
        state = rng.bit_generator.state
        try:
            stage, ended = _grow_round(model, table, sizes, replay.mapper, monotone, rng, n_outputs)
        except PartitionsLost as lost:
            rng.bit_generator.state = state
            replace_lost(table, lost.lost, replay)
            continue
        leaf_values = [tree.values[:, 0] for tree in stage]
        while True:
            try:
                total = sum(table.each("end_round", round_index, leaf_values, terms, ended))
                break
            except PartitionsLost as lost:
                trees.append(stage)  # the new actor replays this round too
                try:
                    replace_lost(table, lost.lost, replay)
                finally:
                    trees.pop()
        trees.append(stage)
        round_index += 1
        value = float(np.sqrt(total / n_rows)) if metric == "rmse" else total / n_rows
        event = ProgressEvent(
            type(model).__name__, round_index, model.n_estimators, {train_metric(metric): value}
        )
        stop = notify(callbacks, event)
        if stop is not None:
            if stop.keep is not None and stop.keep < len(trees):
                del trees[stop.keep :]
                replay.rescore = True
            break
    return trees


def _grow_round(
    model: BaseXGBoost,
    table: DaskPartitions,
    sizes: list[int],
    mapper: BinMapper,
    monotone: NDArray[np.int8] | None,
    rng: np.random.Generator,
    n_outputs: int,
) -> tuple[list[Tree], list[Any]]:
    """One round's trees, one per output, grown from the actors' rows; the last level of
    the trees whose end was not sent yet (:class:`engine.parallel._dask_parts._TreeRows`),
    for the round's end."""
    n_features = mapper.n_bins_.size
    keep = (
        [rng.random(size) < model.subsample for size in sizes]
        if model.subsample < 1.0
        else [None] * len(sizes)
    )
    # Sent with the first tree's start (PartsActor.start_trees): one message fewer a round.
    subset = None
    n_candidates = n_features
    if model.colsample_bytree < 1.0:
        n_candidates = max(1, round(model.colsample_bytree * n_features))
        subset = np.sort(rng.choice(n_features, n_candidates, replace=False))
    spec = model._tree_spec(n_candidates, monotone)
    ctx = SplitContext(
        binned=np.zeros((0, n_features), dtype=NARROW_CODE_DTYPE),
        channels=np.zeros((0, 2)),
        criterion=spec.criterion,
        is_categorical=mapper.is_categorical_,
        bin_values=mapper.bin_values_,
        min_samples_leaf=spec.limits.min_samples_leaf,
        min_weight_leaf=spec.limits.min_weight_leaf,
        random_splits=spec.random_splits,
        n_bins=mapper.n_bins_,
        monotone=spec.monotone,
    )
    plan = RoundPlan(
        ctx, mapper.thresholds_, spec.limits, rng, subset, n_outputs, model.colsample_bylevel >= 1.0
    )
    stage, ended = table.grow_round(plan, keep)
    for tree in stage:
        tree.values *= model.learning_rate
    return stage, ended


def _metric_terms(name: str, y: FloatArray, raw: FloatArray) -> FloatArray:
    """Per-row terms whose mean is metric ``name`` (the square root of it for rmse), as
    :func:`engine.boosting._xgboost_rounds._metric` computes it on all rows."""
    if name == "rmse":
        return (raw[:, 0] - y) ** 2
    if name == "mae":
        return np.abs(raw[:, 0] - y)
    if name == "poisson-nloglik":
        return np.exp(raw[:, 0]) - y * raw[:, 0]
    if name in ("logloss", "error"):
        p = np.clip(1.0 / (1.0 + np.exp(-raw[:, 0])), 1e-15, 1 - 1e-15)
        if name == "error":
            return ((p > 0.5) != (y > 0.5)).astype(np.float64)
        return -(y * np.log(p) + (1 - y) * np.log(1 - p))
    probabilities = np.clip(softmax(raw), 1e-15, 1.0)
    labels = y.astype(np.intp)
    if name == "merror":
        return (probabilities.argmax(axis=1) != labels).astype(np.float64)
    return -np.log(probabilities[np.arange(labels.size), labels])
