"""The ONNX graph around every exported model: its inputs, its outputs and the nodes between.

One graph input per feature, named as the feature, shape ``[N, 1]``: ``tensor(double)`` for a
numeric feature, ``tensor(string)`` for a categorical one. A categorical input goes through a
``LabelEncoder`` to the category's code, its index in the model's category list, as ``/v1``
predict encodes it (``service.models.encoding``); a string training never saw, like a missing
value, becomes NaN. The columns are then concatenated into ``X``, the ``[N, F]`` float64
matrix the estimator itself predicts from, so each family's module only maps the estimator.

Outputs: ``label`` (``[N]`` strings) and ``probabilities`` (``[N, n_classes]`` float64, in the
order of the model's classes) for a classifier, ``prediction`` (``[N]`` float64) for a
regressor.

Opsets: the default domain at 21 and ``ai.onnx.ml`` at 5, the first whose tree-ensemble
operator (``TreeEnsemble``) takes double inputs and thresholds, category sets
(``BRANCH_MEMBER``) and a missing-value direction per node. IR version 10 (ONNX 1.16), so
runtimes a little older than this ``onnx`` package still load the file.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from service.models.cache import LoadedModel

OPSET = 21
ML_OPSET = 5
IR_VERSION = 10
ML_DOMAIN = "ai.onnx.ml"


@dataclass(frozen=True)
class Answer:
    """What an estimator's part of the graph gives, before it becomes the graph's outputs (or
    a member's input to a combiner): ``proba`` ``[N, K]`` over the estimator's ``classes_``
    and optionally ``label_index`` ``[N]`` (when the label is not the first argmax of
    ``proba``), or ``prediction`` ``[N, 1]``."""

    proba: str | None = None
    label_index: str | None = None
    prediction: str | None = None


class Graph:
    """Nodes and constants being added to one model's graph, starting from its inputs."""

    def __init__(self, model: LoadedModel) -> None:
        self.model = model
        # Built in place in the final message: a tree ensemble's attributes hold millions of
        # values, and helper.make_graph/make_model would copy them twice more.
        self.proto = onnx.ModelProto()
        self.inputs = self.proto.graph.input
        self.outputs = self.proto.graph.output
        self._taken = {str(feature["name"]) for feature in model.features}
        self._counter = itertools.count()
        self.X = self._feature_matrix()

    # --- names, constants and nodes ---------------------------------------------------------

    def name(self, hint: str) -> str:
        """A tensor name no feature and no other tensor has (features may be named anything)."""
        while True:
            candidate = f"coppice/{hint}_{next(self._counter)}"
            if candidate not in self._taken:
                self._taken.add(candidate)
                return candidate

    def constant(self, hint: str, value: Any, dtype: Any = np.float64) -> str:
        array = np.asarray(value, dtype=dtype)
        name = self.name(hint)
        self.proto.graph.initializer.append(numpy_helper.from_array(array, name=name))
        return name

    def add(
        self,
        op: str,
        inputs: Sequence[str],
        hint: str | None = None,
        *,
        domain: str = "",
        output: str | None = None,
        **attributes: Any,
    ) -> str:
        """Add one node of one output, and return the output's name."""
        out = output if output is not None else self.name(hint or op.lower())
        self.proto.graph.node.append(
            helper.make_node(op, list(inputs), [out], domain=domain, **attributes)
        )
        return out

    def new_node(
        self, op: str, inputs: Sequence[str], outputs: Sequence[str], domain: str = ""
    ) -> onnx.NodeProto:
        """A node added now, for the caller to fill its attributes in place."""
        node: onnx.NodeProto = self.proto.graph.node.add()
        node.op_type = op
        node.domain = domain
        node.input.extend(inputs)
        node.output.extend(outputs)
        return node

    # --- inputs -----------------------------------------------------------------------------

    def _feature_matrix(self) -> str:
        categories: dict[str, list[str]] = dict(self.model.encoding.get("categories") or {})
        columns = []
        for feature in self.model.features:
            name = str(feature["name"])
            if name in categories:
                self.inputs.append(
                    helper.make_tensor_value_info(name, TensorProto.STRING, [None, 1])
                )
                # Codes as float: every code (< 256) is exact in float32, and NaN is the
                # default of an unseen string; then cast, as the trees compare doubles.
                code = self.add(
                    "LabelEncoder",
                    [name],
                    "code",
                    domain=ML_DOMAIN,
                    keys_strings=[str(c) for c in categories[name]],
                    values_floats=[float(i) for i in range(len(categories[name]))],
                    default_float=float("nan"),
                )
                columns.append(self.add("Cast", [code], "code_double", to=TensorProto.DOUBLE))
            else:
                self.inputs.append(
                    helper.make_tensor_value_info(name, TensorProto.DOUBLE, [None, 1])
                )
                columns.append(name)
        if len(columns) == 1:
            return self.add("Identity", columns, "X")
        return self.add("Concat", columns, "X", axis=1)

    # --- outputs ----------------------------------------------------------------------------

    def classifier_outputs(
        self,
        probabilities: str | None,
        estimator_classes: Sequence[Any],
        label_index: str | None = None,
    ) -> None:
        """``label`` and ``probabilities`` from the estimator's ``[N, K]`` probabilities (its
        columns in ``estimator_classes`` order). The label is the estimator's class at
        ``label_index`` (``[N]`` int64), by default the first most probable, as
        ``classes_[proba.argmax(axis=1)]``; probabilities are put in the order of the model's
        classes, a class the estimator never saw a column of zeros (``over_classes``). A
        model without probabilities (a perceptron) has the ``label`` output alone."""
        labels = [str(c) for c in estimator_classes]
        classes = list(self.model.classes or labels)
        if label_index is None:
            assert probabilities is not None
            label_index = self.add("ArgMax", [probabilities], "argmax", axis=1, keepdims=0)
        names = self.constant("class_names", np.array(labels, dtype=object), dtype=object)
        self.add("Gather", [names, label_index], axis=0, output="label")
        self.outputs.append(helper.make_tensor_value_info("label", TensorProto.STRING, [None]))
        if probabilities is None:
            return
        if labels == classes:
            self.add("Identity", [probabilities], output="probabilities")
        else:
            # x·1 + Σ 0·y is x exactly, so reordering by a 0/1 matrix changes no bit.
            move = np.zeros((len(labels), len(classes)))
            for i, label in enumerate(labels):
                move[i, classes.index(label)] = 1.0
            self.add(
                "MatMul", [probabilities, self.constant("reorder", move)], output="probabilities"
            )
        self.outputs.append(
            helper.make_tensor_value_info("probabilities", TensorProto.DOUBLE, [None, len(classes)])
        )

    def regressor_output(self, column: str) -> None:
        """``prediction`` from an ``[N, 1]`` float64 column."""
        self.add("Squeeze", [column, self.constant("axis", [1], np.int64)], output="prediction")
        self.outputs.append(helper.make_tensor_value_info("prediction", TensorProto.DOUBLE, [None]))

    # --- shared arithmetic ------------------------------------------------------------------

    def softmax(self, raw: str) -> str:
        """Row-wise softmax as the engine computes it: exp(raw − max) / Σ exp(raw − max)."""
        axis = self.constant("axis", [1], np.int64)
        top = self.add("ReduceMax", [raw, axis], "max", keepdims=1)
        shifted = self.add("Exp", [self.add("Sub", [raw, top], "shifted")], "exp")
        total = self.add("ReduceSum", [shifted, axis], "sum", keepdims=1)
        return self.add("Div", [shifted, total], "softmax")

    def two_columns(self, positive: str) -> str:
        """``[1 − p, p]`` from the ``[N, 1]`` probability of the second class."""
        negative = self.add("Sub", [self.constant("one", 1.0), positive], "negative")
        return self.add("Concat", [negative, positive], "proba", axis=1)

    def logistic(self, raw: str, scale: float = 1.0) -> str:
        """1 / (1 + e^(−scale·raw)), written out as the boosting models compute it."""
        scaled = raw if scale == 1.0 else self.add("Mul", [raw, self.constant("scale", scale)])
        exp = self.add("Exp", [self.add("Neg", [scaled])])
        return self.add(
            "Div",
            [self.constant("one", 1.0), self.add("Add", [self.constant("one", 1.0), exp])],
            "positive",
        )

    def column_slice(self, matrix: str, start: int, stop: int) -> str:
        return self.add(
            "Slice",
            [
                matrix,
                self.constant("start", [start], np.int64),
                self.constant("stop", [stop], np.int64),
                self.constant("axis", [1], np.int64),
            ],
            "columns",
        )

    # --- the model --------------------------------------------------------------------------

    def to_model(self, doc: str) -> onnx.ModelProto:
        model = self.proto
        model.graph.name = f"coppice_{self.model.method}"
        model.ir_version = IR_VERSION
        model.producer_name = "coppice"
        model.doc_string = doc
        model.opset_import.extend(
            [helper.make_opsetid("", OPSET), helper.make_opsetid(ML_DOMAIN, ML_OPSET)]
        )
        helper.set_model_props(
            model,
            {
                "coppice.model_id": self.model.id,
                "coppice.method": self.model.method,
                "coppice.task": self.model.task,
                "coppice.target": self.model.target,
            },
        )
        return model
