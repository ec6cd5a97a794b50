"""Roles: predict keys read the registry and predict through it; only admin keys change it."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.auth.conftest import ADMIN_KEY, PREDICT_KEY, bearer, keys_setting
from tests.service.inference.helpers import RECORDS

pytestmark = pytest.mark.anyio

ADMIN = bearer(ADMIN_KEY)
PREDICT = bearer(PREDICT_KEY)


async def test_predict_keys_read_and_predict_admin_keys_change(
    settings: Settings, sqlite_seed: tuple[Path, str, str]
) -> None:
    shutil.copyfile(sqlite_seed[0], settings.data_dir / "coppice.db")
    shutil.copytree(sqlite_seed[0].parent / "store", settings.data_dir / "store")
    keyed = Settings.model_validate(settings.model_dump() | {"api_keys": keys_setting()})
    app = create_app(keyed)
    model_id = sqlite_seed[1]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            refused = await client.post(
                "/v1/registered-models", json={"name": "churn"}, headers=PREDICT
            )
            assert refused.status_code == 403
            created = await client.post(
                "/v1/registered-models", json={"name": "churn"}, headers=ADMIN
            )
            assert created.status_code == 201
            versions = "/v1/registered-models/churn/versions"
            body = {"model_id": model_id}
            assert (await client.post(versions, json=body, headers=PREDICT)).status_code == 403
            assert (await client.post(versions, json=body, headers=ADMIN)).status_code == 201
            alias = "/v1/registered-models/churn/aliases/production"
            assert (
                await client.put(alias, json={"version": 1}, headers=PREDICT)
            ).status_code == 403
            assert (await client.put(alias, json={"version": 1}, headers=ADMIN)).status_code == 200
            assert (await client.delete(alias, headers=PREDICT)).status_code == 403

            for path in (
                "",
                "/churn",
                "/churn/versions/1",
                "/churn/aliases/production",
                "/churn/history",
            ):
                read = await client.get(f"/v1/registered-models{path}", headers=PREDICT)
                assert read.status_code == 200, path
            predicted = await client.post(
                "/v1/models/churn@production/predict", json={"records": RECORDS}, headers=PREDICT
            )
            assert predicted.status_code == 200 and predicted.json()["model_id"] == model_id
            inferred = await client.get("/v2/models/churn/ready", headers=PREDICT)
            assert inferred.status_code == 200

            history = await client.get("/v1/registered-models/churn/history", headers=PREDICT)
            (move,) = history.json()["items"]
            # The key's label (the part of COPPICE_API_KEYS before its secret is never shown).
            assert move["actor"] and ADMIN_KEY not in move["actor"]
            version = await client.get(f"{versions}/1", headers=PREDICT)
            assert version.json()["created_by"] == move["actor"]
