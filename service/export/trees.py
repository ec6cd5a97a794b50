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
(onnxmltools writes multiclass boosters the same way). The array work is ``layout``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import AttributeProto, helper

from service.export.graph import ML_DOMAIN, Graph
from service.export.layout import SINGLE_LEAF, Batch, FloatArray, IntArray, Structure, structure

AGGREGATE_SUM = 1
POST_NONE = 0


def model_categories(graph: Graph) -> dict[int, int]:
    """Feature index → number of categories, for the model's categorical features."""
    categories: Mapping[str, list[str]] = graph.model.encoding.get("categories") or {}
    return {
        index: len(categories[str(feature["name"])])
        for index, feature in enumerate(graph.model.features)
        if str(feature["name"]) in categories
    }


@dataclass
class TreeEnsemble:
    """Trees gathered into one ``TreeEnsemble`` node summing leaf weights per target."""

    n_targets: int
    categorical: dict[int, int]
    _parts: dict[str, list[Any]] = field(default_factory=dict)
    _n_nodes: int = 0
    _n_leaves: int = 0

    def add(
        self,
        trees: Sequence[Any],
        mapper: Any,
        weights: Sequence[FloatArray],
        targets: Sequence[npt.NDArray[np.integer[Any]]],
    ) -> None:
        """Add ``trees``, each once per column of its ``weights`` (one row per engine node,
        the leaves' rows read), each copy's leaves contributing to the targets in the same
        column of its ``targets``. ``mapper`` is the binner the trees' estimator encodes
        categories with. Converted together (a 500-tree forest would otherwise spend most of
        its export in per-tree overhead); within a target the trees keep their order, so the
        runtime adds them in the engine's order."""
        laid_out = structure(Batch.of(trees), self._codes(mapper))
        leaf_weights = np.concatenate(weights)[laid_out.leaves]
        leaf_targets = np.concatenate(targets)[laid_out.leaves]
        for copy in range(leaf_weights.shape[1]):
            if not leaf_weights[:, copy].any():
                continue  # adds +0 to every row: leaving it out changes nothing
            self._append(laid_out, leaf_weights[:, copy], leaf_targets[:, copy])

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

    def _append(self, s: Structure, weights: FloatArray, targets: npt.NDArray[Any]) -> None:
        nodes, leaves = self._n_nodes, self._n_leaves
        parts = {
            "roots": s.roots + nodes,
            "modes": s.modes,
            "features": s.features,
            "splits": s.splits,
            "true_ids": s.true_ids + np.where(s.true_leaf == 1, leaves, nodes),
            "false_ids": s.false_ids + np.where(s.false_leaf == 1, leaves, nodes),
            "true_leaf": s.true_leaf,
            "false_leaf": s.false_leaf,
            "tracks_true": s.tracks_true,
            "sets": s.sets,
            "leaf_targetids": targets.astype(np.int64),
            "leaf_weights": weights.astype(np.float64),
        }
        for key, values in parts.items():
            self._parts.setdefault(key, []).append(values)
        self._n_nodes += s.n_nodes
        self._n_leaves += s.leaves.size

    def output(self, graph: Graph, X: str, hint: str = "tree_sum") -> str:
        """Add the node reading ``X``; its output is the ``[N, n_targets]`` sums."""
        if not self._parts:  # no tree adds anything: one leaf of weight 0 keeps the node valid
            filler = structure(Batch.of([_Leaf()]), {})
            self._append(filler, np.zeros(1), np.zeros(1, dtype=np.int64))
        out = graph.name(hint)
        node = graph.new_node("TreeEnsemble", [X], [out], domain=ML_DOMAIN)
        node.attribute.extend(
            [
                helper.make_attribute("n_targets", self.n_targets),
                helper.make_attribute("aggregate_function", AGGREGATE_SUM),
                helper.make_attribute("post_transform", POST_NONE),
            ]
        )
        p = {key: np.concatenate(values) for key, values in self._parts.items()}
        _ints(node, "tree_roots", p["roots"])
        _tensor(node, "nodes_modes", p["modes"].astype(np.uint8))
        _ints(node, "nodes_featureids", p["features"])
        _tensor(node, "nodes_splits", p["splits"])
        _ints(node, "nodes_truenodeids", p["true_ids"])
        _ints(node, "nodes_trueleafs", p["true_leaf"])
        _ints(node, "nodes_falsenodeids", p["false_ids"])
        _ints(node, "nodes_falseleafs", p["false_leaf"])
        _ints(node, "nodes_missing_value_tracks_true", p["tracks_true"])
        _ints(node, "leaf_targetids", p["leaf_targetids"])
        _tensor(node, "leaf_weights", p["leaf_weights"])
        if p["sets"].size:
            _tensor(node, "membership_values", p["sets"])
        return out


class _Leaf:
    """A tree that is one leaf, in the engine's layout."""

    nodes = SINGLE_LEAF
    category_bitsets = np.zeros((0, 32), dtype=np.uint8)


def _ints(node: onnx.NodeProto, name: str, values: IntArray) -> None:
    # Filled in place: helper.make_attribute checks each of a million values in Python, and
    # each copy of the message would copy them all.
    attribute = node.attribute.add()
    attribute.name = name
    attribute.type = AttributeProto.INTS
    attribute.ints.extend(np.asarray(values, dtype=np.int64).tolist())


def _tensor(node: onnx.NodeProto, name: str, values: npt.NDArray[Any]) -> None:
    attribute = node.attribute.add()
    attribute.name = name
    attribute.type = AttributeProto.TENSOR
    array = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    attribute.t.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
    attribute.t.dims.extend(array.shape)
    attribute.t.raw_data = array.tobytes()  # ONNX raw data is little-endian


def tree_node_count(model: onnx.ModelProto) -> int:
    """Interior nodes over the graph's tree ensembles (for tests and benchmarks)."""
    total = 0
    for node in model.graph.node:
        if node.op_type == "TreeEnsemble":
            for attribute in node.attribute:
                if attribute.name == "nodes_featureids":
                    total += len(attribute.ints)
    return total
