"""The predict router's byte-level test that a body's ``rows`` hold only numbers and nulls.

When it says yes, the encoder skips its per-cell type check, so a yes for a body with text,
a boolean, an object or a nested list in its rows would let a bad cell through; these bodies
must all be a no (the encoder then checks every cell, as before).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.exceptions import RequestValidationError

from service.errors import PayloadTooLarge
from service.models.router import _only_numbers, _predict_request


def only_numbers(body: Any, text: bytes | None = None) -> bool:
    raw = text if text is not None else json.dumps(body).encode()
    return _predict_request(raw, 1000).numbers_only


@pytest.mark.parametrize(
    "body",
    [
        {"columns": ["a", "b"], "rows": [[1.0, None], [2, -0.5e3]]},
        {"rows": [[1.0, 2.0]], "columns": ["a", "b"], "return_proba": True},
        {"columns": ["rows", "b"], "rows": [[1.0, 2.0]]},  # a column named "rows"
    ],
)
def test_numbers_and_nulls_are_seen(body: Any) -> None:
    assert only_numbers(body)
    assert only_numbers(body, json.dumps(body, indent=2).encode())


@pytest.mark.parametrize(
    "body",
    [
        {"columns": ["a", "b"], "rows": [[1.0, "2"]]},
        {"columns": ["a", "b"], "rows": [[1.0, True]]},
        {"columns": ["a", "b"], "rows": [[1.0, False]]},
        {"columns": ["a", "b"], "rows": [[1.0, {"x": 1}]]},
        {"columns": ["a", "b"], "rows": [[1.0, [2.0]], [3.0, 4.0]]},
        {"columns": ["a", "b"], "rows": [[1.0, 2.0], [3.0, [4.0]]]},
        {"columns": ['x"rows": [[1', "b"], "rows": [[1.0, "t"]]},  # an escaped quote
        {"columns": ["a", "b"], "explain": False, "rows": [[1.0, 2.0], ["x", 4.0]]},
    ],
)
def test_anything_else_is_not(body: Any) -> None:
    assert not only_numbers(body)


def test_a_rows_key_nested_elsewhere_is_not_trusted() -> None:
    raw = b'{"records": [{"rows": [[1]]}], "rows": [[true]], "columns": ["a"]}'
    assert not _only_numbers(raw, 1)


def test_rows_of_numbers_are_read_into_a_matrix() -> None:
    body = _predict_request(b'{"columns": ["a", "b"], "rows": [[1.5, null], [2, -0.5e3]]}', 10)
    assert body.matrix is not None and body.n_rows == 2 and body.numbers_only
    np.testing.assert_array_equal(body.matrix, [[1.5, np.nan], [2.0, -500.0]])


@pytest.mark.parametrize(
    "raw",
    [
        b'{"columns": ["a"], "rows": [[1]], "rows": [[2], [3]]}',  # the last key wins
        b'{"columns": ["a"], "rows": [[1]], "r\\u006fws": [[2], [3]]}',  # spelt with an escape
        b'{"columns": ["a", "b"], "rows": [[1], [2]]}',  # rows narrower than the columns
        b'{"columns": ["a"], "rows": [[1], ["x"]]}',
    ],
)
def test_bodies_the_matrix_reader_is_unsure_of_are_parsed_whole(raw: bytes) -> None:
    try:
        body = _predict_request(raw, 10)
    except RequestValidationError:
        return
    assert body.matrix is None
    assert body.rows == json.loads(raw)["rows"]


def test_the_matrix_reader_keeps_the_checks() -> None:
    with pytest.raises(PayloadTooLarge):
        _predict_request(b'{"columns": ["a"], "rows": [[1], [2], [3]]}', 2)
    with pytest.raises(RequestValidationError):
        _predict_request(b'{"columns": ["a"], "rows": [[1], [2]], "ids": ["x"]}', 10)
