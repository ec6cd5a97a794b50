"""The protocol's server and model metadata documents."""

from __future__ import annotations

import json
from typing import Any

from service.inference.features import MATRIX_INPUT
from service.inference.outputs import (
    PREDICTIONS,
    PROBABILITIES,
    has_probabilities,
    predictions_datatype,
)
from service.inference.serving import MODEL_VERSION
from service.models import encoding
from service.models.cache import LoadedModel

SERVER_NAME = "coppice"
PLATFORM = "coppice-engine"
EXTENSIONS = ("binary_tensor_data", "classification")


def server_metadata(version: str) -> dict[str, Any]:
    return {"name": SERVER_NAME, "version": version, "extensions": list(EXTENSIONS)}


def model_metadata(model: LoadedModel) -> dict[str, Any]:
    """The model's one input tensor (features, kinds, category codes) and its outputs."""
    names = encoding.feature_names(model)
    kinds = [str(feature["kind"]) for feature in model.features]
    outputs: list[dict[str, Any]] = [
        {"name": PREDICTIONS, "datatype": predictions_datatype(model), "shape": [-1]}
    ]
    if has_probabilities(model):
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
                "name": MATRIX_INPUT,
                "datatype": "FP64",
                "shape": [-1, len(names)],
                "parameters": {
                    "feature_names": json.dumps(names),
                    "feature_kinds": json.dumps(kinds),
                    "categories": json.dumps(encoding.categories(model)),
                },
            }
        ],
        "outputs": outputs,
        "parameters": {"task": model.task, "method": model.method, "target": model.target},
    }
