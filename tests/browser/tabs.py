"""A browser tab that records what a test may forbid: console errors, uncaught exceptions,
requests that leave the server's origin, and the bytes it downloaded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from playwright import sync_api


def same_origin(url: str, base_url: str) -> bool:
    """Whether ``url`` stays on the server: its origin, or a blob:/data: URL the page made."""
    if url.startswith(("data:", f"blob:{base_url}")):
        return True
    parts, base = urlsplit(url), urlsplit(base_url)
    return (parts.scheme, parts.netloc) == (base.scheme, base.netloc)


@dataclass
class Watched:
    """A page, and what it did that a test may forbid."""

    page: sync_api.Page
    base_url: str
    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    responses: list[sync_api.Response] = field(default_factory=list)

    def open(self, path: str) -> None:
        """Load ``path`` (e.g. ``/#/models``) and wait for the console's first page."""
        self.page.goto(self.base_url + path)
        self.page.wait_for_selector("html[data-ready]")

    def asset_bytes(self) -> int:
        """Bytes of every file the page downloaded but the API's answers (/v1, /v2, the
        OpenAPI document): what the page budget counts. Nothing is compressed, so a body's
        length is what crossed the wire."""
        total = 0
        for response in self.responses:
            path = urlsplit(response.url).path
            if path.startswith(("/v1/", "/v2/", "/openapi.json")) or response.status == 304:
                continue
            total += len(response.body())
        return total


def open_page(
    browser: sync_api.Browser, base_url: str, *, width: int = 1200, height: int = 900
) -> Watched:
    context = browser.new_context(
        viewport={"width": width, "height": height}, accept_downloads=True
    )
    page = context.new_page()
    watched = Watched(page, base_url)
    page.on("console", lambda m: watched.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: watched.errors.append(f"uncaught: {error}"))
    page.on("response", lambda response: watched.responses.append(response))
    page.on(
        "request",
        lambda r: None if same_origin(r.url, base_url) else watched.outside.append(r.url),
    )
    return watched


PAGE_BUDGET_BYTES = 300 * 1024


def check_pages(new_tab: Callable[[], Watched], paths: list[str]) -> dict[str, int]:
    """Load each page in a fresh context (an empty cache, so every file is counted), all at
    once (the browser waits out their quiet periods together); each must show no console
    error, request nothing off the origin and download under the page budget. Returns the
    bytes of files per page (printed too: shown with ``pytest -s``)."""
    opened = [(path, new_tab()) for path in paths]
    for path, tab in opened:
        tab.page.goto(tab.base_url + path, wait_until="commit")
    weights: dict[str, int] = {}
    for path, tab in opened:
        tab.page.wait_for_selector("html[data-ready]")
        tab.page.wait_for_load_state("networkidle")
        assert tab.errors == [], (path, tab.errors)
        assert tab.outside == [], (path, tab.outside)
        weights[path] = tab.asset_bytes()
        print(f"{path[:40]:42} {weights[path] / 1024:6.1f} KB of files")
        assert weights[path] < PAGE_BUDGET_BYTES, path
    return weights
