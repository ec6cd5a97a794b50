"""Random forests and extra trees on a table held as parts, out of core on a Dask cluster.

``forest.fit_parts(parts, read)`` fits the forest ``forest.fit(X, y, sample_weight)`` fits
on the table the parts make up, with the same seed. Without a cluster the parts are read
here and :meth:`fit` runs. On a cluster the table never passes through this process
(notes/distributed-data.md, §4.E), as for boosting (:mod:`engine.boosting._xgboost_parts`):
the workers read, bin and keep their rows (:mod:`engine.parallel._dask_parts`), the bin
edges are fitted here from the rows a single-machine fit samples, and the trees grow here
from the workers' summed histograms (:mod:`engine.tree.grow.remote_forest`), a batch of up
to ``TREES_PER_BATCH`` trees in lockstep (one exchange per step for all of them; fewer where
the workers' memory limits leave room for fewer, :func:`batch_size`).

Each tree's bootstrap is drawn block-wise (:mod:`engine.ensemble._sampling`): here, the
blocks' totals from the tree's stream (one number per block of rows); on each worker, its
rows' counts from the tree's seed and the totals, so the sample is the local fit's whatever
the number of workers, and no process holds a count per row of the table.

A worker lost mid-fit is replaced as in boosting: the new actor reads its rows again, bins
them with the fit's edges and adds the finished trees' outputs to its rows' sums; the batch
that was growing is grown again from its trees' seeds (each tree has its own stream), and
the fit ends with the same model.

The model equals the single-machine one on the rows of positive weight (rows of weight 0, a
validation split riding along, take no part, as in boosting) up to the order of additions:
histograms are summed over workers, so with integer weights and targets of few bits (class
labels, bootstrap counts) every sum is exact and the trees are the local ones to the bit;
with targets of more bits a sum moves by ulps, and in a small node two features that part
its rows alike (a tie) can swap places. What needs every row in one place is refused with a ValueError naming
it: out-of-bag scores and early stopping, class weights, best-first growth
(``max_leaf_nodes``), random cuts of categorical features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import resolve_seed_sequence
from engine.callbacks import Callback, ProgressEvent, notify
from engine.ensemble._sampling import MemberSampling, block_totals, draw_features, member_seeds
from engine.parallel import WorkerCrashedError, active_backend
from engine.parallel._forest_rows import ForestBatch
from engine.parallel._out_of_core import codes_of, gather_sample, keep_local, replace_lost
from engine.parallel._parts import DataPart, KeptRows, PartReader, check_parts, read_parts
from engine.tree._binning import BinMapper, categorical_mask
from engine.tree._classes import resolve_limits
from engine.tree._common import NARROW_CODE_DTYPE
from engine.tree._tree import Tree
from engine.tree.grow.build import TreeSpec
from engine.tree.grow.remote_forest import forest_tree_steps, grow_forest_together
from engine.tree.split.context import SplitContext

if TYPE_CHECKING:
    from engine.ensemble._forest import BaseForest
    from engine.parallel._dask_parts import DaskPartitions, Replay

__all__ = ["TREES_PER_BATCH", "batch_size", "fit_parts", "forest_refusals", "grow_batch"]

# Trees grown in lockstep, at most: the batch shares one exchange per step, and each of its
# trees costs every worker TREE_BYTES_PER_ROW + 8 C bytes a row while it grows (its weights,
# channels, rows' node slots and leaves), so fewer grow together where the workers' memory
# limits call for it (batch_size); the forest is the same for any batch size.
TREES_PER_BATCH = 8
TREE_BYTES_PER_ROW = 32
# A growing tree's measured peak on a worker over the state above (a level's moves and
# histograms' temporaries): two 1 GiB workers with 1 M rows each passed their limits in the
# first batch of 8 trees, where the state alone left room for 8 (`make scale-test`).
TREE_PEAK_FACTOR = 2.5
# The share of a worker's memory limit its rows' state may take (the nanny kills at 95%;
# a level's moves and one part's read need the rest).
WORKER_MEMORY_SHARE = 0.6
# Histogram cells (float64) one exchange may bring back for the whole batch: the fit
# process holds at most this share of a level's histograms (32 MiB), whatever the depth.
HISTOGRAM_CELLS = 1 << 22


def forest_refusals(model: BaseForest) -> list[str]:
    """What in ``model``'s settings needs every row in one place (empty: it fits out of
    core on a cluster)."""
    settings = model._tree_settings()
    random_cuts = model._random_splits or settings.splitter == "random"
    refused = {
        "oob_score=True": bool(model.oob_score),
        "early_stopping='oob'": model.early_stopping == "oob",
        "class_weight": getattr(model, "class_weight", None) is not None,
        "max_leaf_nodes": settings.max_leaf_nodes is not None,
        "random cuts of categorical_features": random_cuts and bool(settings.categorical_features),
    }
    return [name for name, refuse in refused.items() if refuse]


def fit_parts(
    model: BaseForest,
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
        learns = slice(None) if w is None or w.all() else w > 0  # as on a cluster
        model._fit(X[learns], y[learns], None if w is None else w[learns], callbacks)
        model._packed()
        if keep is not None:
            keep_local(model, X, w, keep)
        return
    model._validate_params()
    refused = forest_refusals(model)
    if refused:
        raise ValueError(
            "An out-of-core fit (fit_parts on a cluster) cannot use " + ", ".join(refused) + "."
        )
    model._forget_fit()
    from engine.parallel._dask_parts import DaskPartitions, PartitionsLost

    with DaskPartitions(backend.client, parts, read) as table:  # type: ignore[attr-defined]
        try:
            _fit_on(model, table, callbacks, keep)
        except PartitionsLost as lost:  # before the trees: nothing to replay onto yet
            raise WorkerCrashedError(
                f"Lost the Dask workers of partitions {lost.lost} while the workers read and "
                "binned the table; retry the fit."
            ) from lost


def _fit_on(
    model: BaseForest,
    table: DaskPartitions,
    callbacks: list[Callback] | None,
    keep: KeptRows | None,
) -> None:
    from engine.parallel._dask_parts import ForestSetup, Replay

    n = len(table.groups)
    classification = model._classification
    infos = table.call("load", table.groups, [table.read] * n, [classification] * n)
    sizes = [info["n_rows"] for info in infos]
    # The forest learns from the rows of positive weight alone (the local fit on them): its
    # bootstrap draws from them, numbered across the actors in order.
    positives = [info["n_positive"] for info in infos]
    n_samples, n_features = sum(positives), infos[0]["n_features"]
    if any(info["bad_targets"] for info in infos):
        raise ValueError("The target holds NaN or infinite values.")
    if any(info["bad_weights"] for info in infos):
        raise ValueError("The row weights must be finite and non-negative.")
    classes, n_outputs = None, 1
    if classification:
        classes = np.unique(np.concatenate([info["labels"] for info in infos]))
        model.classes_ = classes
        model.n_classes_ = n_outputs = int(classes.size)
    total_weight = float(np.sum(table.each("encode", classes, 1.0), axis=0)[1])

    settings = model._tree_settings()
    root = resolve_seed_sequence(model.random_state)
    binning_seed, members_seed = root.spawn(2)
    mapper = BinMapper(settings.max_bins, seed=int(binning_seed.generate_state(1)[0]))
    sample = gather_sample(table, infos, mapper)
    mapper.fit_sample(sample, categorical_mask(settings.categorical_features, n_features))
    table.each("bin", mapper)
    if keep is not None:
        keep.sample = sample
    del sample

    sampling = model._resolve_sampling(n_samples, n_features)
    spec = TreeSpec(
        criterion=settings.criterion,
        random_splits=model._random_splits or settings.splitter == "random",
        limits=resolve_limits(settings, n_samples, total_weight, n_features),
        n_classes=n_outputs if classification else 0,
    )
    first_rows = np.concatenate(([0], np.cumsum(positives)[:-1])).tolist()
    setup = ForestSetup(sampling, first_rows, n_outputs)
    replay = Replay(classification, classes, 1.0, mapper, None, None, [], forest=setup)
    table.call("start_forest", [sampling] * n, first_rows, [n_outputs] * n, [classification] * n)
    seeds = member_seeds(members_seed, model.n_estimators)
    limits = [
        table.client.scheduler_info()["workers"].get(worker, {}).get("memory_limit")
        for worker in table.workers
    ]
    size = batch_size(max(sizes), n_features, n_outputs if classification else 2, limits)
    trees = _batches(model, table, mapper, spec, sampling, seeds, replay, callbacks, size)
    if keep is not None:
        keep.codes = codes_of(table, sizes, keep.rows, replay)
    model.members_ = trees
    model.estimators_features_ = [None] * len(trees)
    model.estimators_seeds_ = seeds[: len(trees)]
    model.n_estimators_ = len(trees)
    model.bin_mapper_ = mapper
    model.n_features_in_ = n_features
    model._sampling = sampling
    model._packed()
    if keep is not None and keep.evaluate is not None:
        keep.evaluation = _evaluate(table, keep.evaluate, replay)


def batch_size(rows: int, n_features: int, n_channels: int, memory_limits: Sequence[Any]) -> int:
    """How many trees grow together: ``TREES_PER_BATCH``, or as many as the tightest
    worker's memory limit leaves room for beside its ``rows`` (at least one)."""
    known = [int(limit) for limit in memory_limits if limit]
    if not known:
        return TREES_PER_BATCH
    held = rows * (n_features + 17 + 8 * n_channels)  # codes, target, weight, flag, scores
    room = WORKER_MEMORY_SHARE * min(known) - held
    per_tree = rows * (TREE_BYTES_PER_ROW + 8 * n_channels) * TREE_PEAK_FACTOR
    return int(max(1, min(TREES_PER_BATCH, room // max(per_tree, 1))))


def _batches(
    model: BaseForest,
    table: DaskPartitions,
    mapper: BinMapper,
    spec: TreeSpec,
    sampling: MemberSampling,
    seeds: NDArray[np.uint64],
    replay: Replay,
    callbacks: list[Callback] | None,
    size: int,
) -> list[Tree]:
    """The forest's trees, ``size`` at a time; a batch that loses a worker's actor is grown
    again from its seeds once a new actor stands where the lost one stood."""
    from engine.parallel._dask_parts import PartitionsLost

    assert replay.forest is not None
    trees: list[Tree] = replay.forest.trees
    name, total = type(model).__name__, len(seeds)
    for batch, start in enumerate(range(0, total, size)):
        batch_seeds = seeds[start : start + size]
        while True:
            try:
                grown, ended = grow_batch(
                    mapper,
                    spec,
                    sampling,
                    batch_seeds,
                    lambda sent: table.each("forest_steps", sent),
                )
                break
            except PartitionsLost as lost:
                replace_lost(table, lost.lost, replay)
        values = [tree.values for tree in grown]
        while True:
            try:
                table.each("end_forest_batch", batch, values, ended)
                break
            except PartitionsLost as lost:
                trees.extend(grown)  # the new actor adds this batch's trees too
                replay.forest.batch = batch
                try:
                    replace_lost(table, lost.lost, replay)
                finally:
                    del trees[len(trees) - len(grown) :]
                    replay.forest.batch = batch - 1
        trees.extend(grown)
        replay.forest.batch = batch
        for done in range(start + 1, start + len(grown) + 1):
            stop = notify(callbacks, ProgressEvent(name, done, total))
            if stop is not None:
                if stop.keep is not None and stop.keep < len(trees):
                    del trees[stop.keep :]
                    replay.rescore = True
                return trees
    return trees


def grow_batch(
    mapper: BinMapper,
    spec: TreeSpec,
    sampling: MemberSampling,
    seeds: NDArray[np.uint64],
    send: Any,
) -> tuple[list[Tree], list[Any]]:
    """The trees of ``seeds`` grown in lockstep on rows held elsewhere (``send`` gives every
    holder's answers to a list of requests; :class:`engine.parallel._forest_rows.
    ForestBatch`), each drawing from its own stream as the local fit's member does: its
    blocks' totals, its features, then its tree. The trees and the steps kept for the
    batch's end."""
    n_features = mapper.n_bins_.size
    n_channels = spec.n_classes or 2
    ctx = SplitContext(
        binned=np.zeros((0, n_features), dtype=NARROW_CODE_DTYPE),
        channels=np.zeros((0, n_channels)),
        criterion=spec.criterion,
        is_categorical=mapper.is_categorical_,
        bin_values=mapper.bin_values_,
        min_samples_leaf=spec.limits.min_samples_leaf,
        min_weight_leaf=spec.limits.min_weight_leaf,
        random_splits=spec.random_splits,
        n_bins=mapper.n_bins_,
    )
    draws, steps = {}, {}
    cells = max(1, HISTOGRAM_CELLS // len(seeds))
    for k, seed in enumerate(seeds):
        rng = np.random.default_rng(int(seed))
        draws[k] = (int(seed), block_totals(rng, sampling))
        if draw_features(rng, sampling) is not None:
            raise ValueError("Forest members draw no feature subsets out of core.")
        steps[k] = forest_tree_steps(ctx, mapper.thresholds_, spec.limits, rng, cells)
    rows = ForestBatch(send, draws)
    return grow_forest_together(steps, rows), rows.ended


def _evaluate(table: DaskPartitions, evaluate: Any, replay: Replay) -> Any:
    """``evaluate`` on the actors' rows and the forest's mean outputs (``KeptRows.evaluate``),
    again from its start with a new actor when one is lost."""
    from engine.parallel._dask_parts import ActorCalls, PartitionsLost

    assert replay.forest is not None
    while True:
        try:
            if replay.rescore:  # the sums hold dropped trees: start afresh with the kept ones
                table.each("replay_forest", replay.mapper, replay.forest.trees, replay.forest.batch)
                replay.rescore = False
            table.each("mean_forest")
            return evaluate(ActorCalls(table))
        except PartitionsLost as lost:  # the new actor adds the trees: its sums are set
            replace_lost(table, lost.lost, replay)
