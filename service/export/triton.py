"""A Triton model repository holding one exported model, as a zip.

Layout, as Triton's model repository documentation gives it for the onnxruntime backend::

    <name>/config.pbtxt
    <name>/1/model.onnx

``config.pbtxt`` names the backend and types every input and output (``TYPE_FP64``, and
``TYPE_STRING`` for categorical features and the label). ``max_batch_size: 0`` with the batch
dimension written as ``-1`` in each shape: the graph's inputs are ``[N, 1]`` and its label and
prediction ``[N]``, which Triton's batching (a leading batch dimension Triton adds itself)
would not describe without reshapes; a request carries its rows in one tensor either way.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable

import onnx

_TYPES: dict[int, str] = {
    int(onnx.TensorProto.DOUBLE): "TYPE_FP64",
    int(onnx.TensorProto.STRING): "TYPE_STRING",
}


def repository_name(model_id: str) -> str:
    """A model name Triton accepts as a directory: the id's letters, digits, ``-`` and ``_``."""
    return "coppice-" + (re.sub(r"[^A-Za-z0-9_-]", "_", model_id) or "model")


def config_pbtxt(name: str, model: onnx.ModelProto) -> str:
    lines = [
        f'name: "{name}"',
        'backend: "onnxruntime"',
        "max_batch_size: 0",
        *_tensors("input", model.graph.input),
        *_tensors("output", model.graph.output),
    ]
    return "\n".join(lines) + "\n"


def _tensors(kind: str, values: Iterable[onnx.ValueInfoProto]) -> list[str]:
    lines = []
    for value in values:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        lines += [
            f"{kind} [",
            "  {",
            f"    name: {_quoted(value.name)}",
            f"    data_type: {_TYPES[int(tensor.elem_type)]}",
            f"    dims: [ {', '.join(str(d) for d in dims)} ]",
            "  }",
            "]",
        ]
    return lines


def _quoted(text: str) -> str:
    """A protobuf text-format string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def repository_zip(model_id: str, model: onnx.ModelProto) -> bytes:
    name = repository_name(model_id)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}/config.pbtxt", config_pbtxt(name, model))
        archive.writestr(f"{name}/1/model.onnx", model.SerializeToString())
    return buffer.getvalue()
