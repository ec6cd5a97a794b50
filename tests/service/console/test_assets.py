"""The console's files, read from the package: they load each other, stay small and stay
within the Content-Security-Policy, and the vendored viewers carry their licences."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

import service

STATIC = Path(service.__file__).parent / "console" / "static"
VENDOR = STATIC / "vendor"
ROOT = Path(service.__file__).parent.parent
OWN_FILES = sorted(
    path for path in STATIC.rglob("*") if path.is_file() and VENDOR not in path.parents
)
MODULES = [path for path in OWN_FILES if path.suffix == ".js"]
_IMPORT = re.compile(r"""(?:from\s+|import\s*\(\s*|import\s+)["'](\.[^"']+)["']""")
# The SVG namespace is a name, never fetched.
_NAMESPACES = {"http://www.w3.org/2000/svg"}
PAGE_BUDGET_BYTES = 300 * 1024


def test_every_module_import_resolves_to_a_file_of_the_package() -> None:
    assert len(MODULES) >= 10
    for module in MODULES:
        for target in _IMPORT.findall(module.read_text()):
            assert (module.parent / target).resolve().is_file(), f"{module.name}: {target}"


def test_every_page_module_of_the_router_exists() -> None:
    main = (STATIC / "js" / "main.js").read_text()
    views = re.findall(r'"(\./views/[a-z-]+\.js)"', main)
    assert len(views) >= 7
    for view in views:
        assert (STATIC / "js" / view).is_file(), view


def test_registry_and_searches_pages_are_routed() -> None:
    main = (STATIC / "js" / "main.js").read_text()
    routes = dict(re.findall(r'\[/\^(\S+)\$/, "\./views/([a-z-]+)\.js"', main))
    for route, view in {
        r"\/registered-models": "registered-models",
        r"\/registered-models\/([^/]+)": "registered-model",
        r"\/searches": "searches",
        r"\/searches\/new": "search-new",
        r"\/searches\/([^/]+)": "search",
    }.items():
        assert routes.get(route) == view, route
    # "new" is a page of its own, not a search id: its route comes first.
    assert main.index('"./views/search-new.js"') < main.index('"./views/search.js"')
    # The model page offers "Register as…".
    assert '"./registry.js"' in (STATIC / "js" / "views" / "model.js").read_text()


@pytest.mark.parametrize("path", OWN_FILES, ids=lambda p: str(p.relative_to(STATIC)))
def test_no_file_names_another_origin(path: Path) -> None:
    if path.suffix not in {".js", ".css", ".html", ".svg"}:
        return
    urls = set(re.findall(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s"')]*""", path.read_text()))
    assert urls <= _NAMESPACES, urls


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(STATIC)))
def test_scripts_keep_to_the_policy_and_the_house_size(path: Path) -> None:
    code = path.read_text()
    # Refused by the CSP (no 'unsafe-eval', no inline styles), or HTML from strings.
    for banned in ("eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML"):
        assert banned not in code, banned
    assert 'setAttribute("style"' not in code and "style:" not in code
    assert len(code.splitlines()) <= 400


def test_the_console_weighs_less_than_a_page_budget_all_together() -> None:
    # Stronger than the per-page measurement of tests/browser: every page of the console
    # together, uncompressed, fits in one page's budget.
    total = sum(path.stat().st_size for path in OWN_FILES if "docs" not in path.parts)
    assert total < PAGE_BUDGET_BYTES, total


def test_vendored_viewers_carry_their_licences_and_checksums() -> None:
    readme = (VENDOR / "README.md").read_text()
    for folder in (VENDOR / "swagger-ui", VENDOR / "redoc"):
        assert (folder / "LICENSE").is_file(), folder
    sums = dict(
        (name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)
    )
    assert set(sums) == {
        "swagger-ui/swagger-ui-bundle.js",
        "swagger-ui/swagger-ui.css",
        "redoc/redoc.standalone.js",
    }
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name


def test_every_static_file_ships_in_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service"]
    package = Path(service.__file__).parent
    shipped = {path for pattern in patterns for path in package.glob(pattern) if path.is_file()}
    missing = [path for path in STATIC.rglob("*") if path.is_file() and path not in shipped]
    assert not missing, missing
