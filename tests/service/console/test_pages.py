"""The console's pages through the real ASGI app: what they are, their headers, who may load them."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings

pytestmark = pytest.mark.anyio

PAGES = ("/", "/docs", "/redoc")
# Every URL a page names (src, href) but the console's own #/ links: all must be paths on
# the server's own origin.
_URLS = re.compile(r"""(?:src|href)="([^"#][^"]*)\"""")


def directives(response: httpx.Response) -> dict[str, str]:
    policy = response.headers["content-security-policy"]
    pairs = (part.strip().split(" ", 1) for part in policy.split(";"))
    return {name: value for name, value in pairs}


async def test_the_console_is_served_at_the_root(client: httpx.AsyncClient) -> None:
    response = await client.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/js/main.js">' in response.text
    assert 'data-keys="off"' in response.text


async def test_the_console_policy_allows_no_inline_code_and_no_other_origin(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/")
    policy = directives(response)

    assert policy["default-src"] == "'none'"
    for name in ("script-src", "style-src", "connect-src"):
        assert policy[name] == "'self'", name
    assert "unsafe" not in response.headers["content-security-policy"]
    assert policy["frame-ancestors"] == "'none'"
    assert response.headers["x-content-type-options"] == "nosniff"
    # Nothing inline for the policy to refuse: no <script> body, no <style>, no style="".
    assert not re.search(r"<script[^>]*>[^<]", response.text)
    assert "<style" not in response.text and "style=" not in response.text


@pytest.mark.parametrize("path", PAGES)
async def test_pages_name_only_their_own_origin(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)

    assert response.status_code == 200
    urls = _URLS.findall(response.text)
    assert urls, "every page loads scripts or styles of its own"
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        assert (await client.get(url)).status_code == 200, url
    assert 'rel="icon"' in response.text, "else the browser asks for /favicon.ico"


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_api_docs_run_without_inline_scripts(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    policy = directives(response)

    assert policy["script-src"] == "'self'"
    assert 'data-openapi-url="/openapi.json"' in response.text
    assert not re.search(r"<script[^>]*>[^<]", response.text)
    assert "cdn" not in response.text.lower() and "googleapis" not in response.text


async def test_console_routes_are_not_part_of_the_api_schema(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]

    assert not [path for path in paths if not path.startswith(("/v1", "/v2", "/metrics"))]


async def test_with_keys_the_pages_load_without_one_and_the_api_still_needs_it(
    settings: Settings,
) -> None:
    keyed = Settings.model_validate(settings.model_dump() | {"api_keys": "secret-key-1:admin"})
    app: FastAPI = create_app(keyed)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            page = await http.get("/")
            assert page.status_code == 200
            assert 'data-keys="required"' in page.text
            for path in ("/console/js/main.js", "/console/console.css", "/docs", "/redoc"):
                assert (await http.get(path)).status_code == 200, path
            assert (await http.get("/v1/datasets")).status_code == 401
            # The page holds no key and no data: nothing of the keyring reaches it.
            assert "secret-key-1" not in page.text


async def test_the_navigation_names_every_section_and_its_modules_are_served(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/")).text
    for section in ("datasets", "jobs", "models", "registered-models", "searches"):
        assert f'href="#/{section}"' in page, section
    views = (
        "registered-models",
        "registered-model",
        "registry",
        "searches",
        "search",
        "search-new",
    )
    for view in views:
        response = await client.get(f"/console/js/views/{view}.js")
        assert response.status_code == 200, view
        assert "javascript" in response.headers["content-type"], view


async def test_unknown_console_files_are_404s(client: httpx.AsyncClient) -> None:
    assert (await client.get("/console/js/no-such-module.js")).status_code == 404
    assert (await client.get("/console/../service/app.py")).status_code == 404
