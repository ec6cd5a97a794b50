"""Generated uploads and training requests: a clear 4xx naming the fault, or the right 2xx.

CSV files are built from hostile cells (huge numbers, infinity and NaN spellings, quotes,
newlines, NULs, any Unicode), then sent in one of several encodings, with or without a BOM,
with ragged rows, empty or duplicate column names. JSON datasets mix wrong types, nested
values, nulls and integers past float64. A dataset the service accepts is then trained on
(constant targets, one class, all-missing features) through ``POST /v1/jobs`` and the worker's
training code: a job is either refused with a 4xx naming the field, or trains, or fails with
a domain error the worker records as a clear job error.

``tests/service/datasets/test_router.py`` and ``test_ingest.py`` hold the hand-written cases;
these only generate.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from service.config import Settings
from service.store import store_from_settings
from service.training import TrainingError, run_training
from tests.service.fuzz.problems import FUZZ, assert_answered, assert_names
from tests.service.models.helpers import claim_queued_job

pytestmark = pytest.mark.anyio

# What a cell of a real-world CSV file may hold, the troublesome spellings included.
NUMBER_TEXTS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers().map(str),
    st.sampled_from(
        ["1e400", "-1e400", "1e-400", "inf", "-Infinity", "+inf", "nan", "NaN", "-nan", "NAN"]
    ),
    st.sampled_from(["1_000", "0x1F", "１２", " 7 ", "1,5", "9" * 400, "-0", ".5", "5."]),
)
MISSING_TEXTS = st.sampled_from(["", "NA", "N/A", "NaN", "null", "NULL", "  "])
TEXTS = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
CELLS = st.one_of(NUMBER_TEXTS, MISSING_TEXTS, TEXTS)
# Column names: mostly good ones, unique; now and then one that must be refused.
GOOD_NAMES = st.text(st.characters(exclude_categories=["Cs", "Cc", "Zs"]), min_size=1, max_size=6)
BAD_NAMES = st.sampled_from(["", " ", "\t", "a\x00b", "dup"])
ENCODINGS = st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "latin-1", "utf-16", "utf-16-be"])
UTF8 = {"utf-8", "utf-8-sig"}


@st.composite
def headers(draw: st.DrawFn, width: int) -> list[str]:
    names = draw(st.lists(GOOD_NAMES, min_size=width, max_size=width, unique=True))
    if draw(st.integers(0, 4)) == 0:  # one bad name in five headers
        bad = draw(BAD_NAMES)
        names[draw(st.integers(0, width - 1))] = bad if bad != "dup" else names[0]
    return names


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """A header and rows of text cells, each row as long as the header."""
    width = draw(st.integers(1, 5))
    header = draw(headers(width))
    # Each column leans numeric, text or missing, so columns of every kind come out.
    kinds = draw(st.lists(st.sampled_from([NUMBER_TEXTS, TEXTS, CELLS]), min_size=width))
    n_rows = draw(st.integers(0, 6))
    rows = [[draw(kinds[i % len(kinds)]) for i in range(width)] for _ in range(n_rows)]
    return header, rows


def write_csv(header: list[str], rows: list[list[str]], line_end: str) -> str:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator=line_end)
    writer.writerow(header)
    writer.writerows(rows)
    return text.getvalue()


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "_" not in text


def infinite_columns(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns whose present cells are all numbers, one of them infinite: a 422 each."""
    missing = {"", "NA", "N/A", "NaN", "nan", "null", "NULL"}
    found = []
    for i, name in enumerate(header):
        present = [row[i].strip() for row in rows if row[i].strip() not in missing]
        if present and all(map(is_number, present)) and any(math.isinf(float(c)) for c in present):
            found.append(name)
    return found


def csv_faults(header: list[str], rows: list[list[str]], ragged: bool) -> list[str]:
    """What must be named in the detail when a UTF-8 upload is refused; [] when it may not be."""
    faults = []
    names = [name for name in header if name.strip()]
    if len(names) < len(header) or len(set(header)) < len(header) or "\x00" in "".join(header):
        faults.append("column")
    if ragged:
        faults.append("cells")
    if not rows:
        faults.append("no rows")
    faults += infinite_columns(header, rows)
    return faults


async def upload_csv(client: httpx.AsyncClient, data: bytes) -> httpx.Response:
    return await client.post("/v1/datasets", files={"file": ("fuzz.csv", data, "text/csv")})


@FUZZ
@given(
    table=tables(),
    encoding=ENCODINGS,
    line_end=st.sampled_from(["\n", "\r\n"]),
    ragged=st.sampled_from([False, False, False, True]),
    garbage=st.sampled_from([b""] * 5 + [b"\xff", b"\xc3\x28", b"\xed\xa0\x80"]),
)
async def test_csv_uploads(
    fuzz_client: httpx.AsyncClient,
    table: tuple[list[str], list[list[str]]],
    encoding: str,
    line_end: str,
    ragged: bool,
    garbage: bytes,
) -> None:
    header, rows = table
    ragged = ragged and bool(rows)
    if ragged:
        rows = [*rows[:-1], [*rows[-1], "extra"]]
    data = write_csv(header, rows, line_end).encode(encoding, errors="replace") + garbage

    response = await upload_csv(fuzz_client, data)

    clean_utf8 = encoding in UTF8 and not garbage
    faults = csv_faults(header, rows, ragged)
    if line_end == "\n" and "\r" in "".join(header) + "".join(map("".join, rows)):
        # Python's writer leaves a lone CR unquoted unless it ends lines: not valid CSV.
        faults.append("CSV")
    if response.status_code == 201:
        body = response.json()
        assert (body["n_columns"], body["n_rows"]) == (len(header), len(rows)), body
        assert not (clean_utf8 and faults), f"accepted despite {faults}: {body}"
    elif clean_utf8:
        assert faults, f"a well-formed upload was refused: {response.text}"
        assert_names(response, *faults)
    else:
        assert_names(response, "UTF-8", "column", "cells", "CSV", "no rows", "infinite")


@pytest.mark.slow
@pytest.mark.parametrize(("width", "status"), [(10_000, 201), (10_001, 422)])
async def test_ten_thousand_columns(
    fuzz_client: httpx.AsyncClient, width: int, status: int
) -> None:
    header = [f"c{i}" for i in range(width)]
    data = write_csv(header, [[str(i) for i in range(width)]], "\n").encode()

    response = await upload_csv(fuzz_client, data)

    assert response.status_code == status, response.text
    if status == 201:
        assert response.json()["n_columns"] == width
    else:
        assert_names(response, "COPPICE_MAX_COLUMNS")


# --- JSON datasets ----------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**400, -(10**309), 2**63, 1e308, -0.0, math.inf, math.nan]),
    st.floats(),
    TEXTS,
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=2), max_leaves=3)
# Mostly scalars: a nested value anywhere refuses the whole upload.
CELL_VALUES = st.one_of(*[SCALARS] * 8, VALUES, st.dictionaries(TEXTS, SCALARS, max_size=1))


@st.composite
def json_datasets(draw: st.DrawFn) -> dict[str, Any]:
    """``columns`` + ``rows`` or ``records``, with wrong types mixed in now and then."""
    document: dict[str, Any]
    if draw(st.booleans()):
        columns = draw(st.one_of(headers(draw(st.integers(1, 4))), st.lists(SCALARS, max_size=2)))
        width = max(0, len(columns) + draw(st.sampled_from([0, 0, 0, -1, 1])))
        rows = draw(st.lists(st.lists(CELL_VALUES, min_size=width, max_size=width), max_size=5))
        document = {"columns": columns, "rows": rows}
    else:
        record = st.dictionaries(st.one_of(GOOD_NAMES, BAD_NAMES), CELL_VALUES, max_size=4)
        document = {
            "records": draw(st.lists(st.one_of(record, record, record, SCALARS), max_size=5))
        }
    if draw(st.booleans()):
        document["name"] = draw(st.one_of(TEXTS, TEXTS, SCALARS))
    if draw(st.integers(0, 3)) == 0:
        document["categorical"] = draw(st.lists(st.one_of(GOOD_NAMES, SCALARS), max_size=2))
    return document


@FUZZ
@given(document=json_datasets())
async def test_json_datasets(fuzz_client: httpx.AsyncClient, document: dict[str, Any]) -> None:
    # allow_nan: Python's json (the service's parser) reads NaN and Infinity, so clients send them.
    content = json.dumps(document, allow_nan=True).encode()

    response = await fuzz_client.post(
        "/v1/datasets", content=content, headers={"content-type": "application/json"}
    )

    if response.status_code == 201:
        body = response.json()
        if "rows" in document:
            shape = (len(document["columns"]), len(document["rows"]))
        else:
            keys = {key for record in document["records"] for key in record}
            shape = (len(keys), len(document["records"]))
        assert (body["n_columns"], body["n_rows"]) == shape, body
    else:
        assert_answered(response)


# --- training edge cases ----------------------------------------------------------------------

METHODS = ["random_forest", "gradient_boosting", "adaboost", "logistic_regression", "ridge"]
TARGET_CELLS = st.one_of(
    st.sampled_from([0.0, 1.0, 1.0, 2.5, None]), st.sampled_from(["yes", "no", "yes", None])
)


@st.composite
def training_tables(draw: st.DrawFn) -> dict[str, Any]:
    """Few rows, a target that is often constant or one class, features often constant."""
    n_rows = draw(st.integers(1, 12))
    target_values = draw(st.lists(TARGET_CELLS, min_size=1, max_size=2))
    feature = draw(st.sampled_from([[1.0], [None], [0.0, 1.0], ["a", "b"], [None, 3.0]]))
    rows = [
        [feature[i % len(feature)], target_values[i % len(target_values)], float(i)]
        for i in range(n_rows)
    ]
    return {"columns": ["f", "target", "row"], "rows": rows}


@FUZZ
@given(
    table=training_tables(),
    method=st.sampled_from(METHODS),
    task=st.sampled_from([None, "classification", "regression"]),
    validation=st.sampled_from([{"holdout": 0}, {"holdout": 0.5}, {"folds": 2}, {"folds": 5}]),
    features=st.sampled_from([None, ["f"], ["f", "row"]]),
)
async def test_training_edge_cases(
    fuzz_client: httpx.AsyncClient,
    fuzz_db: Engine,
    fuzz_settings: Settings,
    table: dict[str, Any],
    method: str,
    task: str | None,
    validation: dict[str, Any],
    features: list[str] | None,
) -> None:
    upload = await fuzz_client.post("/v1/datasets", json=table)
    if upload.status_code != 201:  # a target that is all missing, say
        assert_answered(upload)
        return
    body: dict[str, Any] = {
        "dataset_id": upload.json()["id"],
        "target": "target",
        "method": method,
        "validation": validation,
        "seed": 1,
        "params": {"n_estimators": 3} if method != "logistic_regression" else {},
    }
    if method == "ridge":
        body["params"] = {}
    if task is not None:
        body["task"] = task
    if features is not None:
        body["features"] = features

    job = await fuzz_client.post("/v1/jobs", json=body)

    if job.status_code != 202:
        assert_names(job, "target", "task", "features", "method", "validation", "params", "rows")
        return
    _, spec, columns = claim_queued_job(
        fuzz_db, store_from_settings(fuzz_settings), job.json()["id"]
    )
    try:
        run_training(spec, columns, lambda fraction, stage: None, lambda: False)
    except TrainingError as error:
        # The worker stores this code and message as the job's error: clear, not a crash.
        assert error.code and error.message
