"""The HTML of the console's entry page and of the API documentation pages.

The entry page is a file of the package with one setting filled in: whether the server wants
API keys, so the console asks for one before its first call instead of learning it from a
401. The documentation pages replace FastAPI's, which load Swagger UI and ReDoc from a CDN and
start them with inline scripts; these load the vendored copies and start them from files.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from html import escape
from importlib.resources import files

ASSETS = "/console"
_KEYS_MARK = "__COPPICE_KEYS__"


@cache
def _index_template() -> str:
    return files("service.console").joinpath("static/index.html").read_text(encoding="utf-8")


def index_html(*, keys_required: bool) -> str:
    return _index_template().replace(_KEYS_MARK, "required" if keys_required else "off")


@dataclass(frozen=True)
class Viewer:
    """One documentation viewer: its name in the title, its files, the element it fills."""

    name: str
    styles: tuple[str, ...]
    scripts: tuple[str, ...]
    mount_id: str


SWAGGER_UI = Viewer(
    "Swagger UI",
    styles=(f"{ASSETS}/vendor/swagger-ui/swagger-ui.css",),
    scripts=(f"{ASSETS}/vendor/swagger-ui/swagger-ui-bundle.js", f"{ASSETS}/docs/swagger.js"),
    mount_id="swagger-ui",
)
REDOC = Viewer(
    "ReDoc",
    styles=(f"{ASSETS}/docs/redoc.css",),
    scripts=(f"{ASSETS}/vendor/redoc/redoc.standalone.js", f"{ASSETS}/docs/redoc.js"),
    mount_id="redoc",
)


def docs_html(viewer: Viewer, *, title: str, openapi_url: str) -> str:
    """The page of ``viewer`` for the API described at ``openapi_url``."""
    links = "".join(f'<link rel="stylesheet" href="{escape(href)}">' for href in viewer.styles)
    tags = "".join(f'<script src="{escape(src)}" defer></script>' for src in viewer.scripts)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} – {viewer.name}</title>"
        # Browsers ask for /favicon.ico unless told otherwise: the request would leave the
        # page's assets (and FastAPI's default favicon comes from another site).
        f'<link rel="icon" href="{ASSETS}/favicon.svg" type="image/svg+xml">{links}{tags}'
        f'</head><body><div id="{viewer.mount_id}" data-openapi-url="{escape(openapi_url)}">'
        "</div></body></html>"
    )
