"""Builders and readers of Open Inference Protocol bodies, written from the spec by hand."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest

HEADER_LENGTH = "Inference-Header-Content-Length"

# Runs a test on PostgreSQL as well as SQLite (the conftest's ``backend`` is SQLite otherwise).
BOTH_BACKENDS = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

# Rows in the /v1 records shape; the same rows as the "input" matrix and as feature tensors.
RECORDS: list[dict[str, Any]] = [
    {"x": 1.2, "z": 0.1, "colour": "red"},
    {"x": -1.5, "z": None, "colour": "blue"},
    {"x": None, "z": 0.4, "colour": None},
    {"z": -2.0},
    {"x": 0.3, "z": 0.0, "colour": "green"},
    {"x": 0.9, "z": -0.7, "colour": "purple"},  # a category training never saw
]
FEATURES = ["x", "z", "colour"]
# Category codes: the index in the model's sorted category list (metadata "categories").
COLOUR_CODES = {"blue": 0, "green": 1, "red": 2}


def matrix_rows(records: list[dict[str, Any]]) -> list[list[float | None]]:
    """The records as rows of the "input" tensor: colour as its code, missing as null."""
    return [[r.get("x"), r.get("z"), COLOUR_CODES.get(r.get("colour") or "", -1)] for r in records]


def matrix_input(records: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    rows = matrix_rows(records)
    flat = [value for row in rows for value in row]
    return {"name": "input", "datatype": "FP64", "shape": [len(rows), 3], "data": flat, **extra}


def bytes_element(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return struct.pack("<I", len(encoded)) + encoded


def binary_request(header: dict[str, Any], blobs: list[bytes]) -> tuple[bytes, dict[str, str]]:
    """A binary-extension body: the JSON header, then the blobs; and the header length."""
    encoded = json.dumps(header).encode("utf-8")
    return encoded + b"".join(blobs), {HEADER_LENGTH: str(len(encoded))}


def read_binary_response(content: bytes, header_length: int) -> dict[str, Any]:
    """The response's JSON with each binary output decoded into its ``data``, by hand."""
    document: dict[str, Any] = json.loads(content[:header_length])
    offset = header_length
    for output in document["outputs"]:
        size = output.get("parameters", {}).get("binary_data_size")
        if size is None:
            continue
        raw = content[offset : offset + size]
        offset += size
        if output["datatype"] == "BYTES":
            values, i = [], 0
            while i < len(raw):
                (length,) = struct.unpack_from("<I", raw, i)
                values.append(raw[i + 4 : i + 4 + length].decode("utf-8"))
                i += 4 + length
            output["data"] = values
        else:
            dtype = {"FP64": "<f8", "FP32": "<f4", "INT64": "<i8"}[output["datatype"]]
            output["data"] = np.frombuffer(raw, dtype=dtype).tolist()
    assert offset == len(content), "bytes left over after the binary outputs"
    return document


def outputs_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {output["name"]: output for output in document["outputs"]}
