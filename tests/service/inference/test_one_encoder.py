"""The same rows through ``/v1`` predict and ``/v2`` infer are the same matrix, and the same answers.

Both protocols end in ``service.models.encoding.encode``; these tests send one set of rows in
every shape the two accept — records, rows, the ``input`` matrix (JSON and binary), one tensor
per feature (category text and category codes) — with categorical, missing, absent and unseen
values, and require the matrices, then the predictions, to be identical.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import numpy as np
import pytest

from service.errors import BadRequest, InvalidInput
from service.inference import features, requests
from service.models.cache import LoadedModel
from service.models.encoding import encode_records, encode_rows
from tests.service.inference.helpers import (
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

MODEL = LoadedModel(
    id="m",
    method="decision_tree",
    task="classification",
    target="label",
    estimator=None,
    features=[
        {"name": "x", "kind": "numeric"},
        {"name": "z", "kind": "numeric"},
        {"name": "colour", "kind": "categorical"},
        {"name": "size", "kind": "categorical"},
    ],
    encoding={"categories": {"colour": ["blue", "green", "red"], "size": ["1", "2.5", "L"]}},
    classes=["no", "yes"],
    size_bytes=0,
)
NAMES = ["x", "z", "colour", "size"]
# /v1 sends a categorical value as JSON text, number or boolean; a number is the text a
# dataset stores for it ("1" for 1 and 1.0).
ROWS: list[dict[str, Any]] = [
    {"x": 1.2, "z": 0.1, "colour": "red", "size": 1},
    {"x": -1.5, "z": None, "colour": " blue ", "size": 2.5},  # padded text is trimmed
    {"x": None, "z": 0.4, "colour": None, "size": "L"},
    {"z": -2.0},  # absent features are missing
    {"x": 0.3, "z": 0.0, "colour": "purple", "size": 3},  # categories training never saw
    {"x": 2.0**53, "z": -0.7, "colour": "green", "size": 1.0},
]
NAN = math.nan
EXPECTED = np.array(
    [
        [1.2, 0.1, 2, 0],
        [-1.5, NAN, 0, 1],
        [NAN, 0.4, NAN, 2],
        [NAN, -2.0, NAN, NAN],
        [0.3, 0.0, NAN, NAN],
        [2.0**53, -0.7, 1, 0],
    ]
)
# The same categories as /v2 BYTES text, and as the codes of the matrix; anything but a known
# code (-1, a fraction, past the end, NaN) is missing, as an unseen category is.
TEXTS: dict[str, list[Any]] = {
    "colour": ["red", " blue ", None, None, "purple", "green"],
    "size": ["1", "2.5", "L", None, "3", "1"],
}
CODES: dict[str, list[Any]] = {"colour": [2, 0, -1, None, 7, 1], "size": [0, 1, 2, 0.5, None, 0]}


def column(name: str) -> list[Any]:
    return [row.get(name) for row in ROWS]


def tensor(name: str, datatype: str, data: list[Any]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": [len(data)], "data": data}


def v2_matrix(header: dict[str, Any], binary: bytes = b"") -> np.ndarray:
    """The matrix /v2 infer predicts on for this request, decoded as the server decodes it."""
    request = requests.parse(header)
    layout = features.plan(MODEL, request.inputs, 1000, setting="COPPICE_MAX_PREDICT_ROWS")
    return features.matrix(MODEL, requests.decode_inputs(request.inputs, binary), layout)


def matrix_data() -> list[list[Any]]:
    return [
        [x, z, colour, size]
        for x, z, colour, size in zip(
            column("x"), column("z"), CODES["colour"], CODES["size"], strict=True
        )
    ]


def v2_shapes() -> dict[str, tuple[dict[str, Any], bytes]]:
    n = len(ROWS)
    rows = matrix_data()
    as_floats = np.array([[NAN if v is None else v for v in row] for row in rows])
    matrix = {"name": "input", "datatype": "FP64", "shape": [n, 4]}
    binary_matrix, header_length = binary_request(
        {"inputs": [{**matrix, "parameters": {"binary_data_size": as_floats.nbytes}}]},
        [as_floats.astype("<f8").tobytes()],
    )
    length = int(header_length[HEADER_LENGTH])
    colour_bytes = b"".join(bytes_element(text or "") for text in TEXTS["colour"])
    by_text = [
        tensor("size", "BYTES", TEXTS["size"]),
        tensor("x", "FP64", column("x")),
        tensor("colour", "BYTES", TEXTS["colour"]),
        tensor("z", "FP64", column("z")),
    ]
    return {
        "matrix": ({"inputs": [{**matrix, "data": rows}]}, b""),
        "binary matrix": (json.loads(binary_matrix[:length]), binary_matrix[length:]),
        "tensors of text": ({"inputs": by_text}, b""),
        "tensors of codes": (
            {
                "inputs": [
                    tensor("x", "FP64", column("x")),
                    tensor("z", "FP64", column("z")),
                    tensor("colour", "FP64", CODES["colour"]),
                    tensor("size", "FP64", CODES["size"]),
                ]
            },
            b"",
        ),
        # Binary BYTES cannot say null: the empty string, not a category, is missing too.
        "binary text": (
            {
                "inputs": [
                    tensor("x", "FP64", column("x")),
                    tensor("z", "FP64", column("z")),
                    {
                        "name": "colour",
                        "datatype": "BYTES",
                        "shape": [n],
                        "parameters": {"binary_data_size": len(colour_bytes)},
                    },
                    tensor("size", "BYTES", TEXTS["size"]),
                ]
            },
            colour_bytes,
        ),
    }


def test_v1_records_and_rows_are_the_expected_matrix() -> None:
    np.testing.assert_array_equal(encode_records(MODEL, ROWS), EXPECTED)
    columns = ["size", "colour", "z", "x"]  # not the model's order; every row lists each
    rows = [[row.get(name) for name in columns] for row in ROWS]
    np.testing.assert_array_equal(encode_rows(MODEL, columns, rows), EXPECTED)


@pytest.mark.parametrize("shape", list(v2_shapes()))
def test_every_v2_layout_is_the_v1_matrix(shape: str) -> None:
    header, binary = v2_shapes()[shape]
    np.testing.assert_array_equal(v2_matrix(header, binary), encode_records(MODEL, ROWS))


def test_an_infinite_cell_is_named_alike_by_both() -> None:
    rows = [dict(row) for row in ROWS]
    rows[3]["x"] = math.inf
    with pytest.raises(InvalidInput) as v1:
        encode_records(MODEL, rows)
    data = matrix_data()
    data[3][0] = math.inf
    with pytest.raises(BadRequest) as v2_matrix_error:
        v2_matrix(
            {"inputs": [{"name": "input", "datatype": "FP64", "shape": [6, 4], "data": data}]}
        )
    x = column("x")
    x[3] = math.inf
    with pytest.raises(BadRequest) as v2_tensor_error:
        v2_matrix({"inputs": [tensor("x", "FP64", x)]})
    # Each in its protocol's words, all naming row 3 of feature x.
    assert v1.value.detail.startswith("Row 3, feature 'x' is infinite (inf)")
    assert v1.value.errors == [{"loc": ["body", "records", 3, "x"], "msg": "infinite"}]
    assert v2_matrix_error.value.detail.startswith(
        "inputs[0] ('input'): row 3, feature 'x' is infinite; send a finite number, or NaN"
    )
    assert v2_tensor_error.value.detail.startswith("inputs[0] ('x'): element 3 is infinite")


async def _post(client: httpx.AsyncClient, path: str, **request: Any) -> httpx.Response:
    response = await client.post(path, **request)
    assert response.status_code == 200, response.text
    return response


async def test_the_same_rows_are_the_same_answers_over_http(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    client = svc.client
    v1 = f"/v1/models/{model_id}/predict"
    v2 = f"/v2/models/{model_id}/infer"
    by_records = (await _post(client, v1, json={"records": RECORDS, "return_proba": True})).json()
    names = ["colour", "z", "x"]
    rows = [[record.get(name) for name in names] for record in RECORDS]
    by_rows = (
        await _post(client, v1, json={"columns": names, "rows": rows, "return_proba": True})
    ).json()
    text = tensor("colour", "BYTES", [record.get("colour") for record in RECORDS])
    numbers = [tensor(name, "FP64", [record.get(name) for record in RECORDS]) for name in "xz"]
    X = np.array([[NAN if v is None else v for v in row] for row in matrix_rows(RECORDS)])
    body, headers = binary_request(
        {
            "inputs": [
                {
                    "name": "input",
                    "datatype": "FP64",
                    "shape": list(X.shape),
                    "parameters": {"binary_data_size": X.nbytes},
                }
            ],
            "parameters": {"binary_data_output": True},
        },
        [X.astype("<f8").tobytes()],
    )
    answers = [
        (await _post(client, v2, json={"inputs": [matrix_input(RECORDS)]})).json(),
        (await _post(client, v2, json={"inputs": [text, *numbers]})).json(),
    ]
    binary = await _post(client, v2, content=body, headers=headers)
    answers.append(read_binary_response(binary.content, int(binary.headers[HEADER_LENGTH])))

    # Each answer carries the prediction log's row ids, generated afresh per request.
    assert len(by_rows.pop("ids")) == len(by_records.pop("ids")) == len(RECORDS)
    assert by_rows == by_records
    for answer in answers:
        outputs = outputs_by_name(answer)
        assert outputs["predictions"]["data"] == by_records["predictions"]
        assert outputs["probabilities"]["data"] == [
            p for row in by_records["probabilities"] for p in row
        ]
