"""The security headers of every page and file the console serves.

The console's own pages get a strict Content-Security-Policy: scripts and styles only from
files of this origin (no inline code, no ``eval``), requests only to this origin. Swagger UI
and ReDoc set inline styles from their bundles (ReDoc through styled-components), so the
documentation pages allow inline styles, and nothing else more.
"""

from __future__ import annotations

from collections.abc import Mapping

_COMMON = {
    "default-src": "'none'",
    "script-src": "'self'",
    "connect-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "base-uri": "'none'",
    "form-action": "'none'",
    "frame-ancestors": "'none'",
}

CONSOLE_CSP = _COMMON | {"style-src": "'self'"}
# ReDoc runs its search index in a worker it starts from a blob: URL.
DOCS_CSP = _COMMON | {"style-src": "'self' 'unsafe-inline'", "worker-src": "'self' blob:"}


def render_policy(directives: Mapping[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def page_headers(directives: Mapping[str, str]) -> dict[str, str]:
    """Headers of an HTML page: its policy, and no caching of a page that embeds settings."""
    return {
        "Content-Security-Policy": render_policy(directives),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }


# Static files revalidate on every load (their ETag makes that a 304), so an upgraded package
# never runs a stale module beside fresh ones.
ASSET_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
