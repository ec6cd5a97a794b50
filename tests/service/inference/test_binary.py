"""Triton's binary tensor data extension, with request and response bytes built by hand."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest

from tests.service.inference.helpers import (
    BOTH_BACKENDS,
    HEADER_LENGTH,
    RECORDS,
    binary_request,
    bytes_element,
    matrix_input,
    matrix_rows,
    outputs_by_name,
    read_binary_response,
)
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


def float_matrix(records: list[dict[str, Any]], dtype: str) -> np.ndarray:
    rows = matrix_rows(records)
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=dtype)


async def json_infer(svc: Service, model_id: str, **extra: Any) -> dict[str, Any]:
    response = await svc.client.post(
        f"/v2/models/{model_id}/infer", json={"inputs": [matrix_input(RECORDS)], **extra}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def post_binary(svc: Service, model_id: str, body: bytes, headers: dict[str, str]) -> Any:
    response = await svc.client.post(f"/v2/models/{model_id}/infer", content=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


@BOTH_BACKENDS
async def test_binary_input_and_binary_outputs_round_trip(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    expected = outputs_by_name(await json_infer(svc, model_id))
    X = float_matrix(RECORDS, "<f8")
    header = {
        "id": "7",
        "inputs": [
            {
                "name": "input",
                "datatype": "FP64",
                "shape": list(X.shape),
                "parameters": {"binary_data_size": X.nbytes},
            }
        ],
        "parameters": {"binary_data_output": True},
    }
    body, headers = binary_request(header, [X.tobytes()])

    response = await post_binary(svc, model_id, body, headers)

    assert response.headers["content-type"] == "application/octet-stream"
    length = int(response.headers[HEADER_LENGTH])
    head = json.loads(response.content[:length])
    assert head["id"] == "7"
    assert [o["parameters"]["binary_data_size"] for o in head["outputs"]] == [
        sum(4 + len(label) for label in expected["predictions"]["data"]),
        8 * X.shape[0] * 2,
    ]
    assert all("data" not in output for output in head["outputs"])
    decoded = outputs_by_name(read_binary_response(response.content, length))
    assert decoded["predictions"]["data"] == expected["predictions"]["data"]
    assert decoded["probabilities"]["data"] == expected["probabilities"]["data"]
    assert decoded["probabilities"]["shape"] == expected["probabilities"]["shape"]


async def test_mixed_inputs_and_per_output_binary_flags(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting")
    expected = outputs_by_name(await json_infer(svc, model_id))
    n = len(RECORDS)
    x = np.array([np.nan if r.get("x") is None else r["x"] for r in RECORDS], dtype="<f4")
    colour = b"".join(bytes_element(r.get("colour") or "") for r in RECORDS)
    header = {
        "inputs": [
            {
                "name": "x",
                "datatype": "FP32",
                "shape": [n],
                "parameters": {"binary_data_size": x.nbytes},
            },
            # JSON and binary inputs may be mixed; binary data follows in input order.
            {"name": "z", "datatype": "FP64", "shape": [n], "data": [r.get("z") for r in RECORDS]},
            {
                "name": "colour",
                "datatype": "BYTES",
                "shape": [n, 1],
                "parameters": {"binary_data_size": len(colour)},
            },
        ],
        "outputs": [
            {"name": "predictions", "parameters": {"binary_data": True}},
            {"name": "probabilities", "parameters": {"binary_data": False}},
        ],
    }
    body, headers = binary_request(header, [x.tobytes(), colour])

    response = await post_binary(svc, model_id, body, headers)

    decoded = outputs_by_name(
        read_binary_response(response.content, int(response.headers[HEADER_LENGTH]))
    )
    assert decoded["predictions"]["data"] == expected["predictions"]["data"]
    assert "binary_data_size" not in decoded["probabilities"].get("parameters", {})
    np.testing.assert_allclose(
        decoded["probabilities"]["data"], expected["probabilities"]["data"], rtol=1e-6
    )


async def test_request_level_binary_output_overridden_per_output(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="amount")
    expected = outputs_by_name(await json_infer(svc, model_id))

    response = await svc.client.post(
        f"/v2/models/{model_id}/infer",
        json={
            "inputs": [matrix_input(RECORDS)],
            "parameters": {"binary_data_output": True},
            "outputs": [{"name": "predictions", "parameters": {"binary_data": False}}],
        },
    )
    binary = await svc.client.post(
        f"/v2/models/{model_id}/infer",
        json={"inputs": [matrix_input(RECORDS)], "parameters": {"binary_data_output": True}},
    )

    assert response.status_code == 200
    assert HEADER_LENGTH not in response.headers
    assert response.json()["outputs"] == [expected["predictions"]]
    length = int(binary.headers[HEADER_LENGTH])
    (raw_output,) = json.loads(binary.content[:length])["outputs"]
    assert raw_output["datatype"] == "FP64"
    values = struct.unpack(f"<{len(RECORDS)}d", binary.content[length:])
    assert list(values) == expected["predictions"]["data"]


async def test_integer_and_half_precision_binary_inputs(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="species")
    codes = np.array([[1, 0, 2], [0, -1, 1]], dtype="<i4")
    half = codes.astype("<f2")
    as_json = await svc.client.post(
        f"/v2/models/{model_id}/infer",
        json={
            "inputs": [
                {"name": "input", "datatype": "INT32", "shape": [2, 3], "data": codes.tolist()}
            ]
        },
    )
    results = []
    for datatype, array in (("INT32", codes), ("FP16", half)):
        header = {
            "inputs": [
                {
                    "name": "input",
                    "datatype": datatype,
                    "shape": [2, 3],
                    "parameters": {"binary_data_size": array.nbytes},
                }
            ]
        }
        body, headers = binary_request(header, [array.tobytes()])
        results.append((await post_binary(svc, model_id, body, headers)).json())

    assert results == [as_json.json(), as_json.json()]
