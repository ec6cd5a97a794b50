"""Predict payloads to matrices: the whole-column fast paths agree with the cell-by-cell ones."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from service.errors import InvalidInput
from service.models.cache import LoadedModel
from service.models.encoding import encode_records, encode_rows

MODEL = LoadedModel(
    id="m",
    method="decision_tree",
    task="classification",
    target="label",
    estimator=None,
    features=[{"name": "x"}, {"name": "n"}, {"name": "colour"}],
    encoding={"categories": {"colour": ["blue", "red"]}},
    classes=["a", "b"],
    size_bytes=0,
)
COLUMNS = ["colour", "x", "n"]  # not the model's order
# No categorical feature: a rows body takes the one-call matrix path.
NUMERIC_MODEL = dataclasses.replace(
    MODEL, features=[{"name": "x"}, {"name": "n"}, {"name": "w"}], encoding={"categories": {}}
)


def rows_of(count: int) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    cells: list[list[Any]] = []
    for i in range(count):
        colour = [" red", "blue", None, "green"][i % 4]  # padded, known, missing, unseen
        x = None if i % 7 == 0 else float(rng.normal())
        n = [3, -(2**60), None, 0][i % 4]  # ints, one beyond float64's exact range
        cells.append([colour, x, n])
    return cells


def by_hand(rows: list[list[Any]]) -> np.ndarray:
    codes = {"blue": 0.0, "red": 1.0}
    return np.array(
        [
            [
                math.nan if x is None else x,
                math.nan if n is None else float(n),
                math.nan if colour is None else codes.get(colour.strip(), math.nan),
            ]
            for colour, x, n in rows
        ]
    )


def test_rows_and_records_encode_every_cell() -> None:
    rows = rows_of(200)
    expected = by_hand(rows)
    np.testing.assert_array_equal(encode_rows(MODEL, COLUMNS, rows), expected)
    records = [dict(zip(COLUMNS, row, strict=True)) for row in rows]
    np.testing.assert_array_equal(encode_records(MODEL, records), expected)


BAD_CELLS = [
    (math.inf, "row 5, feature 'x' is infinite"),
    (10**400, "row 5, feature 'x' is infinite"),
    (True, "row 5, feature 'x' is numeric but holds true"),
    ("1.5", "row 5, feature 'x' is numeric but holds '1.5'"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_CELLS)
@pytest.mark.parametrize("model", [MODEL, NUMERIC_MODEL], ids=["with-categories", "numeric"])
def test_a_bad_cell_in_a_numeric_column_is_named(
    bad: Any, message: str, model: LoadedModel
) -> None:
    rows = rows_of(50)
    if model is NUMERIC_MODEL:
        for row in rows:
            row[0] = 1.0  # "colour" is no feature of it; its cells become numbers of "w"
    rows[5][1] = bad
    columns = COLUMNS if model is MODEL else ["w", "x", "n"]
    with pytest.raises(InvalidInput) as raised:
        encode_rows(model, columns, rows)
    assert message.lower() in str(raised.value.detail).lower()
    assert raised.value.errors[0]["loc"] == ["body", "rows", 5, 1]


# 2,000 rows of 3 cells are past the list search's 4,096 cells: there NumPy finds the infinity.
@pytest.mark.parametrize("count", [50, 2000], ids=["few-cells", "many-cells"])
@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_an_infinite_record_cell_is_named_whatever_the_body_size(count: int, bad: float) -> None:
    rows = rows_of(count)
    rows[5][1] = bad
    records = [dict(zip(COLUMNS, row, strict=True)) for row in rows]
    with pytest.raises(InvalidInput) as raised:
        encode_records(MODEL, records)
    assert "row 5, feature 'x' is infinite" in str(raised.value.detail).lower()


def test_non_text_categories_take_the_cell_path() -> None:
    rows = [["red", 0.5, 1], [1, 0.5, 1], [True, 0.5, 1]]  # a number and a bool as categories
    X = encode_rows(MODEL, COLUMNS, rows)
    assert X[0, 2] == 1.0 and math.isnan(X[1, 2]) and math.isnan(X[2, 2])
    with pytest.raises(InvalidInput, match="feature 'colour' holds a JSON list"):
        encode_rows(MODEL, COLUMNS, [[["red"], 0.5, 1]])


def test_no_rows_is_an_empty_matrix() -> None:
    assert encode_rows(MODEL, COLUMNS, []).shape == (0, 3)


def test_numeric_rows_convert_in_one_call_like_cell_by_cell() -> None:
    rows = [[x, n] for _, x, n in rows_of(200)]  # "w" absent: missing in every row
    X = encode_rows(NUMERIC_MODEL, ["n", "x"], [[n, x] for x, n in rows])
    expected = np.array(
        [
            [math.nan if x is None else x, math.nan if n is None else float(n), math.nan]
            for x, n in rows
        ]
    )
    np.testing.assert_array_equal(X, expected)
    # Records always convert column by column; the two paths agree.
    records = [{"x": x, "n": n} for x, n in rows]
    np.testing.assert_array_equal(encode_records(NUMERIC_MODEL, records), expected)


@pytest.mark.parametrize("model", [MODEL, NUMERIC_MODEL], ids=["with-categories", "numeric"])
def test_a_row_that_is_not_a_list_is_named(model: LoadedModel) -> None:
    rows: list[Any] = [[1.0, 2.0, 3.0], 4.0, {"x": 1.0}]
    columns = COLUMNS if model is MODEL else ["w", "x", "n"]
    with pytest.raises(InvalidInput, match="Row 1 is not a list of cells") as raised:
        encode_rows(model, columns, rows)
    assert [error["loc"] for error in raised.value.errors] == [
        ["body", "rows", 1],
        ["body", "rows", 2],
    ]


@pytest.mark.parametrize(("bad", "message"), BAD_CELLS)
def test_records_refuse_a_bad_cell_by_name(bad: Any, message: str) -> None:
    # The one-call records path hands anything unusual to the cell-by-cell one, which names it.
    records: list[dict[str, Any]] = [{"x": 1.0, "colour": "red"} for _ in range(6)]
    records[5] = {"x": bad, "n": 2}
    with pytest.raises(InvalidInput) as raised:
        encode_records(MODEL, records)
    assert message.lower() in str(raised.value.detail).lower()
    assert raised.value.errors[0]["loc"] == ["body", "records", 5, "x"]


def test_records_with_other_cells_encode_as_the_cell_path_does() -> None:
    # Numbers and booleans for a category, and unknown keys, leave the one-call path.
    X = encode_records(MODEL, [{"colour": 1, "x": 2}, {"colour": True, "n": None}])
    assert math.isnan(X[0, 2]) and math.isnan(X[1, 2]) and X[0, 0] == 2.0
    with pytest.raises(InvalidInput, match="no feature named 'colr'"):
        encode_records(MODEL, [{"x": 1.0}, {"colr": "red"}])
