"""Every way an inference request can fail: the status, and an ``{"error"}`` naming the field.

Decoding does not touch the database, so these run on SQLite only; each test trains one model
and walks a table of bad requests against it.
"""

from __future__ import annotations

import gzip
import json
import struct
from typing import Any

import httpx
import numpy as np
import pytest

from service.app import create_app
from tests.service.inference.helpers import (
    HEADER_LENGTH,
    RECORDS,
    binary_request,
    bytes_element,
    matrix_input,
)
from tests.service.models.helpers import MAX_PREDICT_ROWS, Service

pytestmark = pytest.mark.anyio

GOOD_INPUT = matrix_input(RECORDS[:2])


def with_input(**changes: Any) -> dict[str, Any]:
    return {"inputs": [{**GOOD_INPUT, **changes}]}


def feature(name: str, datatype: str, data: list[Any], shape: list[int] | None = None) -> Any:
    return {"name": name, "datatype": datatype, "shape": shape or [len(data)], "data": data}


async def expect_error(
    client: httpx.AsyncClient,
    path: str,
    status: int,
    fragment: str,
    **request: Any,
) -> None:
    response = await client.post(path, **request)
    label = request.get("json", request.get("content"))
    assert response.status_code == status, (label, response.text)
    assert response.headers["content-type"] == "application/json", label
    body = response.json()
    assert set(body) == {"error"}, label
    assert fragment in body["error"], (fragment, body["error"])


MALFORMED: list[tuple[Any, str]] = [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    # Deeper than Python's recursive JSON parser goes (about 1,000 levels).
    (b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests arrays or objects too deeply"),
    (b"[1, 2]", "must be a JSON object"),
    # Past Python's 4,300-digit limit on int(); found by tests/service/fuzz (was a 500).
    (b'{"inputs": [' + b"9" * 5000 + b"]}", "more than 4300 digits"),
    (b"{}", "inputs: Field required"),
    (b'{"inputs": []}', "inputs: List should have at least 1 item"),
    (
        b'{"inputs": [{"name": "input", "datatype": "FP64", "data": []}]}',
        "inputs.0.shape: Field required",
    ),
    (json.dumps(with_input(shape="2x3")).encode(), "inputs.0.shape: Input should be a valid list"),
    (
        json.dumps(with_input(shape=[2.0, 3])).encode(),
        "inputs.0.shape.0: Input should be a valid integer",
    ),
    (json.dumps({**with_input(), "id": 5}).encode(), "id: Input should be a valid string"),
    (json.dumps({**with_input(), "outputs": [{}]}).encode(), "outputs.0.name: Field required"),
]

TENSORS: list[tuple[dict[str, Any], str]] = [
    (with_input(datatype="FLOAT"), "inputs[0] ('input') has datatype 'FLOAT'"),
    (with_input(datatype="BF16"), "send FP32"),
    (with_input(shape=[2, 4], data=[0] * 8), "has shape [2, 4]; the model takes [n, 3]"),
    (with_input(shape=[6], data=[0] * 6), "has shape [6]; the model takes [n, 3]"),
    (with_input(shape=[-2, 3]), "has a negative dimension"),
    (with_input(datatype="BYTES", data=["a"] * 6), "'input' carries numbers"),
    (with_input(data=[1.0] * 5), "holds 5 elements but its shape needs 6"),
    (with_input(data=[1.0, "2", 3, 4, 5, 6]), "holds a string but its datatype is FP64"),
    (with_input(data=[1.0, True, 3, 4, 5, 6]), "holds a boolean (true)"),
    (
        with_input(datatype="INT64", data=[1, 2.5, 3, 4, 5, 6]),
        "holds a number (2.5) but its datatype is INT64",
    ),
    (with_input(datatype="BOOL", data=[1, 0, 1, 0, 1, 0]), "send true or false"),
    (with_input(datatype="INT8", data=[1, 2, 300, 4, 5, 6]), "outside the range of INT8"),
    (with_input(data=[10**400, 2, 3, 4, 5, 6]), "holds a number too large for FP64"),
    (with_input(data=[[1, 2, 3], [4, 5]]), "nested arrays of unequal lengths"),
    (with_input(data=[[1, 2, 3], [4, 5, [6]]]), "nested arrays of unequal lengths"),
    (with_input(data={"x": 1}), "data must be a JSON array"),
    (with_input(data=None), "inputs[0] ('input') has no data"),
    (with_input(data=[float("inf"), 2, 3, 4, 5, 6]), "row 0, feature 'x' is infinite"),
    ({"inputs": [feature("colur", "BYTES", ["red"])]}, "(did you mean 'colour'?)"),
    ({"inputs": [feature("label", "BYTES", ["yes"])]}, "(that is the target)"),
    ({"inputs": [GOOD_INPUT, feature("x", "FP64", [1.0, 2.0])]}, "not both"),
    (
        {"inputs": [feature("x", "FP64", [1.0]), feature("x", "FP64", [2.0])]},
        "inputs[1] ('x') repeats inputs[0]",
    ),
    (
        {"inputs": [feature("x", "FP64", [1.0, 2.0], [1, 2])]},
        "a tensor per feature has shape [n] or [n, 1]",
    ),
    ({"inputs": [feature("x", "FP64", [1.0, 2.0]), feature("z", "FP64", [1.0])]}, "'x': 2, 'z': 1"),
    ({"inputs": [feature("x", "BYTES", ["1.5"])]}, "feature 'x' is numeric"),
    (
        {"inputs": [feature("z", "FP64", [1.0, float("-inf")])]},
        "inputs[0] ('z'): element 1 is infinite",
    ),
]

OUTPUTS: list[tuple[dict[str, Any], str]] = [
    ({**with_input(), "outputs": [{"name": "scores"}]}, "outputs[0] ('scores'): model"),
    (
        {**with_input(), "outputs": [{"name": "predictions"}, {"name": "predictions"}]},
        "requested twice",
    ),
    (
        {
            **with_input(),
            "outputs": [{"name": "predictions", "parameters": {"binary_data": "yes"}}],
        },
        "outputs[0] ('predictions').parameters.binary_data must be true or false",
    ),
    (
        {**with_input(), "parameters": {"binary_data_output": 1}},
        "request.parameters.binary_data_output must be true or false",
    ),
    (
        {
            **with_input(),
            "outputs": [{"name": "probabilities", "parameters": {"classification": -1}}],
        },
        "classification must be a positive integer",
    ),
    (
        {**with_input(), "outputs": [{"name": "predictions", "parameters": {"classification": 2}}]},
        "classification (top-k classes) applies to 'probabilities'",
    ),
    (
        {
            **with_input(),
            "outputs": [{"name": "predictions", "parameters": {"shared_memory_region": "r"}}],
        },
        "does not support",
    ),
    (
        with_input(parameters={"shared_memory_region": "r", "shared_memory_byte_size": 48}),
        "inputs[0] ('input') uses shared memory",
    ),
]


async def test_malformed_requests_are_400(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    for content, fragment in MALFORMED:
        await expect_error(
            svc.client, f"/v2/models/{model_id}/infer", 400, fragment, content=content
        )


async def test_tensors_that_do_not_fit_the_model_are_400(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    for body, fragment in TENSORS:
        # json.dumps writes Infinity, which the server's parser reads as a float.
        await expect_error(
            svc.client, f"/v2/models/{model_id}/infer", 400, fragment, content=json.dumps(body)
        )


async def test_bad_output_requests_are_400(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    regressor = await svc.train("random_forest", target="amount")
    for body, fragment in OUTPUTS:
        await expect_error(svc.client, f"/v2/models/{model_id}/infer", 400, fragment, json=body)
    await expect_error(
        svc.client,
        f"/v2/models/{regressor}/infer",
        400,
        "is a regression model and has no class probabilities",
        json={**with_input(), "outputs": [{"name": "predict_proba"}]},
    )


def _binary_cases() -> list[tuple[bytes, dict[str, str], str]]:
    X = np.zeros((2, 3))
    header = {
        "inputs": [
            {
                "name": "input",
                "datatype": "FP64",
                "shape": [2, 3],
                "parameters": {"binary_data_size": 48},
            }
        ]
    }
    good, headers = binary_request(header, [X.tobytes()])

    def colour(blob: bytes) -> tuple[bytes, dict[str, str]]:
        tensor = {
            "name": "colour",
            "datatype": "BYTES",
            "shape": [2],
            "parameters": {"binary_data_size": len(blob)},
        }
        return binary_request({"inputs": [tensor]}, [blob])

    def sized(size: Any, **extra: Any) -> tuple[bytes, dict[str, str]]:
        tensor = {**header["inputs"][0], "parameters": {"binary_data_size": size}, **extra}
        return binary_request({"inputs": [tensor]}, [X.tobytes()])

    return [
        (good, {HEADER_LENGTH: "forty"}, "header is 'forty'"),
        (good, {HEADER_LENGTH: str(len(good) + 1)}, f"(at most {len(good)})"),
        (good, {}, "binary tensor data needs the Inference-Header-Content-Length header"),
        (good + b"\x00", headers, "1 bytes after the JSON header and the inputs' binary data"),
        (good[:-8], headers, "declares 48 bytes of binary data but only 40 remain"),
        (*sized(40), "has binary_data_size 40 but its shape and datatype FP64 need 48"),
        (*sized("48"), "binary_data_size must be a byte count"),
        (*sized(48, data=[0] * 6), "has both 'data' and binary_data_size"),
        (
            *colour(bytes_element("redredred")),
            "has binary data for 1 BYTES elements but its shape needs 2",
        ),
        (
            *colour(struct.pack("<I", 99) + b"red" + bytes_element("blue")),
            "element 0 says it is 99 bytes long",
        ),
        (
            *colour(bytes_element("red") + struct.pack("<I", 1) + b"\xff"),
            "BYTES element 1 is not UTF-8",
        ),
        (
            *colour(bytes_element("red") + bytes_element("blue") + b"!"),
            "has 1 bytes of binary data after its 2 BYTES elements",
        ),
        (*colour(b"\x00" * 4), "has 4 bytes of binary data, too few for 2 BYTES elements"),
    ]


async def test_bad_binary_framing_is_400(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    for body, headers, fragment in _binary_cases():
        await expect_error(
            svc.client, f"/v2/models/{model_id}/infer", 400, fragment, content=body, headers=headers
        )
    await expect_error(
        svc.client,
        f"/v2/models/{model_id}/infer",
        400,
        "cannot be decompressed",
        content=b"not gzip",
        headers={"Content-Encoding": "gzip"},
    )
    await expect_error(
        svc.client,
        f"/v2/models/{model_id}/infer",
        400,
        "truncated",
        content=gzip.compress(json.dumps(with_input()).encode())[:-12],
        headers={"Content-Encoding": "gzip"},
    )
    await expect_error(
        svc.client,
        f"/v2/models/{model_id}/infer",
        415,
        "Content-Encoding 'br' is not supported",
        content=json.dumps(with_input()).encode(),
        headers={"Content-Encoding": "br"},
    )


async def test_limits_are_413(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    too_many = MAX_PREDICT_ROWS + 1
    path = f"/v2/models/{model_id}/infer"
    # Refused from the declared shape, before any data is read.
    await expect_error(
        svc.client,
        path,
        413,
        f"The request has {too_many} rows; at most {MAX_PREDICT_ROWS}",
        json=with_input(shape=[too_many, 3], data=None),
    )
    await expect_error(
        svc.client,
        path,
        413,
        "COPPICE_MAX_PREDICT_ROWS",
        json={"inputs": [feature("x", "FP64", [0.0] * too_many)]},
    )
    small = create_app(svc.settings.model_copy(update={"max_request_bytes": 1000}))
    async with small.router.lifespan_context(small):
        transport = httpx.ASGITransport(app=small)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            big = json.dumps(with_input(shape=[40, 3], data=[0.123456789] * 120)).encode()
            await expect_error(client, path, 413, "COPPICE_MAX_REQUEST_BYTES", content=big)
            bomb = gzip.compress(b'{"inputs": [], "pad": "' + b" " * 100_000 + b'"}')
            assert len(bomb) < 1000
            await expect_error(
                client,
                path,
                413,
                "decompressed request body is larger",
                content=bomb,
                headers={"Content-Encoding": "gzip"},
            )
            ok = await client.post(path, json=with_input())
            assert ok.status_code == 200, ok.text


async def test_wrong_methods_and_paths_keep_the_protocol_shape(svc: Service) -> None:
    responses = [
        await svc.client.post("/v2"),
        await svc.client.get("/v2/models/abc/infer"),
        await svc.client.get("/v2/models/abc/versions/1/nothing"),
    ]
    v1 = await svc.client.post("/v1/models")

    assert [r.status_code for r in responses] == [405, 405, 404]
    for response in responses:
        assert response.headers["content-type"] == "application/json"
        assert set(response.json()) == {"error"}
    assert v1.headers["content-type"] == "application/problem+json"
