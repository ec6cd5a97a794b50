"""What a growing tree records: its nodes as they are created and the splits applied to them.

:class:`NodeRecorder`, held by :class:`engine.tree.grow.growth.Growth`, adds nodes, applies
the chosen splits (feature, threshold, missing direction, category bitset, children) and
flattens nodes and splits into a :class:`Tree` when the tree is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import BITSET_BYTES, BITSET_DTYPE, N_CATEGORY_CODES
from engine.tree._tree import NODE_DTYPE, Tree
from engine.tree.split.context import SplitContext, Splits

__all__ = ["NodeRecorder"]


@dataclass
class _NodeTable:
    """Nodes as they are created, flattened into a :class:`Tree` at the end."""

    columns: dict[str, list[NDArray[np.generic]]] = field(default_factory=dict)
    values: list[NDArray[np.float64]] = field(default_factory=list)
    bitsets: list[NDArray[np.uint8]] = field(default_factory=list)
    n_nodes: int = 0
    n_bitsets: int = 0

    def add(self, values: NDArray[np.float64], **columns: NDArray[np.generic]) -> NDArray[np.intp]:
        ids = np.arange(self.n_nodes, self.n_nodes + values.shape[0])
        self.n_nodes += values.shape[0]
        self.values.append(values)
        for name, column in columns.items():
            self.columns.setdefault(name, []).append(np.asarray(column))
        return ids

    def finish(
        self,
        n_features: int,
        split_columns: dict[str, NDArray[np.generic]],
        order: NDArray[np.intp] | None = None,
    ) -> Tree:
        """The tree, its nodes in the order recorded (or node ``order[i]`` as node ``i``,
        children renumbered)."""
        nodes = np.zeros(self.n_nodes, dtype=NODE_DTYPE)
        for name, parts in self.columns.items():
            column = np.concatenate(parts)
            nodes[name] = column if order is None else column[order]
        for name, column in split_columns.items():
            nodes[name] = column if order is None else column[order]
        values = np.concatenate(self.values)
        if order is not None:
            values = values[order]
            new_of_old = np.empty(self.n_nodes, dtype=np.int64)
            new_of_old[order] = np.arange(self.n_nodes)
            for name in ("left_child", "right_child"):
                child = nodes[name]
                nodes[name] = np.where(child >= 0, new_of_old[np.maximum(child, 0)], -1)
        bitsets = (
            np.concatenate(self.bitsets)
            if self.bitsets
            else np.zeros((0, BITSET_BYTES), dtype=BITSET_DTYPE)
        )
        return Tree(nodes, values, bitsets, n_features)


class NodeRecorder:
    """The nodes and split records of one growing tree."""

    def __init__(self, ctx: SplitContext, thresholds: NDArray[np.float64]) -> None:
        self.ctx = ctx
        self.thresholds = thresholds
        self.table = _NodeTable()
        size = 64
        self.split_feature = np.full(size, -1, dtype=np.int64)
        self.split_left = np.full(size, -1, dtype=np.int64)
        self.split_threshold = np.zeros(size)
        self.split_missing_left = np.zeros(size, dtype=bool)
        self.split_category = np.full(size, -1, dtype=np.int64)
        self.order: NDArray[np.intp] | None = None  # set by level_order

    def add(self, values: NDArray[np.float64], **columns: NDArray[np.generic]) -> NDArray[np.intp]:
        """Record new nodes (their values and node columns); return their ids."""
        return self.table.add(values, **columns)

    @property
    def root_weight(self) -> float:
        """The root's weight (cover), once recorded: the unit of ``min_impurity_decrease``."""
        return float(self.table.columns["weighted_n_samples"][0][0])

    def apply_splits(
        self, node_ids: NDArray[np.intp], splits: Splits, chosen: NDArray[np.bool_]
    ) -> NDArray[np.intp]:
        """Record the chosen splits; return the id of each new left child."""
        ids = node_ids[chosen]
        needed = int(ids.max()) + 1 if ids.size else 0
        if needed > self.split_feature.size:
            self._grow_split_arrays(needed)
        first_child = self.table.n_nodes
        left_ids = first_child + 2 * np.arange(ids.size)
        feature = splits.feature[chosen]
        split_bin = splits.bin[chosen]
        self.split_feature[ids] = feature
        self.split_left[ids] = left_ids
        self.split_missing_left[ids] = splits.missing_left[chosen]
        categorical = self.ctx.is_categorical[feature]
        last_bin = self.ctx.missing_code - 1
        self.split_threshold[ids] = np.where(
            categorical, np.nan, self.thresholds[feature, np.minimum(split_bin, last_bin)]
        )
        if categorical.any():
            # Categories have codes below MAX_BINS in either code width: a bitset's
            # N_CATEGORY_CODES bits hold them all.
            codes = splits.left_codes[chosen][categorical][:, :N_CATEGORY_CODES]
            self.table.bitsets.append(np.packbits(codes, axis=1, bitorder="little"))
            start = self.table.n_bitsets
            self.table.n_bitsets += int(categorical.sum())
            self.split_category[ids[categorical]] = np.arange(start, self.table.n_bitsets)
        return left_ids

    def set_numeric_splits(
        self,
        ids: NDArray[np.intp],
        feature: NDArray[np.int64],
        split_bin: NDArray[np.int64],
        missing_left: NDArray[np.bool_],
        left_ids: NDArray[np.intp],
    ) -> None:
        """Record numeric splits whose children are recorded already (``left_ids``, each
        right child the next id), as :meth:`apply_splits` records a threshold."""
        needed = int(ids.max()) + 1 if ids.size else 0
        if needed > self.split_feature.size:
            self._grow_split_arrays(needed)
        self.split_feature[ids] = feature
        self.split_left[ids] = left_ids
        self.split_missing_left[ids] = missing_left
        last_bin = self.ctx.missing_code - 1
        self.split_threshold[ids] = self.thresholds[feature, np.minimum(split_bin, last_bin)]

    def level_order(self) -> NDArray[np.intp]:
        """Renumber the nodes level by level, each level's in its parents' order, left
        before right (the order the level loop records them in); return each old node's new
        number. :meth:`finish` then writes the tree in that order."""
        n = self.table.n_nodes
        if n > self.split_left.size:
            self._grow_split_arrays(n)
        left = self.split_left[:n]
        order = [np.zeros(1, dtype=np.intp)]
        level = order[0]
        while level.size:
            lefts = left[level]
            lefts = lefts[lefts >= 0]
            level = np.stack([lefts, lefts + 1], axis=1).ravel()
            order.append(level)
        self.order = np.concatenate(order)
        new_of_old = np.empty(n, dtype=np.intp)
        new_of_old[self.order] = np.arange(n)
        return new_of_old

    def _grow_split_arrays(self, needed: int) -> None:
        size = max(needed, 2 * self.split_feature.size)
        for name, fill in (
            ("split_feature", -1),
            ("split_left", -1),
            ("split_threshold", 0.0),
            ("split_missing_left", False),
            ("split_category", -1),
        ):
            old = getattr(self, name)
            new = np.full(size, fill, dtype=old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def goes_right(
        self,
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        splits: Splits,
    ) -> NDArray[np.bool_]:
        codes = self.ctx.binned[rows, splits.feature[slot_of_row]]
        return ~splits.left_codes[slot_of_row, codes]

    def finish(self) -> Tree:
        n = self.table.n_nodes
        if n > self.split_left.size:
            self._grow_split_arrays(n)
        left = self.split_left[:n]
        return self.table.finish(
            self.ctx.binned.shape[1],
            {
                "left_child": left,
                "right_child": np.where(left >= 0, left + 1, -1),
                "feature": self.split_feature[:n],
                "threshold": np.where(left >= 0, self.split_threshold[:n], 0.0),
                "missing_left": self.split_missing_left[:n],
                "category_split": self.split_category[:n],
            },
            self.order,
        )
