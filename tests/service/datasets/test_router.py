"""``/v1/datasets`` through the real ASGI app: uploads, limits, errors, list, get, delete."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.session import create_db_engine
from service.db.tables import JobRecord, JobStatus
from tests.service.datasets.conftest import app_client

pytestmark = pytest.mark.anyio

PROBLEM = "application/problem+json"
CSV = b"age,color,score\n31,red,0.5\n,blue,NA\n45,red,1.25\n"


async def _upload_csv(
    client: httpx.AsyncClient, data: bytes = CSV, **fields: str
) -> httpx.Response:
    return await client.post("/v1/datasets", files={"file": ("people.csv", data)}, data=fields)


def _without_distributions(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The columns' counts (their distributions: tests/service/datasets/test_distributions.py)."""
    return [{k: v for k, v in column.items() if k != "distribution"} for column in columns]


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    return body


async def test_csv_upload_infers_kinds_and_counts_missing(any_client: httpx.AsyncClient) -> None:
    response = await _upload_csv(any_client)

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "people.csv"
    assert (body["n_rows"], body["n_columns"]) == (3, 3)
    assert _without_distributions(body["columns"]) == [
        {"name": "age", "kind": "numeric", "n_missing": 1, "n_unique": 2},
        {"name": "color", "kind": "categorical", "n_missing": 0, "n_unique": 2},
        {"name": "score", "kind": "numeric", "n_missing": 1, "n_unique": 2},
    ]
    assert body["size_bytes"] == len(CSV)
    assert body["created_at"].endswith("Z") or body["created_at"].endswith("+00:00")
    fetched = await any_client.get(f"/v1/datasets/{body['id']}")
    assert fetched.json() == body


async def test_form_name_and_forced_categorical(client: httpx.AsyncClient) -> None:
    response = await _upload_csv(client, name="people", categorical="age, score")

    body = response.json()
    assert body["name"] == "people"
    assert [c["kind"] for c in body["columns"]] == ["categorical", "categorical", "categorical"]


async def test_json_rows_and_records(client: httpx.AsyncClient) -> None:
    rows = await client.post(
        "/v1/datasets",
        json={"name": "rows", "columns": ["x", "y"], "rows": [[1, "a"], [None, "b"], [2.5, None]]},
    )
    records = await client.post(
        "/v1/datasets",
        json={"name": "records", "records": [{"x": 1, "y": "a"}, {"y": "b"}, {"x": 2.5}]},
    )

    assert rows.status_code == records.status_code == 201
    assert rows.json()["columns"] == records.json()["columns"]
    assert _without_distributions(rows.json()["columns"]) == [
        {"name": "x", "kind": "numeric", "n_missing": 1, "n_unique": 2},
        {"name": "y", "kind": "categorical", "n_missing": 1, "n_unique": 2},
    ]


async def test_names_are_stored_and_echoed_verbatim(any_client: httpx.AsyncClient) -> None:
    names = ["x'); DROP TABLE datasets;--", "Ünïcode 名前 🌲", "long" * 2000, ' "quoted" ']
    response = await any_client.post(
        "/v1/datasets",
        json={"name": names[0] + names[1], "columns": names, "rows": [[1, 2, 3, 4]]},
    )

    body = response.json()
    assert response.status_code == 201, response.text
    assert body["name"] == names[0] + names[1]
    fetched = (await any_client.get(f"/v1/datasets/{body['id']}")).json()
    assert [column["name"] for column in fetched["columns"]] == names


async def test_upload_is_refused_while_streaming_past_the_limit(settings: Settings) -> None:
    limit = 64 * 1024
    sent = 0
    boundary = "coppice-test-boundary"

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"'
            "\r\nContent-Type: text/csv\r\n\r\na,b\r\n"
        ).encode()
        sent += len(head)
        yield head
        row = b"1.0,2.0\r\n" * 1024
        while sent < 100 * limit:  # far more than the limit, never fully sent
            sent += len(row)
            yield row

    settings = settings.model_copy(update={"max_upload_bytes": limit})
    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets",
            content=body(),
            headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        )

    problem = _problem(response, 413)
    assert "COPPICE_MAX_UPLOAD_BYTES" in problem["detail"]
    assert sent < limit + 4 * len(b"1.0,2.0\r\n" * 1024), "the body was read past the limit"


async def test_declared_length_over_the_limit_is_refused_at_once(settings: Settings) -> None:
    settings = settings.model_copy(update={"max_request_bytes": 100})
    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets", json={"columns": ["a"], "rows": [[i] for i in range(100)]}
        )

    assert "COPPICE_MAX_REQUEST_BYTES" in _problem(response, 413)["detail"]


async def test_too_many_columns(settings: Settings) -> None:
    settings = settings.model_copy(update={"max_columns": 2})
    async with app_client(settings) as client:
        response = await _upload_csv(client)

    assert "3 columns; this server accepts at most 2" in _problem(response, 422)["detail"]


@pytest.mark.parametrize(
    ("request_args", "status", "detail"),
    [
        (
            {"files": {"file": ("a.csv", b"a,b\n1,2\n3\n")}},
            400,
            "Row 2 (line 3 of the file) has 1 cells; the header has 2.",
        ),
        ({"files": {"file": ("a.csv", b"a,a\n1,2\n")}}, 422, "column 'a' appears more than once"),
        ({"files": {"file": ("a.csv", b"a,b\n")}}, 422, "no rows"),
        ({"files": {"file": ("a.csv", b"a\n\xc3\x28\n")}}, 400, "not UTF-8"),
        ({"files": {"file": ("a.csv", b"a\n1\n")}, "data": {"categorical": "b"}}, 422, "'b'"),
        ({"files": {"other": ("a.csv", b"a\n1\n")}}, 400, "no 'file' part"),
        ({"content": b"a\n1\n", "headers": {"content-type": "image/png"}}, 415, "image/png"),
        (
            {"content": b"{nope", "headers": {"content-type": "application/json"}},
            400,
            "not valid JSON",
        ),
        ({"json": {"columns": ["a"], "rows": [[1]], "colour": 1}}, 422, "colour"),
        ({"json": {"columns": ["a"], "rows": [[[1]]]}}, 422, "Row 1, column 'a' holds a JSON list"),
        (
            {"files": {"file": ("a.csv", b"a,b\n1,x\ry\n")}},
            400,
            "a lone carriage return) inside an unquoted cell; quote the cell",
        ),
    ],
    ids=[
        "ragged",
        "duplicate",
        "no-rows",
        "not-utf8",
        "unknown-categorical",
        "no-file",
        "media-type",
        "bad-json",
        "extra-key",
        "nested-cell",
        "lone-cr",
    ],
)
async def test_bad_uploads_are_problems_that_name_the_fault(
    client: httpx.AsyncClient, request_args: dict[str, Any], status: int, detail: str
) -> None:
    response = await client.post("/v1/datasets", **request_args)

    assert detail in _problem(response, status)["detail"]


async def test_list_pages(client: httpx.AsyncClient) -> None:
    ids = [(await _upload_csv(client, name=f"d{i}")).json()["id"] for i in range(3)]

    page = (await client.get("/v1/datasets", params={"limit": 2, "offset": 0})).json()
    rest = (await client.get("/v1/datasets", params={"limit": 2, "offset": 2})).json()

    assert page["total"] == rest["total"] == 3
    assert [item["id"] for item in page["items"] + rest["items"]] == ids[::-1]
    assert "columns" not in page["items"][0]
    _problem(await client.get("/v1/datasets", params={"limit": 0}), 422)


async def test_unknown_id_is_404(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get("/v1/datasets/nope"),
        await client.delete("/v1/datasets/nope"),
    ):
        assert _problem(response, 404)["detail"] == "There is no dataset with id 'nope'."


async def test_delete(any_client: httpx.AsyncClient) -> None:
    dataset_id = (await _upload_csv(any_client)).json()["id"]

    response = await any_client.delete(f"/v1/datasets/{dataset_id}")

    assert response.status_code == 204
    assert response.content == b""
    _problem(await any_client.get(f"/v1/datasets/{dataset_id}"), 404)


async def test_delete_conflicts_with_a_queued_job(
    any_client: httpx.AsyncClient, backend_settings: Settings
) -> None:
    dataset_id = (await _upload_csv(any_client)).json()["id"]
    engine = create_db_engine(backend_settings.resolved_database_url)
    with Session(engine) as session, session.begin():
        session.add(
            JobRecord(
                dataset_id=dataset_id,
                method="random_forest",
                task="classification",
                target="color",
                features=["age"],
                params={},
                validation={},
                status=JobStatus.QUEUED,
            )
        )
    engine.dispose()

    response = await any_client.delete(f"/v1/datasets/{dataset_id}")

    assert "used by 1 queued or running job" in _problem(response, 409)["detail"]
    assert (await any_client.get(f"/v1/datasets/{dataset_id}")).status_code == 200
