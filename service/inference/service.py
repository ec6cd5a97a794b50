"""Inference, the one rule of the Open Inference Protocol surface: a request's header and binary
data to the response's bytes, on a model ``service.inference.serving`` resolved.

Each step is a module of its own: decoding the request (``requests``), mapping its tensors onto
the model's features and encoding them as ``/v1`` predict does (``features``, then
``service.models.encoding``), predicting the outputs (``outputs``) and writing the response
(``wire``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from service.inference import features, outputs, requests, wire
from service.inference.serving import MODEL_VERSION
from service.inference.tensors import OutputTensor
from service.models.cache import LoadedModel

# The prediction log's hand-off: request id, encoded rows, the outputs asked and made, and the
# text each categorical cell was sent as (to tell an unseen category from a missing one).
Observer = Callable[
    [
        str | None,
        npt.NDArray[np.float64],
        list[outputs.RequestedOutput],
        list[OutputTensor],
        features.SentText | None,
    ],
    None,
]


def infer(
    model: LoadedModel,
    header: dict[str, Any],
    binary: bytes,
    *,
    max_rows: int,
    setting: str,
    served_as: tuple[str, str, dict[str, Any]] | None = None,
    observe: Observer | None = None,
) -> wire.InferenceResult:
    """Run one inference request (its JSON header and binary data) on ``model``; the answer
    names it ``served_as`` (name, version, parameters) when it was reached by another name."""
    request = requests.parse(header)
    requested = requests.requested_outputs(model, request)
    layout = features.plan(model, request.inputs, max_rows, setting=setting)
    decoded = requests.decode_inputs(request.inputs, binary)
    X = features.matrix(model, decoded, layout)
    name, version, parameters = served_as or (model.id, MODEL_VERSION, {})
    tensors = outputs.predict(model, X, requested)
    if observe is not None and X.shape[0]:
        observe(request.id, X, requested, tensors, features.sent_text(decoded, layout))
    return wire.response(
        tensors,
        model_name=name,
        model_version=version,
        parameters=parameters,
        request_id=request.id,
    )
