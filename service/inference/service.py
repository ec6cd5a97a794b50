"""Rules of the Open Inference Protocol surface: model lookup, metadata, and inference.

A model is served under its id, with one version, ``"1"`` (models are immutable). Predictions
use the app's ``ModelCache``, so once a model is loaded an inference reads nothing from the
database. Outputs are ``predictions`` (``[n]``: class labels as ``BYTES``, or ``FP64`` for
regression) and, for classifiers, ``probabilities`` (``[n, n_classes]`` ``FP64``, classes in
the model's order); MLServer's names ``predict`` and ``predict_proba`` are accepted for them.
``contributions`` (``[n, n_features]``, or ``[n, n_features, n_classes]`` beyond two classes)
are returned only when asked for by name: ``/v1`` predict's ``explain``, with the bias and the
method (``exact`` or ``sampled``) in the output's parameters.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.errors import BadRequest, InvalidInput, NotFound, NotReady
from service.inference import features, tensors
from service.inference.schemas import InferenceRequest, RequestInput, RequestOutput
from service.inference.tensors import BYTES, OutputTensor, Tensor
from service.inference.wire import BINARY_MEDIA_TYPE, HEADER_LENGTH, JSON_MEDIA_TYPE, dump_json
from service.models import explanations
from service.models import service as models
from service.models.cache import LoadedModel, ModelCache

logger = logging.getLogger(__name__)

SERVER_NAME = "coppice"
PLATFORM = "coppice-engine"
MODEL_VERSION = "1"
EXTENSIONS = ("binary_tensor_data", "classification")
PREDICTIONS = "predictions"
PROBABILITIES = "probabilities"
CONTRIBUTIONS = "contributions"
# MLServer's scikit-learn runtime names its outputs after the methods; accept those too.
OUTPUT_ALIASES = {"predict": PREDICTIONS, "predict_proba": PROBABILITIES}


class ModelNotReady(NotReady):
    """The model cannot serve right now."""


@dataclass(frozen=True, slots=True)
class RequestedOutput:
    name: str  # as the request spelt it, and as the response names it
    kind: str  # PREDICTIONS or PROBABILITIES
    binary: bool
    classification: int  # top-k classes as "<score>:<index>:<label>" strings; 0 = off
    samples: int | None = None  # contributions: permutations sampled per row


@dataclass(frozen=True, slots=True)
class InferenceResult:
    content: bytes
    media_type: str
    headers: dict[str, str]


# --- models -----------------------------------------------------------------------------------


def loaded_model(
    db_engine: Engine, cache: ModelCache, model_id: str, version: str | None = None
) -> LoadedModel:
    """The usable model: from the cache, or read (once) with a short read-only session."""
    try:
        # A Session connects on first use, so a cache hit never touches the database.
        with Session(db_engine) as session:
            model = models.loaded_model(session, cache, model_id)
    except models.ArtifactCorrupt as error:
        raise ModelNotReady(error.detail) from None
    except SQLAlchemyError:
        # No URL in the message: it may carry a password.
        logger.warning("model %s could not be read: database unreachable", model_id, exc_info=True)
        raise ModelNotReady(
            f"Model '{model_id}' cannot be read now: the model store is unreachable. Try again "
            "shortly."
        ) from None
    if version is not None and version != MODEL_VERSION:
        raise NotFound(
            f"Model '{model_id}' has no version '{version}'; its only version is '{MODEL_VERSION}'."
        )
    return model


def server_metadata(version: str) -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": version, "extensions": list(EXTENSIONS)}


def model_metadata(model: LoadedModel) -> dict[str, Any]:
    names = features.feature_names(model)
    kinds = [str(feature["kind"]) for feature in model.features]
    outputs: list[dict[str, Any]] = [
        {"name": PREDICTIONS, "datatype": _predictions_datatype(model), "shape": [-1]}
    ]
    if _has_probabilities(model):
        classes = model.classes or []
        outputs.append(
            {
                "name": PROBABILITIES,
                "datatype": "FP64",
                "shape": [-1, len(classes)],
                "parameters": {"classes": json.dumps(classes)},
            }
        )
    return {
        "name": model.id,
        "versions": [MODEL_VERSION],
        "platform": PLATFORM,
        "inputs": [
            {
                "name": features.MATRIX_INPUT,
                "datatype": "FP64",
                "shape": [-1, len(names)],
                "parameters": {
                    "feature_names": json.dumps(names),
                    "feature_kinds": json.dumps(kinds),
                    "categories": json.dumps(features.categories(model)),
                },
            }
        ],
        "outputs": outputs,
        "parameters": {"task": model.task, "method": model.method, "target": model.target},
    }


# --- inference --------------------------------------------------------------------------------


def infer(
    model: LoadedModel,
    header: dict[str, Any],
    binary: bytes,
    *,
    max_rows: int,
    setting: str,
    served_as: tuple[str, str, dict[str, Any]] | None = None,
) -> InferenceResult:
    """Run one inference request (its JSON header and binary data) on ``model``; the answer
    names it ``served_as`` (name, version, parameters) when it was reached by another name."""
    request = _parse(header)
    requested = _requested_outputs(model, request)
    layout = features.plan(model, request.inputs, max_rows, setting=setting)
    X = features.matrix(model, _decode_inputs(request.inputs, binary), layout)
    outputs = _predict(model, X, requested)
    return _response(model, request, outputs, served_as)


def _parse(header: dict[str, Any]) -> InferenceRequest:
    try:
        return InferenceRequest.model_validate(header)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}"
            for e in error.errors(include_url=False)
        ]
        shown = "; ".join(problems[:5]) + ("; …" if len(problems) > 5 else "")
        raise BadRequest(f"The inference request is malformed: {shown}.") from None


def _requested_outputs(model: LoadedModel, request: InferenceRequest) -> list[RequestedOutput]:
    default_binary = _flag(request.parameters, "binary_data_output", "request")
    available = [PREDICTIONS, *([PROBABILITIES] if _has_probabilities(model) else [])]
    if not request.outputs:
        return [RequestedOutput(name, name, default_binary, 0) for name in available]
    available.append(CONTRIBUTIONS)  # only when asked for: it costs more than predicting
    requested: list[RequestedOutput] = []
    for i, output in enumerate(request.outputs):
        here = f"outputs[{i}] ('{output.name}')"
        kind = OUTPUT_ALIASES.get(output.name, output.name)
        if kind not in available:
            if kind != PROBABILITIES:
                reason = f"model '{model.id}' has no such output"
            elif _classifier(model):
                reason = f"a '{model.method}' model predicts labels only, without probabilities"
            else:
                reason = f"model '{model.id}' is a regression model and has no class probabilities"
            raise BadRequest(f"{here}: {reason}; its outputs are {', '.join(available)}.")
        if any(other.name == output.name for other in requested):
            raise BadRequest(f"{here} is requested twice.")
        requested.append(
            RequestedOutput(
                name=output.name,
                kind=kind,
                binary=_flag(output.parameters, "binary_data", here, default=default_binary),
                classification=_classification(output, kind, here),
                samples=_explain_samples(model, output, kind, here),
            )
        )
    return requested


def _explain_samples(model: LoadedModel, output: RequestOutput, kind: str, here: str) -> int | None:
    """``explain_samples`` of a ``contributions`` output; refuses a model that cannot explain."""
    samples = output.parameters.get("explain_samples")
    if kind != CONTRIBUTIONS:
        if samples is not None:
            raise BadRequest(f"{here}.parameters.explain_samples applies to '{CONTRIBUTIONS}'.")
        return None
    refused = explanations.refusal(model.method, model.estimator)
    if refused is not None:
        raise BadRequest(f"{here}: {refused}")
    limit = explanations.MAX_EXPLAIN_SAMPLES
    valid = isinstance(samples, int) and not isinstance(samples, bool) and 2 <= samples <= limit
    if samples is not None and not valid:
        raise BadRequest(f"{here}.parameters.explain_samples must be an integer, 2 to {limit}.")
    return samples


def _flag(parameters: dict[str, Any], key: str, here: str, *, default: bool = False) -> bool:
    _refuse_shared_memory(parameters, here)
    value = parameters.get(key, default)
    if not isinstance(value, bool):
        raise BadRequest(f"{here}.parameters.{key} must be true or false, not {value!r}.")
    return value


def _classification(output: RequestOutput, kind: str, here: str) -> int:
    count = output.parameters.get("classification", 0)
    if count == 0:
        return 0
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise BadRequest(f"{here}.parameters.classification must be a positive integer.")
    if kind != PROBABILITIES:
        raise BadRequest(
            f"{here}: classification (top-k classes) applies to '{PROBABILITIES}', whose scores "
            "it ranks."
        )
    return count


def _refuse_shared_memory(parameters: dict[str, Any], here: str) -> None:
    if any(key.startswith("shared_memory") for key in parameters):
        raise BadRequest(
            f"{here} uses shared memory, which this server does not support; send the data in "
            "the request (JSON or binary)."
        )


def _decode_inputs(inputs: list[RequestInput], binary: bytes) -> list[Tensor]:
    decoded = []
    offset = 0
    for i, tensor in enumerate(inputs):
        here = features.where(i, tensor)
        tensors.check_datatype(tensor.datatype, here)
        _refuse_shared_memory(tensor.parameters, here)
        count = tensors.element_count(tensor.shape)
        size = tensor.parameters.get("binary_data_size")
        if size is None:
            if tensor.data is None:
                raise BadRequest(
                    f"{here} has no data: send 'data', or binary data with "
                    "parameters.binary_data_size."
                )
            values = tensors.from_json(tensor.datatype, tensor.data, count, here)
        else:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise BadRequest(f"{here}.parameters.binary_data_size must be a byte count.")
            if tensor.data is not None:
                raise BadRequest(f"{here} has both 'data' and binary_data_size; send one.")
            if offset + size > len(binary):
                raise BadRequest(
                    f"{here} declares {size} bytes of binary data but only "
                    f"{len(binary) - offset} remain after the JSON header (is the "
                    f"{HEADER_LENGTH} header right?)."
                )
            values = tensors.from_binary(
                tensor.datatype, binary[offset : offset + size], count, here
            )
            offset += size
        decoded.append(Tensor(tensor.name, tensor.datatype, tuple(tensor.shape), values, here))
    if offset != len(binary):
        raise BadRequest(
            f"The body has {len(binary) - offset} bytes after the JSON header and the inputs' "
            "binary data; each binary input needs parameters.binary_data_size."
        )
    return decoded


def _predict(
    model: LoadedModel, X: npt.NDArray[np.float64], requested: list[RequestedOutput]
) -> list[OutputTensor]:
    n = X.shape[0]
    estimator = model.estimator
    kinds = {output.kind for output in requested}
    classes = model.classes or []
    predictions: npt.NDArray[Any] | None = None
    probabilities: npt.NDArray[np.float64] | None = None
    if PREDICTIONS in kinds:
        if n == 0:
            predictions = np.empty(0, dtype=object if _classifier(model) else np.float64)
        elif _classifier(model):
            labels = np.asarray(estimator.predict(X)).tolist()
            predictions = np.array([str(label) for label in labels], dtype=object)
        else:
            predictions = np.asarray(estimator.predict(X), dtype=np.float64)
    if PROBABILITIES in kinds:
        probabilities = (
            np.empty((0, len(classes))) if n == 0 else _class_probabilities(estimator, X, classes)
        )
    outputs = []
    for output in requested:
        if output.kind == CONTRIBUTIONS:
            outputs.append(_contributions(model, X, output))
        elif output.kind == PREDICTIONS:
            assert predictions is not None
            datatype = _predictions_datatype(model)
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


def _class_probabilities(
    estimator: Any, X: npt.NDArray[np.float64], classes: list[str]
) -> npt.NDArray[np.float64]:
    """``predict_proba`` with one column per class of the model record, in that order.

    As ``/v1`` predict does: an estimator that saw fewer classes than the record lists (a
    member of an ensemble, say) gets zero columns for the others.
    """
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
    seen = [str(label) for label in estimator.classes_]
    if seen == classes:
        return proba
    full = np.zeros((X.shape[0], len(classes)))
    full[:, [classes.index(label) for label in seen]] = proba
    return full


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


def _response(
    model: LoadedModel,
    request: InferenceRequest,
    outputs: list[OutputTensor],
    served_as: tuple[str, str, dict[str, Any]] | None,
) -> InferenceResult:
    name, version, parameters = served_as or (model.id, MODEL_VERSION, {})
    document: dict[str, Any] = {"model_name": name, "model_version": version}
    if parameters:
        document["parameters"] = parameters
    if request.id is not None:
        document["id"] = request.id
    described = []
    blobs = []
    for output in outputs:
        item: dict[str, Any] = {
            "name": output.name,
            "datatype": output.datatype,
            "shape": list(output.shape),
        }
        if output.parameters:
            item["parameters"] = dict(output.parameters)
        if output.binary:
            blob = tensors.to_binary(output)
            item["parameters"] = {**item.get("parameters", {}), "binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            item["data"] = tensors.to_json_data(output)
        described.append(item)
    document["outputs"] = described
    header = dump_json(document)
    if not blobs:
        return InferenceResult(header, JSON_MEDIA_TYPE, {})
    return InferenceResult(
        b"".join([header, *blobs]), BINARY_MEDIA_TYPE, {HEADER_LENGTH: str(len(header))}
    )


def _classifier(model: LoadedModel) -> bool:
    return model.task == "classification"


def _has_probabilities(model: LoadedModel) -> bool:
    return _classifier(model) and hasattr(model.estimator, "predict_proba")


def _predictions_datatype(model: LoadedModel) -> str:
    return BYTES if _classifier(model) else "FP64"
