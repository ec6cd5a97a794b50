"""A large fitted forest without the minutes of growing one, for tests of saving and storing."""

from __future__ import annotations

from typing import Any

import numpy as np

import engine
from engine.tree._tree import NODE_DTYPE, Tree


def synthetic_forest(n_trees: int, nodes_per_tree: int) -> Any:
    """A fitted forest whose members are replaced by large random trees: the save path sees
    the arrays of a large forest without the minutes of growing one."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    forest = engine.RandomForestClassifier(n_estimators=2, random_state=0).fit(X, X[:, 0] > 0)
    members = []
    for _ in range(n_trees):
        nodes = np.zeros(nodes_per_tree, dtype=NODE_DTYPE)
        nodes["left_child"] = rng.integers(-1, nodes_per_tree, nodes_per_tree)
        nodes["threshold"] = rng.normal(size=nodes_per_tree)
        nodes["weighted_n_samples"] = rng.random(nodes_per_tree)
        values = rng.random((nodes_per_tree, 2))
        members.append(Tree(nodes, values, np.zeros((0, 32), dtype=np.uint8), 4))
    forest.members_ = members
    return forest
