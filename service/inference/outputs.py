"""The output tensors of an inference: which a model has, and their values for a matrix.

Outputs are ``predictions`` (``[n]``: class labels as ``BYTES``, or ``FP64`` for regression)
and, for classifiers, ``probabilities`` (``[n, n_classes]`` ``FP64``, classes in the model's
order); MLServer's names ``predict`` and ``predict_proba`` are accepted for them.
``contributions`` (``[n, n_features]``, or ``[n, n_features, n_classes]`` beyond two classes)
are returned only when asked for by name: ``/v1`` predict's ``explain``, with the bias and the
method (``exact`` or ``sampled``) in the output's parameters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.errors import BadRequest, InvalidInput
from service.inference.tensors import BYTES, OutputTensor
from service.models import explanations
from service.models.cache import LoadedModel
from service.models.service import class_probabilities

PREDICTIONS = "predictions"
PROBABILITIES = "probabilities"
CONTRIBUTIONS = "contributions"
# MLServer's scikit-learn runtime names its outputs after the methods; accept those too.
OUTPUT_ALIASES = {"predict": PREDICTIONS, "predict_proba": PROBABILITIES}


@dataclass(frozen=True, slots=True)
class RequestedOutput:
    name: str  # as the request spelt it, and as the response names it
    kind: str  # PREDICTIONS, PROBABILITIES or CONTRIBUTIONS
    binary: bool
    classification: int  # top-k classes as "<score>:<index>:<label>" strings; 0 = off
    samples: int | None = None  # contributions: permutations sampled per row


def classifier(model: LoadedModel) -> bool:
    return model.task == "classification"


def has_probabilities(model: LoadedModel) -> bool:
    return classifier(model) and hasattr(model.estimator, "predict_proba")


def predictions_datatype(model: LoadedModel) -> str:
    return BYTES if classifier(model) else "FP64"


def predict(
    model: LoadedModel, X: npt.NDArray[np.float64], requested: list[RequestedOutput]
) -> list[OutputTensor]:
    """The ``requested`` outputs for the rows of ``X``, in the order requested."""
    n = X.shape[0]
    estimator = model.estimator
    kinds = {output.kind for output in requested}
    classes = model.classes or []
    predictions: npt.NDArray[Any] | None = None
    probabilities: npt.NDArray[np.float64] | None = None
    if PREDICTIONS in kinds:
        if n == 0:
            predictions = np.empty(0, dtype=object if classifier(model) else np.float64)
        elif classifier(model):
            labels = np.asarray(estimator.predict(X)).tolist()
            predictions = np.array([str(label) for label in labels], dtype=object)
        else:
            predictions = np.asarray(estimator.predict(X), dtype=np.float64)
    if PROBABILITIES in kinds:
        probabilities = (
            np.empty((0, len(classes))) if n == 0 else class_probabilities(estimator, X, classes)
        )
    outputs = []
    for output in requested:
        if output.kind == CONTRIBUTIONS:
            outputs.append(_contributions(model, X, output))
        elif output.kind == PREDICTIONS:
            assert predictions is not None
            datatype = predictions_datatype(model)
            outputs.append(OutputTensor(output.name, datatype, (n,), predictions, output.binary))
        elif output.classification:
            assert probabilities is not None
            top = _top_classes(probabilities, classes, output.classification)
            outputs.append(OutputTensor(output.name, BYTES, top.shape, top.ravel(), output.binary))
        else:
            assert probabilities is not None
            outputs.append(
                OutputTensor(
                    output.name, "FP64", probabilities.shape, probabilities.ravel(), output.binary
                )
            )
    return outputs


def _contributions(
    model: LoadedModel, X: npt.NDArray[np.float64], output: RequestedOutput
) -> OutputTensor:
    """Per-row contributions, with their bias and method in the output's parameters."""
    try:
        explanations.check_budget(
            model.estimator, X.shape[0], output.samples, field="explain_samples"
        )
    except InvalidInput as error:
        raise BadRequest(error.detail) from None
    explained = explanations.explain_rows(model.estimator, X, output.samples)
    values = explained.contributions
    parameters = {"bias": json.dumps(explained.bias.tolist()), "explanation": explained.method}
    return OutputTensor(
        output.name, "FP64", values.shape, values.ravel(), output.binary, parameters
    )


def _top_classes(
    probabilities: npt.NDArray[np.float64], classes: list[str], count: int
) -> npt.NDArray[Any]:
    """Triton's classification extension: per row the top classes as "<score>:<index>:<label>"."""
    k = min(count, probabilities.shape[1])
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, :k]
    top = np.empty(order.shape, dtype=object)
    for row, indices in enumerate(order.tolist()):
        for rank, j in enumerate(indices):
            top[row, rank] = f"{probabilities[row, j]:f}:{j}:{classes[j]}"
    return top
