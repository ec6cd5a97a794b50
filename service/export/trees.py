"""Coppice trees as one ``ai.onnx.ml`` ``TreeEnsemble`` (opset 5) node, without loss.

Read from the engine's public tree arrays (``Tree.nodes``, ``values``, ``category_bitsets``,
``NODE_DTYPE``'s fields) and the estimator's ``bin_mapper_``; the mapping, checked against the
engine's traversal (``engine.tree``'s routing rules):

- a numeric split ``x <= threshold`` is ``BRANCH_LEQ`` with the float64 threshold, true = left;
- the learned missing direction is ``nodes_missing_value_tracks_true`` = ``missing_left``
  (the operator sends NaN to the false branch unless told, so it is always written);
- a categorical split is ``BRANCH_MEMBER`` on the set of category codes that go left. The
  engine tests its own codes (the index among the categories its binner saw in training); the
  graph feeds the model's codes (``service.models.encoding``), so each set is rewritten in
  those. A model code the binner never saw is, to the engine, an unseen category that takes the
  missing direction: it is put in the set exactly when missing goes left, so it goes where the
  engine sends it. A set that holds no code, or every code, is a ``BRANCH_LEQ`` against −inf or
  +inf (the operator's sets must not be empty), NaN still going the missing way.

A leaf of the operator holds one weight for one target, so a tree whose leaves carry a vector
(a forest's class proportions) is written once per target with that target's weights
(Chen & Guestrin's XGBoost and onnxmltools write multiclass boosters the same way). A tree that
is a single leaf is one node whose branches both reach that leaf, as the operator's schema says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import AttributeProto, helper, numpy_helper

from service.export.graph import ML_DOMAIN, Graph

BRANCH_LEQ = 0
BRANCH_MEMBER = 6
AGGREGATE_SUM = 1
POST_NONE = 0

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def model_categories(graph: Graph) -> dict[int, int]:
    """Feature index → number of categories, for the model's categorical features."""
    categories: Mapping[str, list[str]] = graph.model.encoding.get("categories") or {}
    return {
        index: len(categories[str(feature["name"])])
        for index, feature in enumerate(graph.model.features)
        if str(feature["name"]) in categories
    }


@dataclass
class _Structure:
    """One tree's interior nodes and leaves in the operator's layout, numbered from 0."""

    modes: npt.NDArray[np.uint8]
    features: IntArray
    splits: FloatArray
    true_ids: IntArray
    true_leaf: IntArray
    false_ids: IntArray
    false_leaf: IntArray
    tracks_true: IntArray
    sets: list[FloatArray]  # the member sets, in node order, each ending in NaN
    leaves: IntArray  # the engine's node index of each leaf

    @property
    def n_nodes(self) -> int:
        return int(self.modes.size)


@dataclass
class TreeEnsemble:
    """Trees gathered into one ``TreeEnsemble`` node summing leaf weights per target."""

    n_targets: int
    categorical: dict[int, int]
    _parts: dict[str, list[Any]] = field(default_factory=dict)
    _n_nodes: int = 0
    _n_leaves: int = 0
    _roots: list[int] = field(default_factory=list)

    def add(
        self, tree: Any, mapper: Any, weights: FloatArray, targets: npt.NDArray[np.integer[Any]]
    ) -> None:
        """Add ``tree`` once per column of ``weights`` (one weight per engine node, leaves
        read), each copy's leaves contributing to the targets in that column of ``targets``
        (same shape). ``mapper`` is the binner the tree's estimator encodes categories with."""
        structure = _structure(tree, self._codes(mapper))
        leaf_weights = weights[structure.leaves]
        leaf_targets = targets[structure.leaves]
        for copy in range(weights.shape[1]):
            if not leaf_weights[:, copy].any():
                continue  # adds +0 to every row: leaving it out changes nothing
            self._roots.append(self._n_nodes)
            self._append(structure, self._n_nodes, self._n_leaves)
            self._put("leaf_targetids", leaf_targets[:, copy].astype(np.int64))
            self._put("leaf_weights", leaf_weights[:, copy].astype(np.float64))
            self._n_nodes += structure.n_nodes
            self._n_leaves += structure.leaves.size

    def _codes(self, mapper: Any) -> dict[int, FloatArray]:
        """For each categorical feature the engine splits as one, the engine's code of each
        model code (NaN: a category this binner never saw)."""
        if mapper is None:
            return {}
        flags = np.asarray(mapper.is_categorical_, dtype=bool)
        return {
            f: np.asarray(mapper.encode_categories(f, np.arange(n, dtype=np.float64)))
            for f, n in self.categorical.items()
            if f < flags.size and flags[f]
        }

    def _put(self, key: str, values: Any) -> None:
        self._parts.setdefault(key, []).append(values)

    def _append(self, s: _Structure, node_base: int, leaf_base: int) -> None:
        self._put("modes", s.modes)
        self._put("features", s.features)
        self._put("splits", s.splits)
        self._put("true_ids", s.true_ids + np.where(s.true_leaf == 1, leaf_base, node_base))
        self._put("false_ids", s.false_ids + np.where(s.false_leaf == 1, leaf_base, node_base))
        self._put("true_leaf", s.true_leaf)
        self._put("false_leaf", s.false_leaf)
        self._put("tracks_true", s.tracks_true)
        self._parts.setdefault("sets", []).extend(s.sets)

    def output(self, graph: Graph, X: str, hint: str = "tree_sum") -> str:
        """Add the node reading ``X``; its output is the ``[N, n_targets]`` sums."""
        out = graph.name(hint)
        node = helper.make_node("TreeEnsemble", [X], [out], domain=ML_DOMAIN)
        if not self._roots:  # no tree adds anything: one leaf of weight 0 keeps the node valid
            self._roots.append(0)
            self._append(_structure(_SingleLeaf(), {}), 0, 0)
            self._put("leaf_targetids", np.zeros(1, dtype=np.int64))
            self._put("leaf_weights", np.zeros(1))
        p = self._parts
        node.attribute.extend(
            [
                helper.make_attribute("n_targets", self.n_targets),
                helper.make_attribute("aggregate_function", AGGREGATE_SUM),
                helper.make_attribute("post_transform", POST_NONE),
                _ints("tree_roots", np.asarray(self._roots)),
                _tensor("nodes_modes", np.concatenate(p["modes"]).astype(np.uint8)),
                _ints("nodes_featureids", np.concatenate(p["features"])),
                _tensor("nodes_splits", np.concatenate(p["splits"])),
                _ints("nodes_truenodeids", np.concatenate(p["true_ids"])),
                _ints("nodes_trueleafs", np.concatenate(p["true_leaf"])),
                _ints("nodes_falsenodeids", np.concatenate(p["false_ids"])),
                _ints("nodes_falseleafs", np.concatenate(p["false_leaf"])),
                _ints("nodes_missing_value_tracks_true", np.concatenate(p["tracks_true"])),
                _ints("leaf_targetids", np.concatenate(p["leaf_targetids"])),
                _tensor("leaf_weights", np.concatenate(p["leaf_weights"])),
            ]
        )
        if p.get("sets"):
            node.attribute.append(_tensor("membership_values", np.concatenate(p["sets"])))
        graph.add_node(node)
        return out


class _SingleLeaf:
    """A tree that is one leaf, in the engine's node layout (only the fields read here)."""

    nodes = np.array([(-1,)], dtype=[("left_child", "<i4")])


def _ints(name: str, values: npt.NDArray[Any]) -> AttributeProto:
    # Built directly: helper.make_attribute checks each of a million values in Python.
    attribute = AttributeProto(name=name, type=AttributeProto.INTS)
    attribute.ints.extend(np.asarray(values, dtype=np.int64).tolist())
    return attribute


def _tensor(name: str, values: npt.NDArray[Any]) -> AttributeProto:
    return helper.make_attribute(name, numpy_helper.from_array(values))


def _structure(tree: Any, codes: dict[int, FloatArray]) -> _Structure:
    nodes = tree.nodes
    left = nodes["left_child"].astype(np.int64)
    internal = left >= 0
    inner = np.flatnonzero(internal)
    leaves = np.flatnonzero(~internal)
    if inner.size == 0:
        zero = np.zeros(1, dtype=np.int64)
        return _Structure(
            modes=np.zeros(1, dtype=np.uint8),
            features=zero,
            splits=np.zeros(1),
            true_ids=zero,
            true_leaf=zero + 1,
            false_ids=zero,
            false_leaf=zero + 1,
            tracks_true=zero,
            sets=[],
            leaves=leaves.astype(np.int64),
        )
    position = np.zeros(left.size, dtype=np.int64)
    position[inner] = np.arange(inner.size)
    position[leaves] = np.arange(leaves.size)
    true_child = left[inner]
    false_child = nodes["right_child"][inner].astype(np.int64)
    features = nodes["feature"][inner].astype(np.int64)
    splits = nodes["threshold"][inner].astype(np.float64)
    tracks = nodes["missing_left"][inner].astype(np.int64)
    modes = np.full(inner.size, BRANCH_LEQ, dtype=np.uint8)
    sets: list[FloatArray] = []
    on_categories = np.isin(features, list(codes)) if codes else np.zeros(inner.size, bool)
    for j in np.flatnonzero(on_categories):
        goes_left = _left_codes(tree, int(inner[j]), codes[int(features[j])])
        members = np.flatnonzero(goes_left)
        if members.size == 0:
            splits[j] = -np.inf
        elif members.size == goes_left.size:
            splits[j] = np.inf
        else:
            modes[j] = BRANCH_MEMBER
            splits[j] = np.nan
            sets.append(np.append(members.astype(np.float64), np.nan))
    return _Structure(
        modes=modes,
        features=features,
        splits=splits,
        true_ids=position[true_child],
        true_leaf=(~internal[true_child]).astype(np.int64),
        false_ids=position[false_child],
        false_leaf=(~internal[false_child]).astype(np.int64),
        tracks_true=tracks,
        sets=sets,
        leaves=leaves.astype(np.int64),
    )


def _left_codes(tree: Any, node: int, engine_codes: FloatArray) -> npt.NDArray[np.bool_]:
    """Whether each model code goes left at ``node``, as the engine routes its own code."""
    record = tree.nodes[node]
    missing_left = bool(record["missing_left"])
    seen = ~np.isnan(engine_codes)
    codes = np.where(seen, engine_codes, 0).astype(np.int64)
    split = int(record["category_split"])
    if split >= 0:
        bits = np.unpackbits(np.asarray(tree.category_bitsets[split], np.uint8), bitorder="little")
        inside = codes < bits.size
        left = np.where(inside, bits[np.minimum(codes, bits.size - 1)] == 1, missing_left)
    else:  # a numeric threshold on the engine's codes
        left = engine_codes <= float(record["threshold"])
    return np.where(seen, left, missing_left)


def tree_node_count(model: onnx.ModelProto) -> int:
    """Interior nodes over the graph's tree ensembles (for tests and benchmarks)."""
    total = 0
    for node in model.graph.node:
        if node.op_type == "TreeEnsemble":
            for attribute in node.attribute:
                if attribute.name == "nodes_featureids":
                    total += len(attribute.ints)
    return total
