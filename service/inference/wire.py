"""The bytes of an inference request and response: compression, JSON header, binary tensors.

Without binary data a body is one JSON object. With Triton's binary tensor data extension the
``Inference-Header-Content-Length`` header says how many leading bytes are the JSON object; the
rest is the tensors' raw data, one after another in the order of the inputs (or outputs) whose
``parameters.binary_data_size`` says how long each is.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from service.bodies import TOO_MANY_DIGITS
from service.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from service.inference import tensors
from service.inference.tensors import OutputTensor

HEADER_LENGTH = "Inference-Header-Content-Length"
JSON_MEDIA_TYPE = "application/json"
BINARY_MEDIA_TYPE = "application/octet-stream"

# Content-Encoding → zlib window bits ("deflate" in HTTP is the zlib format; tritonclient
# compresses that way).
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


@dataclass(frozen=True, slots=True)
class RequestBody:
    """A request split into its JSON header (parsed) and the binary data after it."""

    header: dict[str, Any]
    binary: bytes


@dataclass(frozen=True, slots=True)
class InferenceResult:
    """A response's bytes, media type and headers (the JSON header's length, with binary data)."""

    content: bytes
    media_type: str
    headers: dict[str, str]


def decompress(body: bytes, content_encoding: str, limit: int, *, setting: str) -> bytes:
    """``body`` decoded from its Content-Encoding, refused with 413 when it inflates past ``limit``."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise UnsupportedMediaType(
            f"The request's Content-Encoding '{content_encoding}' is not supported; send it "
            "uncompressed, gzip or deflate."
        )
    inflater = zlib.decompressobj(wbits)
    try:
        inflated = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise BadRequest(f"The {encoding} request body cannot be decompressed: {error}.") from None
    if len(inflated) > limit:
        raise PayloadTooLarge(
            f"The decompressed request body is larger than this server accepts: at most {limit} "
            f"bytes ({setting})."
        )
    if not inflater.eof:
        raise BadRequest(f"The {encoding} request body is truncated.")
    return inflated


def split_request(body: bytes, header_length: str | None) -> RequestBody:
    """The JSON header of ``body`` (all of it, or its first ``header_length`` bytes) and the rest."""
    if header_length is None:
        json_part, binary = body, b""
    else:
        text = header_length.strip()
        if not text.isdigit() or int(text) > len(body):
            raise BadRequest(
                f"The {HEADER_LENGTH} header is '{header_length}'; it must be the byte length "
                f"of the JSON header at the start of the body (at most {len(body)})."
            )
        json_part, binary = body[: int(text)], body[int(text) :]
    try:
        header = json.loads(json_part.decode("utf-8"))
    except RecursionError:
        raise BadRequest("The request's JSON header nests arrays or objects too deeply.") from None
    except UnicodeDecodeError:
        hint = (
            "" if header_length is not None else f" (binary data needs the {HEADER_LENGTH} header)"
        )
        raise BadRequest(f"The request's JSON header is not UTF-8 text{hint}.") from None
    except json.JSONDecodeError as error:
        hint = (
            f" (binary tensor data needs the {HEADER_LENGTH} header)"
            if header_length is None
            else ""
        )
        raise BadRequest(f"The request's JSON header is not valid JSON: {error}{hint}.") from None
    except ValueError:  # an integer literal past Python's digit limit (see service.bodies)
        raise BadRequest(TOO_MANY_DIGITS) from None
    if not isinstance(header, dict):
        raise BadRequest("The inference request must be a JSON object with an 'inputs' array.")
    return RequestBody(header=header, binary=binary)


def dump_json(document: dict[str, Any]) -> bytes:
    # allow_nan=False: outputs turn NaN into null first, so strict JSON always comes out.
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode("utf-8")


def response(
    outputs: list[OutputTensor],
    *,
    model_name: str,
    model_version: str,
    parameters: dict[str, Any],
    request_id: str | None,
) -> InferenceResult:
    """The inference response: its JSON, then the binary outputs' data in output order."""
    document: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if parameters:
        document["parameters"] = parameters
    if request_id is not None:
        document["id"] = request_id
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
