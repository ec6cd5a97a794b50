"""SQL of the models domain that the HTTP tests cannot reach: racing importance writes."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from service.db.tables import ImportanceRecord
from service.models import repository
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


async def test_a_concurrently_stored_importance_wins(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with (
        Session(svc.db_engine, expire_on_commit=False) as first,
        Session(svc.db_engine, expire_on_commit=False) as second,
    ):
        theirs = repository.add_importance(
            first, ImportanceRecord(model_id=model_id, kind="shap", payload={"features": [1]})
        )
        first.commit()
        assert repository.importance(second, model_id, "impurity") is not None

        ours = repository.add_importance(
            second, ImportanceRecord(model_id=model_id, kind="shap", payload={"features": [2]})
        )
        second.commit()

    assert ours.id == theirs.id and ours.payload == {"features": [1]}
    with Session(svc.db_engine) as session:
        count = select(func.count()).select_from(ImportanceRecord)
        assert session.scalar(count.where(ImportanceRecord.kind == "shap")) == 1


async def test_listing_never_reads_artifacts(svc: Service) -> None:
    await svc.train("random_forest")
    statements: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    event.listen(svc.db_engine, "before_cursor_execute", record)
    try:
        page = await svc.client.get("/v1/models")
        one = await svc.client.get(f"/v1/models/{page.json()['items'][0]['id']}")
    finally:
        event.remove(svc.db_engine, "before_cursor_execute", record)

    assert page.status_code == one.status_code == 200
    assert statements and not any("model_artifacts" in s for s in statements)
