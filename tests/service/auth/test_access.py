"""Who may call what, proven over every route the app has, through the real ASGI app."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings
from service.logs import JsonFormatter
from service.routing import all_routes
from tests.service.auth.conftest import (
    ADMIN_KEY,
    ALL_KEYS,
    HASHED_PREDICT_KEY,
    PREDICT_KEY,
    bearer,
)

pytestmark = pytest.mark.anyio

# Callable without a key: health for orchestrators, /metrics (COPPICE_METRICS_REQUIRE_KEY is
# off by default), the API's own documentation and the web console's pages and files (they
# hold no data: the console's own calls to /v1 carry the key).
OPEN_ROUTES = {
    "/",
    "/console",
    "/v2/health/live",
    "/v2/health/ready",
    "/metrics",
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
}
# What a predict key may do besides reading.
PREDICT_ROUTES = {
    ("POST", "/v1/models/{model_id}/predict"),
    ("POST", "/v2/models/{model_id}/infer"),
    ("POST", "/v2/models/{model_id}/versions/{version}/infer"),
}
# Writes the issue names explicitly: a predict key must never reach them.
ADMIN_ONLY = {
    ("POST", "/v1/datasets"),
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/{job_id}/cancel"),
    ("DELETE", "/v1/datasets/{dataset_id}"),
    ("DELETE", "/v1/models/{model_id}"),
}


def endpoints(app: FastAPI) -> Iterator[tuple[str, str, str]]:
    """(method, template, concrete path) for every method of every route of the app."""
    for route in all_routes(app):
        concrete = re.sub(r"\{[^}]+\}", "some-id", route.path)
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                yield method, route.path, concrete


def is_problem(response: httpx.Response, path: str) -> bool:
    if path.startswith("/v2/") or path == "/v2":
        return set(response.json()) == {"error"}
    return response.headers["content-type"] == "application/problem+json"


async def test_the_walk_sees_every_kind_of_route(keyed_app: FastAPI) -> None:
    seen = {(method, template) for method, template, _ in endpoints(keyed_app)}

    assert seen >= ADMIN_ONLY
    assert {route for route in PREDICT_ROUTES if route[1].startswith("/v1")} <= seen
    assert {("GET", "/v2/health/live"), ("GET", "/v1/models"), ("GET", "/metrics")} <= seen
    assert len(seen) >= 25


async def test_every_route_but_the_open_ones_needs_a_key(
    keyed_app: FastAPI, keyed_client: httpx.AsyncClient
) -> None:
    for method, template, path in endpoints(keyed_app):
        response = await keyed_client.request(method, path)
        if template in OPEN_ROUTES:
            assert response.status_code not in (401, 403), (method, path)
            continue
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"] == 'Bearer realm="coppice"'
        assert is_problem(response, path), (method, path, response.text)


async def test_a_route_added_later_is_covered_too(
    keyed_app: FastAPI, keyed_client: httpx.AsyncClient
) -> None:
    @keyed_app.get("/v1/added-later")
    async def added() -> dict[str, bool]:
        return {"ok": True}

    assert (await keyed_client.get("/v1/added-later")).status_code == 401
    response = await keyed_client.get("/v1/added-later", headers=bearer(PREDICT_KEY))
    assert response.json() == {"ok": True}


async def test_an_unknown_path_needs_a_key_before_it_is_a_404(
    keyed_client: httpx.AsyncClient,
) -> None:
    assert (await keyed_client.get("/v1/no-such-thing")).status_code == 401
    response = await keyed_client.get("/v1/no-such-thing", headers=bearer(PREDICT_KEY))
    assert response.status_code == 404


async def test_predict_keys_read_and_predict_only(
    keyed_app: FastAPI, keyed_client: httpx.AsyncClient
) -> None:
    for key in (PREDICT_KEY, HASHED_PREDICT_KEY):
        for method, template, path in endpoints(keyed_app):
            response = await keyed_client.request(method, path, headers=bearer(key))
            if method == "GET" or (method, template) in PREDICT_ROUTES:
                assert response.status_code not in (401, 403), (method, path, response.text)
                continue
            assert response.status_code == 403, (method, path, response.text)
            assert is_problem(response, path)
            assert "predict" in response.json().get("detail", response.json().get("error"))


async def test_predict_keys_cannot_upload_train_cancel_or_delete(
    keyed_client: httpx.AsyncClient,
) -> None:
    for method, template in sorted(ADMIN_ONLY):
        path = template.replace("{dataset_id}", "d").replace("{job_id}", "j")
        path = path.replace("{model_id}", "m")
        response = await keyed_client.request(method, path, headers=bearer(PREDICT_KEY))

        assert response.status_code == 403, (method, path)
        body = response.json()
        assert body["status"] == 403
        assert body["title"] == "Forbidden"
        assert f"{method} {template}" in body["detail"]
        assert "insufficient_scope" in response.headers["www-authenticate"]


async def test_a_real_upload_is_refused_for_predict_and_accepted_for_admin(
    keyed_client: httpx.AsyncClient,
) -> None:
    dataset = {"columns": ["x", "y"], "rows": [[1.0, "a"], [2.0, "b"]]}

    refused = await keyed_client.post("/v1/datasets", json=dataset, headers=bearer(PREDICT_KEY))
    created = await keyed_client.post("/v1/datasets", json=dataset, headers=bearer(ADMIN_KEY))

    assert refused.status_code == 403
    assert created.status_code == 201, created.text
    listing = await keyed_client.get("/v1/datasets", headers=bearer(PREDICT_KEY))
    assert listing.json()["total"] == 1


async def test_admin_keys_may_call_everything(
    keyed_app: FastAPI, keyed_client: httpx.AsyncClient
) -> None:
    for method, _, path in endpoints(keyed_app):
        response = await keyed_client.request(method, path, headers=bearer(ADMIN_KEY))
        assert response.status_code not in (401, 403), (method, path, response.text)


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer not-a-configured-key",
        f"Basic {ADMIN_KEY}",
        f"{ADMIN_KEY}",
        "Bearer ",
        f"Bearer {ADMIN_KEY}x",
        f"Bearer {ADMIN_KEY[:-1]}",
    ],
)
async def test_anything_but_a_bearer_key_is_refused(
    authorization: str, keyed_client: httpx.AsyncClient
) -> None:
    response = await keyed_client.get("/v1/models", headers={"Authorization": authorization})

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert ADMIN_KEY not in response.text


async def test_unknown_key_says_invalid_token(keyed_client: httpx.AsyncClient) -> None:
    response = await keyed_client.get("/v1/jobs", headers=bearer("wrong"))

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="coppice", error="invalid_token"'
    assert response.json() == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The API key is not valid.",
        "instance": "/v1/jobs",
    }


async def test_v2_errors_use_the_inference_shape(keyed_client: httpx.AsyncClient) -> None:
    missing = await keyed_client.post("/v2/models/m/infer", json={"inputs": []})
    wrong = await keyed_client.get("/v2/models/m", headers=bearer("wrong"))

    assert missing.status_code == wrong.status_code == 401
    assert set(missing.json()) == set(wrong.json()) == {"error"}
    assert missing.headers["content-type"] == "application/json"


async def test_scheme_is_case_insensitive(keyed_client: httpx.AsyncClient) -> None:
    response = await keyed_client.get(
        "/v1/models", headers={"Authorization": f"bearer {ADMIN_KEY}"}
    )

    assert response.status_code == 200


async def test_metrics_can_require_a_key(settings: Settings) -> None:
    settings = Settings.model_validate(
        settings.model_dump() | {"api_keys": f"{PREDICT_KEY}:predict", "metrics_require_key": True}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            assert (await http.get("/metrics")).status_code == 401
            assert (await http.get("/metrics", headers=bearer(PREDICT_KEY))).status_code == 200
            assert (await http.get("/v2/health/live")).status_code == 200


async def test_without_keys_the_api_is_open_and_says_so(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="service.security"):
        app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            assert (await http.get("/v1/models")).status_code == 200
            assert (await http.post("/v1/jobs", json={})).status_code == 422

    assert any(
        "COPPICE_API_KEYS" in record.getMessage() and record.levelno == logging.WARNING
        for record in caplog.records
    )


async def test_openapi_declares_the_bearer_scheme(keyed_client: httpx.AsyncClient) -> None:
    schema = (await keyed_client.get("/openapi.json")).json()

    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert schema["security"] == [{"apiKey": []}]
    assert schema["paths"]["/v2/health/live"]["get"]["security"] == []


async def test_keys_never_reach_logs_or_responses(
    keyed_app: FastAPI, keyed_client: httpx.AsyncClient
) -> None:
    """Every key, right or wrong, on every route: not one formatted log line holds one."""
    lines: list[str] = []
    formatter = JsonFormatter()

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(formatter.format(record))

    capture = Capture(level=logging.DEBUG)
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    wrong_key = "wrong-Pz9Xc7Vb5Nm3"
    try:
        responses = []
        for method, _, path in endpoints(keyed_app):
            for key in (*ALL_KEYS, wrong_key):
                responses.append(await keyed_client.request(method, path, headers=bearer(key)))
    finally:
        root.removeHandler(capture)
        root.setLevel(previous_level)

    assert any('"logger": "coppice.access"' in line for line in lines), "nothing was logged"
    output = "\n".join(lines)
    texts = [response.text + str(response.headers) for response in responses]
    for key in (*ALL_KEYS, wrong_key):
        assert key not in output
        assert not any(key in text for text in texts)
    # Access lines name the key that was used by its digest prefix, not by the key.
    assert '"key_name": "sha256:' in output
