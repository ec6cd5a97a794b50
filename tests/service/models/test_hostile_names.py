"""Hostile names — SQL fragments, quotes, markup, unicode, very long — are data, nothing more.

Dataset, column, category and job names are stored and echoed back byte for byte, on SQLite and
PostgreSQL, and a model trained on such columns predicts from records that use them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio

SQL = "x'); DROP TABLE datasets; --"
QUOTES = 'a "quoted" \\ back\\slash'
MARKUP = "<script>alert(1)</script>"
UNICODE = "größe 📈 مقدار 值"
LONG = "n" * 5000
NAMES = [SQL, QUOTES, MARKUP, UNICODE, LONG]


def _rows(n: int = 120) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        x = float(rng.normal())
        category = [SQL, UNICODE, MARKUP][i % 3]  # hostile category names too
        rows.append([x, float(rng.normal()), category, LONG[: 1 + i % 4], "yes" if x > 0 else "no"])
    return rows


async def test_hostile_names_are_stored_and_echoed_verbatim(svc: Service) -> None:
    columns = [SQL, QUOTES, MARKUP, UNICODE, LONG]
    upload = await svc.client.post(
        "/v1/datasets", json={"name": SQL + UNICODE, "columns": columns, "rows": _rows()}
    )
    assert upload.status_code == 201, upload.text
    dataset = upload.json()
    job = await svc.client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "target": LONG,
            "method": "decision_tree",
            "name": MARKUP + QUOTES,
        },
    )
    assert job.status_code == 202, job.text

    listed = (await svc.client.get("/v1/datasets")).json()["items"]
    fetched = (await svc.client.get(f"/v1/datasets/{dataset['id']}")).json()
    got_job = (await svc.client.get(f"/v1/jobs/{job.json()['id']}")).json()

    assert [item["name"] for item in listed] == [SQL + UNICODE]
    assert [column["name"] for column in fetched["columns"]] == NAMES
    assert got_job["name"] == MARKUP + QUOTES
    assert got_job["target"] == LONG and got_job["features"] == NAMES[:4]
    # The datasets table is still there, with the row in it.
    assert (await svc.client.get("/v1/datasets")).json()["total"] == 1


async def test_a_model_on_hostile_columns_predicts_from_records_using_them(svc: Service) -> None:
    upload = await svc.client.post(
        "/v1/datasets",
        json={"columns": [SQL, UNICODE, MARKUP, "len", "label"], "rows": _rows()},
    )
    svc.dataset_id = upload.json()["id"]
    model_id = await svc.train(
        "decision_tree", features=[SQL, UNICODE, MARKUP], params={"max_depth": 2}
    )

    model = (await svc.client.get(f"/v1/models/{model_id}")).json()
    records = [{SQL: 1.5, UNICODE: 0.0, MARKUP: SQL}, {SQL: -1.5, UNICODE: 0.0, MARKUP: UNICODE}]
    body = (
        await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": records})
    ).json()

    assert [feature["name"] for feature in model["features"]] == [SQL, UNICODE, MARKUP]
    assert body["predictions"] == ["yes", "no"]
