"""``route_template``: the router's choice of route for a request, remembered per path."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI

from service.routing import _Templates, route_template


def _app() -> FastAPI:
    app = FastAPI()
    router = APIRouter(prefix="/v1")

    @router.get("/models/{model_id}")
    def model(model_id: str) -> dict[str, str]:
        return {}

    @router.post("/models/{model_id}/predict")
    def predict(model_id: str) -> dict[str, str]:
        return {}

    app.include_router(router)
    return app


def _scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def test_templates_as_the_router_picks_them() -> None:
    app = _app()
    assert route_template(app, _scope("GET", "/v1/models/a")) == "/v1/models/{model_id}"
    assert route_template(app, _scope("POST", "/v1/models/a/predict")) == (
        "/v1/models/{model_id}/predict"
    )
    # The path matches, the method does not: the router answers 405 from this route.
    assert route_template(app, _scope("GET", "/v1/models/a/predict")) == (
        "/v1/models/{model_id}/predict"
    )
    assert route_template(app, _scope("GET", "/v1/nowhere")) is None


def test_a_remembered_answer_is_the_same_and_a_new_route_is_seen() -> None:
    app = _app()
    for _ in range(3):
        assert route_template(app, _scope("GET", "/v1/models/a")) == "/v1/models/{model_id}"
    assert route_template(app, _scope("GET", "/v1/late")) is None

    @app.get("/v1/late")
    def late() -> dict[str, str]:
        return {}

    assert route_template(app, _scope("GET", "/v1/late")) == "/v1/late"


def test_the_remembered_paths_are_bounded() -> None:
    templates = _Templates(_app())
    for i in range(_Templates.REMEMBERED + 10):
        assert templates.of(_scope("GET", f"/v1/models/{i}")) == "/v1/models/{model_id}"
    assert len(templates._seen) == _Templates.REMEMBERED
