"""The console on a server with API keys: it asks for one, keeps it for the tab only, sends it
with every call, and shows a predict key no admin action."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Request, expect

from tests.browser.data import train, write_csv
from tests.browser.tabs import Watched
from tests.e2e.processes import serving

pytestmark = pytest.mark.slow

ADMIN_KEY = "console-admin-Qw3rTy7uIo9pAs1d"
PREDICT_KEY = "console-predict-Zx8cVb4nMm2kLj6h"
# Signing in tells a key's role from the API's own answers: 401 for a wrong key, 403 (predict)
# or 404 (admin) for an admin-only call that changes nothing. Browsers log those as failed loads.
EXPECTED_REFUSALS = re.compile(r"status of (401|403|404)")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    keys = f"{ADMIN_KEY}:admin,{PREDICT_KEY}:predict"
    with serving(tmp_path_factory.mktemp("keyed"), api_keys=keys) as (url, _):
        yield url


@pytest.fixture(scope="module")
def model(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = write_csv(tmp_path_factory.mktemp("data") / "keyed.csv", n_rows=80)
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as client:
        return train(client, data, "label", exclude="amount")


def sign_in(tab: Watched, key: str, path: str = "/") -> None:
    tab.page.goto(tab.base_url + path)
    tab.page.fill("#api-key", key)
    tab.page.click("form button[type=submit]")


def unexpected(errors: list[str]) -> list[str]:
    return [error for error in errors if not EXPECTED_REFUSALS.search(error)]


def test_the_console_asks_for_a_key_and_keeps_it_for_this_tab_only(
    tabs: Callable[..., Watched],
) -> None:
    tab = tabs()
    sent: list[Request] = []
    tab.page.on("request", lambda r: sent.append(r) if "/v1/" in r.url else None)

    sign_in(tab, "not-a-key")
    expect(tab.page.locator(".error")).to_contain_text("not valid")
    tab.page.fill("#api-key", ADMIN_KEY)
    tab.page.click("form button[type=submit]")
    tab.page.wait_for_selector("#upload-file")
    expect(tab.page.locator("#who")).to_contain_text("admin key")
    assert tab.page.locator("#nav a[data-section=train]").is_visible()

    tab.page.reload()  # the same tab: still signed in
    tab.page.wait_for_selector("#upload-file")
    loaded = [r for r in sent if "cancel" not in r.url and "limit=1" not in r.url]
    assert loaded and all(
        r.headers.get("authorization") == f"Bearer {ADMIN_KEY}" for r in loaded
    ), [r.url for r in loaded]
    stored = tab.page.evaluate("[sessionStorage.length, localStorage.length]")
    assert stored == [2, 0]  # the key and its role, in this tab's storage only

    other = tabs()  # a new tab: no key
    other.page.goto(other.base_url + "/#/models")
    other.page.wait_for_selector("#api-key")
    assert unexpected(tab.errors) == [] and tab.outside == []


def test_a_predict_key_reads_and_predicts_but_sees_no_admin_action(
    tab: Watched, model: dict[str, Any]
) -> None:
    sign_in(tab, PREDICT_KEY, f"/#/models/{model['id']}")
    page = tab.page
    page.wait_for_selector("#predict-form")
    expect(page.locator("#who")).to_contain_text("predict key")
    assert page.get_by_role("button", name="Delete").count() == 0
    assert page.locator("#register-form").count() == 0  # "Register as…"
    assert page.locator("#nav a[data-section=train]").is_hidden()
    page.fill("[data-feature=x1]", "2")
    page.click("#predict-submit")
    expect(page.locator("#predict-value")).to_have_text(re.compile("^(yes|no)$"))

    pages = ("/#/datasets", f"/#/datasets/{model['dataset_id']}", f"/#/jobs/{model['job_id']}")
    for path in (*pages, "/#/registered-models", "/#/searches"):
        page.goto(tab.base_url + path)
        page.wait_for_selector("main h1")
        page.wait_for_load_state("networkidle")
        assert page.locator("#upload-file").count() == 0, path
        assert page.get_by_role("button", name=re.compile("Delete|Cancel")).count() == 0, path
        assert page.get_by_role("link", name="Train a model on it").count() == 0, path
        assert page.locator("#rm-form, #search-new").count() == 0, path
    for path in ("/#/train", "/#/searches/new"):
        page.goto(tab.base_url + path)
        expect(page.locator("main .error")).to_contain_text("admin key")
    assert unexpected(tab.errors) == [] and tab.outside == []
