"""Generated prediction requests, /v1 and /v2: a 4xx naming the fault, or a right 2xx.

The seed's classifier and regressor take ``x`` and ``z`` (numeric) and ``colour``
(categorical). Requests are drawn with missing, extra and misspelt features, values of every
JSON type (huge integers, NaN and Infinity tokens, nested lists, booleans), empty records and
both body shapes. ``tests/service/models/test_predict.py`` and
``tests/service/inference/test_errors.py`` hold the hand-written cases; these only generate.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.service.fuzz.conftest import MAX_PREDICT_ROWS, Seed
from tests.service.fuzz.problems import FUZZ, assert_answered, assert_names

pytestmark = pytest.mark.anyio

FEATURES = ["x", "z", "colour"]
NUMBERS = st.one_of(
    st.floats(),  # NaN and the infinities included
    st.integers(),
    st.sampled_from([10**400, -(10**309), 2**64, 1e308, -0.0, 5e-324]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, NUMBERS, st.text(max_size=8))
VALUES = st.one_of(*[SCALARS] * 6, st.lists(SCALARS, max_size=2), st.just({"a": 1}))
# Mostly the model's features; now and then the target, a misspelling or a stranger.
KEYS = st.sampled_from([*FEATURES * 4, "label", "colour ", "X", "extra"])


def body_text(body: dict[str, Any]) -> bytes:
    # allow_nan: Python's json (the service's parser) reads NaN and Infinity tokens.
    return json.dumps(body, allow_nan=True).encode()


def faults(records: list[dict[str, Any]]) -> list[str]:
    """What a refusal must name: unknown keys, non-scalars, infinite or non-numeric numbers."""
    named = []
    for record in records:
        for key, value in record.items():
            if (
                key not in FEATURES
                or isinstance(value, list | dict)
                or (key != "colour" and value is not None and not _finite_number(value))
            ):
                named.append(key)
    return named


def _finite_number(value: Any) -> bool:
    if isinstance(value, str | bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


@FUZZ
@given(
    records=st.lists(st.dictionaries(KEYS, VALUES, max_size=4), max_size=6),
    as_rows=st.booleans(),
    return_proba=st.sampled_from([True, False, "yes", None]),
    explain=st.sampled_from([False, False, True, 1]),
    regressor=st.booleans(),
)
async def test_v1_predict(
    fuzz_client: httpx.AsyncClient,
    seed: Seed,
    records: list[dict[str, Any]],
    as_rows: bool,
    return_proba: Any,
    explain: Any,
    regressor: bool,
) -> None:
    model_id = seed.regressor_id if regressor else seed.classifier_id
    body: dict[str, Any] = {"return_proba": return_proba, "explain": explain}
    if as_rows:
        columns = sorted({key for record in records for key in record})
        body |= {"columns": columns, "rows": [[r.get(c) for c in columns] for r in records]}
    else:
        body["records"] = records

    response = await fuzz_client.post(
        f"/v1/models/{model_id}/predict",
        content=body_text(body),
        headers={"content-type": "application/json"},
    )

    expected_faults = faults(records)
    if return_proba is None:  # not a boolean, and checked before the rows are
        expected_faults.append("return_proba")
    if response.status_code == 200:
        assert not expected_faults, f"accepted despite {expected_faults}: {response.text}"
        result = response.json()
        assert len(result["predictions"]) == len(records)
        for row in result.get("probabilities") or []:
            assert math.isclose(sum(row), 1.0, rel_tol=1e-6)
    else:
        assert expected_faults, f"a well-formed request was refused: {response.text}"
        assert_names(response, *expected_faults)


@FUZZ
@given(
    rows=st.lists(st.lists(NUMBERS | st.none(), min_size=3, max_size=3), max_size=6),
    datatype=st.sampled_from(["FP64", "FP32", "INT64", "INT32", "BYTES", "BOOL", "FP16"]),
    width=st.sampled_from([3, 3, 3, 2, 4]),
    by_feature=st.booleans(),
)
async def test_v2_infer(
    fuzz_client: httpx.AsyncClient,
    seed: Seed,
    rows: list[list[Any]],
    datatype: str,
    width: int,
    by_feature: bool,
) -> None:
    rows = [row[:width] + [None] * (width - len(row)) for row in rows]
    if by_feature:
        inputs = [
            {"name": name, "datatype": datatype, "shape": [len(rows)], "data": [r[j] for r in rows]}
            for j, name in enumerate(FEATURES[:width])
        ]
    else:
        flat = [value for row in rows for value in row]
        inputs = [
            {"name": "input", "datatype": datatype, "shape": [len(rows), width], "data": flat}
        ]

    response = await fuzz_client.post(
        f"/v2/models/{seed.classifier_id}/infer",
        content=body_text({"inputs": inputs}),
        headers={"content-type": "application/json"},
    )

    assert response.status_code < 500, response.text
    if response.status_code == 200:
        outputs = {output["name"]: output for output in response.json()["outputs"]}
        assert outputs["predictions"]["shape"] == [len(rows)]
    else:
        error = response.json()["error"]
        assert isinstance(error, str) and error


@FUZZ
@given(n_rows=st.integers(0, MAX_PREDICT_ROWS + 3), digits=st.integers(310, 5000))
async def test_oversized_bodies_and_numbers(
    fuzz_client: httpx.AsyncClient, seed: Seed, n_rows: int, digits: int
) -> None:
    # An integer literal of hundreds to thousands of digits: past float64 it is infinite, past
    # 4300 digits Python's int() refuses it.
    number = "9" * digits
    records = ", ".join([f'{{"x": {number}}}'] * n_rows)
    v1 = await fuzz_client.post(
        f"/v1/models/{seed.classifier_id}/predict",
        content=f'{{"records": [{records}]}}'.encode(),
        headers={"content-type": "application/json"},
    )
    tensor = f'{{"name": "x", "datatype": "FP64", "shape": [1], "data": [{number}]}}'
    v2 = await fuzz_client.post(
        f"/v2/models/{seed.classifier_id}/infer",
        content=f'{{"inputs": [{tensor}]}}'.encode(),
        headers={"content-type": "application/json"},
    )

    if n_rows > MAX_PREDICT_ROWS:
        assert_names(v1, "COPPICE_MAX_PREDICT_ROWS", "digits")
    elif n_rows:
        assert_names(v1, "'x'", "digits")
    else:
        assert assert_answered(v1) is None
    assert v2.status_code == 400, v2.text
