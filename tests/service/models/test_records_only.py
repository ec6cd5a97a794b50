"""A body of records only is built without pydantic (``records_only``): the same request as
validating it gives, and None for every other body, which pydantic then validates."""

from __future__ import annotations

from typing import Any

import pytest

from service.models.schemas import PredictRequest, records_only


@pytest.mark.parametrize(
    "records",
    [
        [{"a": 1.5, "b": None}],
        [{"a": 1, "colour": "red"}, {}, {"a": -0.0, "b": [1, 2]}],
    ],
)
def test_records_only_is_the_validated_request(records: list[dict[str, Any]]) -> None:
    built = records_only({"records": records})
    validated = PredictRequest.model_validate({"records": records})
    assert built is not None
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert built.model_fields_set == validated.model_fields_set
    assert (built.n_rows, built.numbers_only, built.matrix) == (len(records), False, None)
    built.numbers_only = True  # a private attribute of its own, not shared with the next one
    again = records_only({"records": records})
    assert again is not None and not again.numbers_only


@pytest.mark.parametrize(
    "document",
    [
        {"records": [{"a": 1}], "return_proba": True},
        {"records": []},
        {"records": None},
        {"records": [{"a": 1}, [1, 2]]},
        {"records": {"a": 1}},
        {"columns": ["a"], "rows": [[1]]},
        [{"records": [{"a": 1}]}],
        {},
    ],
)
def test_any_other_body_is_left_to_pydantic(document: Any) -> None:
    assert records_only(document) is None
