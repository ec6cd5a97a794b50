"""Routes of the console and the documentation pages; every one is open (see OPEN_PATHS).

The pages hold no data: the console's scripts call ``/v1`` with the key the person entered,
and the key check guards those calls as it guards any client's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from service.config import Settings
from service.console import pages
from service.console.policy import ASSET_HEADERS, CONSOLE_CSP, DOCS_CSP, page_headers

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
# Route templates the key check lets through: the pages and the mount of their files.
OPEN_PATHS = frozenset({"/", DOCS_PATH, REDOC_PATH, pages.ASSETS})


class _Assets(StaticFiles):
    """The package's static files, each with the console's asset headers."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(ASSET_HEADERS)
        return response


def _static_page(html: str, policy: Mapping[str, str]) -> Callable[[], HTMLResponse]:
    """An endpoint answering ``html``, rendered once: a page's settings never change while
    the app runs."""
    headers = page_headers(policy)

    def page() -> HTMLResponse:
        return HTMLResponse(html, headers=headers)

    return page


def install_console(app: FastAPI, settings: Settings) -> None:
    """Serve the console at ``/``, its files under ``/console``, and ``/docs`` and ``/redoc``.

    ``app`` must be created with ``docs_url=None, redoc_url=None``: these replace FastAPI's.
    """
    router = APIRouter(include_in_schema=False)
    keys_required = bool(settings.api_keys)
    openapi_url = app.openapi_url or "/openapi.json"

    index = pages.index_html(keys_required=keys_required)
    router.add_api_route("/", _static_page(index, CONSOLE_CSP), response_class=HTMLResponse)

    for path, viewer in ((DOCS_PATH, pages.SWAGGER_UI), (REDOC_PATH, pages.REDOC)):
        html = pages.docs_html(viewer, title=app.title, openapi_url=openapi_url)
        router.add_api_route(path, _static_page(html, DOCS_CSP), response_class=HTMLResponse)

    app.include_router(router)
    app.mount(pages.ASSETS, _Assets(packages=[("service.console", "static")]), name="console")
