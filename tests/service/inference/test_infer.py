"""``POST /v2/models/{id}/infer`` with JSON tensors: the same answers as ``/v1`` predict."""

from __future__ import annotations

import gzip
import math
from typing import Any

import numpy as np
import pytest

from tests.service.inference.helpers import (
    BOTH_BACKENDS,
    RECORDS,
    matrix_input,
    matrix_rows,
    outputs_by_name,
)
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


async def v1_predict(svc: Service, model_id: str, **body: Any) -> dict[str, Any]:
    response = await svc.client.post(f"/v1/models/{model_id}/predict", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def infer(svc: Service, model_id: str, body: dict[str, Any], **kwargs: Any) -> Any:
    response = await svc.client.post(f"/v2/models/{model_id}/infer", json=body, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


@BOTH_BACKENDS
async def test_matrix_input_equals_v1_predict(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    expected = await v1_predict(svc, model_id, records=RECORDS, return_proba=True)

    body = await infer(svc, model_id, {"id": "req-1", "inputs": [matrix_input(RECORDS)]})

    assert body["model_name"] == model_id
    assert body["model_version"] == "1"
    assert body["id"] == "req-1"
    n = len(RECORDS)
    assert body["outputs"] == [
        {
            "name": "predictions",
            "datatype": "BYTES",
            "shape": [n],
            "data": expected["predictions"],
        },
        {
            "name": "probabilities",
            "datatype": "FP64",
            "shape": [n, 2],
            "data": [p for row in expected["probabilities"] for p in row],
        },
    ]


async def test_feature_tensors_with_category_text_equal_v1_predict(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting")
    expected = await v1_predict(svc, model_id, records=RECORDS, return_proba=True)
    n = len(RECORDS)
    inputs = [
        # Any order; "x" as [n, 1], the others as [n].
        {
            "name": "colour",
            "datatype": "BYTES",
            "shape": [n],
            "data": [r.get("colour") for r in RECORDS],
        },
        {"name": "x", "datatype": "FP32", "shape": [n, 1], "data": [[r.get("x")] for r in RECORDS]},
        {"name": "z", "datatype": "FP64", "shape": [n], "data": [r.get("z") for r in RECORDS]},
    ]

    body = await infer(svc, model_id, {"inputs": inputs})

    outputs = outputs_by_name(body)
    assert "id" not in body
    assert outputs["predictions"]["data"] == expected["predictions"]
    np.testing.assert_allclose(
        outputs["probabilities"]["data"], np.ravel(expected["probabilities"]), rtol=1e-6
    )


async def test_absent_feature_tensor_is_missing(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    records = [{"z": r.get("z"), "colour": r.get("colour")} for r in RECORDS]
    expected = await v1_predict(svc, model_id, records=records)
    n = len(records)
    inputs = [
        {"name": "z", "datatype": "FP64", "shape": [n], "data": [r["z"] for r in records]},
        {
            "name": "colour",
            "datatype": "BYTES",
            "shape": [n],
            "data": [r["colour"] for r in records],
        },
    ]

    body = await infer(svc, model_id, {"inputs": inputs, "outputs": [{"name": "predictions"}]})

    assert body["outputs"][0]["data"] == expected["predictions"]


async def test_regression_equals_v1_predict(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting", target="amount")
    expected = await v1_predict(svc, model_id, records=RECORDS)

    body = await infer(svc, model_id, {"inputs": [matrix_input(RECORDS)]})

    (output,) = body["outputs"]
    assert output["name"] == "predictions"
    assert output["datatype"] == "FP64"
    assert output["shape"] == [len(RECORDS)]
    np.testing.assert_allclose(output["data"], expected["predictions"])


async def test_nested_and_integer_data_and_codes(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="species")
    rows = matrix_rows(RECORDS)
    flat = await infer(svc, model_id, {"inputs": [matrix_input(RECORDS)]})

    nested = await infer(
        svc,
        model_id,
        {"inputs": [{"name": "input", "datatype": "FP64", "shape": [len(rows), 3], "data": rows}]},
    )
    # A code that is no category (out of range, fractional) is missing, like -1 and null.
    strange = [[*row[:2], code] for row, code in zip(rows, [2, 0, 7, 1.5, 1, -3], strict=True)]
    unknown = await infer(
        svc,
        model_id,
        {
            "inputs": [
                {"name": "input", "datatype": "FP64", "shape": [len(rows), 3], "data": strange}
            ]
        },
    )
    integers = await infer(
        svc,
        model_id,
        {
            "inputs": [
                {"name": "input", "datatype": "INT64", "shape": [2, 3], "data": [1, 0, 2, -1, 1, 0]}
            ]
        },
    )
    as_floats = await infer(
        svc,
        model_id,
        {
            "inputs": [
                {"name": "input", "datatype": "FP64", "shape": [2, 3], "data": [1, 0, 2, -1, 1, 0]}
            ]
        },
    )

    assert nested == flat
    assert unknown == flat
    assert integers == as_floats
    assert outputs_by_name(flat)["probabilities"]["shape"] == [len(rows), 3]


async def test_output_selection_aliases_and_classification(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="species")
    expected = await v1_predict(svc, model_id, records=RECORDS, return_proba=True)

    probabilities_only = await infer(
        svc, model_id, {"inputs": [matrix_input(RECORDS)], "outputs": [{"name": "probabilities"}]}
    )
    aliases = await infer(
        svc,
        model_id,
        {
            "inputs": [matrix_input(RECORDS)],
            "outputs": [{"name": "predict_proba"}, {"name": "predict"}],
        },
    )
    top = await infer(
        svc,
        model_id,
        {
            "inputs": [matrix_input(RECORDS)],
            "outputs": [{"name": "probabilities", "parameters": {"classification": 2}}],
        },
    )

    (proba,) = probabilities_only["outputs"]
    assert proba["name"] == "probabilities"
    assert [o["name"] for o in aliases["outputs"]] == ["predict_proba", "predict"]
    assert aliases["outputs"][0]["data"] == proba["data"]
    assert aliases["outputs"][1]["data"] == expected["predictions"]
    (ranked,) = top["outputs"]
    assert ranked["datatype"] == "BYTES"
    assert ranked["shape"] == [len(RECORDS), 2]
    classes = expected["classes"]
    for row, pair in zip(
        expected["probabilities"], np.reshape(ranked["data"], (-1, 2)), strict=True
    ):
        best = int(np.argmax(row))
        score, index, label = pair[0].split(":")
        assert (int(index), label) == (best, classes[best])
        assert math.isclose(float(score), row[best], abs_tol=1e-6)
        assert float(pair[1].split(":")[0]) <= float(score)


async def test_zero_rows(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = await infer(
        svc,
        model_id,
        {"inputs": [{"name": "input", "datatype": "FP64", "shape": [0, 3], "data": []}]},
    )

    assert body["outputs"] == [
        {"name": "predictions", "datatype": "BYTES", "shape": [0], "data": []},
        {"name": "probabilities", "datatype": "FP64", "shape": [0, 2], "data": []},
    ]


async def test_versioned_route_and_gzip_body(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    plain = await infer(svc, model_id, {"inputs": [matrix_input(RECORDS)]})
    compressed = gzip.compress(
        __import__("json").dumps({"inputs": [matrix_input(RECORDS)]}).encode()
    )

    response = await svc.client.post(
        f"/v2/models/{model_id}/versions/1/infer",
        content=compressed,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )

    assert response.status_code == 200, response.text
    assert response.json() == plain
