"""Browser fixtures: Debian's Chromium, driven by Playwright, against a real ``coppice serve``.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (Debian's
package, which ``make test`` installs; ``COPPICE_CHROMIUM`` names another). Without it the
tests skip, unless ``COPPICE_REQUIRE_BROWSER=1`` (as in CI) makes that a failure.

Every test gets a fresh browser context (so a fresh sessionStorage: a new tab) whose page
records console errors, uncaught exceptions and every request that leaves the server's
origin. A failed test leaves a full-page screenshot in ``tests/browser/failures/``; with
``COPPICE_BROWSER_SCREENSHOTS=all`` every test does, in ``tests/browser/screenshots/`` (to look at
the pages after a console change).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from tests.browser.tabs import Watched, open_page

CHROMIUM = Path(os.environ.get("COPPICE_CHROMIUM", "/usr/bin/chromium"))
FAILURES = Path(__file__).parent / "failures"
SCREENSHOTS = Path(__file__).parent / "screenshots"
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    ours = [item for item in items if here in item.path.parents]
    if CHROMIUM.exists() or not ours:
        return
    reason = f"no Chromium at {CHROMIUM} (make test installs Debian's chromium)"
    if os.environ.get("COPPICE_REQUIRE_BROWSER") == "1":
        raise pytest.UsageError(reason)
    for item in ours:
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # Keep each phase's report on the test, so the page fixture knows whether it failed.
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    # One Playwright per module: its sync API holds an event loop, which must not outlive
    # the module into the suite's asyncio tests.
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


def save_screenshot(request: pytest.FixtureRequest, watched: Watched, index: int) -> None:
    """A full-page screenshot of a failed test's tab, or of every tab when asked for."""
    reports = request.node.stash.get(_REPORTS, {})
    if any(report.failed for report in reports.values()):
        folder = FAILURES
    elif os.environ.get("COPPICE_BROWSER_SCREENSHOTS") == "all":
        folder = SCREENSHOTS
    else:
        return
    folder.mkdir(exist_ok=True)
    suffix = f"-{index}" if index else ""
    watched.page.screenshot(path=folder / f"{request.node.name}{suffix}.png", full_page=True)


@pytest.fixture
def tabs(
    browser: sync_api.Browser, base_url: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Watched]]:
    """Opens tabs on the module's server (``base_url``, each module's own fixture), each a
    fresh context; all are screenshotted if the test failed, then closed."""
    opened: list[Watched] = []

    def new_tab(**size: int) -> Watched:
        opened.append(open_page(browser, base_url, **size))
        return opened[-1]

    yield new_tab
    for index, watched in enumerate(opened):
        save_screenshot(request, watched, index)
        watched.page.context.close()


@pytest.fixture
def tab(tabs: Callable[..., Watched]) -> Watched:
    return tabs()
