"""Which candidate features each node of a growing tree searches.

:class:`FeatureSampler`, held by :class:`engine.tree.grow.growth.Growth`, samples features: the
pool of a depth level (XGBoost's ``colsample_bylevel``), then per node ``max_features`` of it at
a time, drawing again from the rest while a node finds no valid split.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from engine.tree.grow.level_kernels import shuffle_rows
from engine.tree.grow.limits import GrowthLimits
from engine.tree.grow.node_keys import key_uniforms
from engine.tree.split.context import Splits

__all__ = ["FeatureSampler"]


class FeatureSampler:
    """The feature draws of one growing tree, from its random stream."""

    def __init__(
        self,
        limits: GrowthLimits,
        rng: np.random.Generator,
        feature_subset: NDArray[np.int64] | None,
        n_features: int,
        random_cuts: bool,
    ) -> None:
        self.limits = limits
        self.rng = rng
        self.random_cuts = random_cuts
        candidates = np.arange(n_features) if feature_subset is None else np.asarray(feature_subset)
        self.level_size = min(limits.level_features or candidates.size, candidates.size)
        per_round = limits.max_features or candidates.size
        # When every node searches every feature, ties between features go to the first
        # one searched: a random order per tree keeps such ties from always favouring the
        # same feature (scikit-learn shuffles the features at every node for the same reason).
        self.candidates = (
            rng.permutation(candidates) if per_round >= self.level_size else candidates
        )
        self.level_pools: dict[int, NDArray[np.int64]] = {}

    def searches_every_feature(self) -> bool:
        """Whether every node of a level searches all the level's features (no per-split
        sampling), as per-node histograms kept for subtraction need."""
        return (self.limits.max_features or self.candidates.size) >= self.level_size

    def level_pool(self, depth: int) -> NDArray[np.int64]:
        """The candidate features of a depth level, drawn once per level (in tree order)."""
        if self.level_size >= self.candidates.size:
            return self.candidates
        pool = self.level_pools.get(depth)
        if pool is None:
            drawn = self.rng.choice(self.candidates.size, self.level_size, replace=False)
            pool = self.level_pools[depth] = self.candidates[np.sort(drawn)]
        return pool

    def draw_rounds(
        self,
        n_slots: int,
        depth: int,
        search_round: Callable[[NDArray[np.intp], NDArray[np.int64]], Splits],
    ) -> Splits:
        """Draw each node's candidate features and search them, ``max_features`` at a time.

        ``search_round(pending, features)`` searches the nodes ``pending`` (indices into the
        batch) on ``features`` (one row per pending node, −1 padded). As in scikit-learn, a
        node whose drawn features admit no valid split keeps drawing from its remaining
        features before it is declared a leaf.
        """
        pool = self.level_pool(depth)
        n_candidates = pool.size
        per_round = self.limits.max_features or n_candidates
        if per_round >= n_candidates:
            features = np.broadcast_to(pool, (n_slots, n_candidates))
            return search_round(np.arange(n_slots), np.ascontiguousarray(features))
        random_cuts = self.random_cuts
        if random_cuts:
            # Random cuts draw a round's candidates when they need them, one uniform each.
            order = np.tile(np.arange(n_candidates, dtype=np.intp), (n_slots, 1))
        else:
            order = self.rng.random((n_slots, n_candidates)).argsort(axis=1)
        result: Splits | None = None
        pending = np.arange(n_slots)
        for start in range(0, n_candidates, per_round):
            if random_cuts:
                width = min(per_round, n_candidates - start)
                shuffle_rows(order, pending, self.rng.random((pending.size, width)), start)
            features = pool[order[pending, start : start + per_round]]
            if features.shape[1] < per_round:
                pad = np.full((pending.size, per_round - features.shape[1]), -1)
                features = np.concatenate([features, pad], axis=1)
            splits = search_round(pending, features)
            result = splits if result is None else _merge(result, splits, pending)
            pending = pending[~splits.found]
            if pending.size == 0:
                break
        assert result is not None
        return result

    def draw_keyed_rounds(
        self,
        keys: NDArray[np.uint64],
        depth: int,
        search_round: Callable[[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]], Splits],
    ) -> Splits:
        """:meth:`draw_rounds` for random cuts whose draws come from each node's key
        (:mod:`engine.tree.grow.node_keys`) instead of the tree's stream: the same rounds,
        each node's candidates drawn by the Fisher–Yates steps of its own uniforms and
        ``search_round(pending, features, uniforms)`` given the thresholds' uniforms,
        ``uniforms[j · P + k]`` for pending node ``k``'s ``j``-th candidate of the round."""
        pool = self.level_pool(depth)
        n_slots, n_candidates = keys.size, pool.size
        per_round = self.limits.max_features or n_candidates
        if per_round >= n_candidates:
            features = np.ascontiguousarray(np.broadcast_to(pool, (n_slots, n_candidates)))
            uniforms = key_uniforms(keys, 2 * np.arange(n_candidates))
            return search_round(np.arange(n_slots), features, uniforms.T.ravel())
        order = np.tile(np.arange(n_candidates, dtype=np.intp), (n_slots, 1))
        result: Splits | None = None
        pending = np.arange(n_slots)
        for start in range(0, n_candidates, per_round):
            width = min(per_round, n_candidates - start)
            positions = start + np.arange(per_round)
            steps = key_uniforms(keys[pending], 2 * positions[:width] + 1)
            shuffle_rows(order, pending, steps, start)
            features = pool[order[pending, start : start + per_round]]
            if features.shape[1] < per_round:
                pad = np.full((pending.size, per_round - features.shape[1]), -1)
                features = np.concatenate([features, pad], axis=1)
            uniforms = key_uniforms(keys[pending], 2 * positions).T.ravel()
            splits = search_round(pending, features, uniforms)
            result = splits if result is None else _merge(result, splits, pending)
            pending = pending[~splits.found]
            if pending.size == 0:
                break
        assert result is not None
        return result


def _merge(result: Splits, update: Splits, slots: NDArray[np.intp]) -> Splits:
    """Overwrite the entries of ``slots`` that ``update`` found splits for."""
    found = slots[update.found]
    for name in ("found", "gain", "feature", "bin", "missing_left", "left_codes"):
        getattr(result, name)[found] = getattr(update, name)[update.found]
    return result
