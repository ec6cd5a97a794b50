"""An inference request's JSON header and binary data, decoded: the outputs it asks for and
its input tensors, each checked, with a 400 naming the field that is wrong.

How the tensors then map onto the model's features is ``service.inference.features``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from service.errors import BadRequest
from service.inference import tensors
from service.inference.features import where
from service.inference.outputs import (
    CONTRIBUTIONS,
    OUTPUT_ALIASES,
    PREDICTIONS,
    PROBABILITIES,
    RequestedOutput,
    classifier,
    has_probabilities,
)
from service.inference.schemas import InferenceRequest, RequestInput, RequestOutput
from service.inference.tensors import Tensor
from service.inference.wire import HEADER_LENGTH
from service.models import explanations
from service.models.cache import LoadedModel


def parse(header: dict[str, Any]) -> InferenceRequest:
    try:
        return InferenceRequest.model_validate(header)
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}"
            for e in error.errors(include_url=False)
        ]
        shown = "; ".join(problems[:5]) + ("; …" if len(problems) > 5 else "")
        raise BadRequest(f"The inference request is malformed: {shown}.") from None


def requested_outputs(model: LoadedModel, request: InferenceRequest) -> list[RequestedOutput]:
    """The outputs the request names (every output but contributions when it names none)."""
    default_binary = _flag(request.parameters, "binary_data_output", "request")
    available = [PREDICTIONS, *([PROBABILITIES] if has_probabilities(model) else [])]
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
            elif classifier(model):
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


def decode_inputs(inputs: list[RequestInput], binary: bytes) -> list[Tensor]:
    """Each input's data, from its JSON ``data`` or its slice of the binary data."""
    decoded = []
    offset = 0
    for i, tensor in enumerate(inputs):
        here = where(i, tensor)
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
