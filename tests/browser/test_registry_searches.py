"""The registry's and searches' pages in a real browser against one real ``coppice serve``:
start a small grid search from its form (a ``422`` beside the candidates first), watch its
leaderboard fill and open a model from it; register that model from its page, move
``production`` to it and see the moves in the history; then every such page clean, within
budget and at phone width. The search's models are the only models trained."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.data import write_csv
from tests.browser.tabs import Watched, check_pages
from tests.e2e.processes import serving

pytestmark = pytest.mark.slow

NAME = "churn"
# A grid of two small forests: each candidate is 2 folds and a final fit of a few trees.
GRID = [{"method": "random_forest", "params": {"n_estimators": 6, "max_depth": [3, 5]}}]
BAD_GRID = [{"method": "random_forest", "params": {"n_estimators": 6, "max_depth": [3, -5]}}]
EXPECTED_422 = "the server responded with a status of 422"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("registry")) as (url, _):
        yield url


@pytest.fixture(scope="module")
def dataset(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data: Path = write_csv(tmp_path_factory.mktemp("data") / "toy.csv")
    with httpx.Client(base_url=base_url, timeout=30) as client:
        response = client.post("/v1/datasets", files={"file": (data.name, data.read_bytes())})
        assert response.status_code == 201, response.text
        return dict(response.json())


def searched_model(base_url: str, dataset: dict[str, Any]) -> str:
    """The best model of the search the search test started (the tests run in file order), or
    of one started here when that test did not run: a search's models are ordinary models."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        ended = [s for s in client.get("/v1/searches").json()["items"] if s["best_model_id"]]
        if ended:
            return str(ended[0]["best_model_id"])
        body = {
            "dataset_id": dataset["id"],
            "target": "label",
            "strategy": "grid",
            "candidates": GRID,
            "validation": {"folds": 2},
            "seed": 0,
        }
        search = client.post("/v1/searches", json=body).json()
        deadline = time.monotonic() + 240  # 60 s missed at load 15
        while search["status"] not in ("succeeded", "failed", "cancelled"):
            assert time.monotonic() < deadline, search
            time.sleep(0.5)
            search = client.get(f"/v1/searches/{search['id']}").json()
        assert search["best_model_id"], search
        return str(search["best_model_id"])


def test_a_search_fills_its_leaderboard_and_links_to_models(
    tab: Watched, dataset: dict[str, Any]
) -> None:
    page = tab.page
    tab.open("/#/searches")
    page.click("#search-new")
    page.wait_for_selector("#search-form")
    expect(page.locator("#search-dataset")).to_have_value(dataset["id"])
    page.select_option("#search-target", "label")
    expect(page.locator("#search-metric")).to_contain_text("roc_auc")
    page.select_option("#search-strategy", "grid")
    page.fill("#search-folds", "2")
    page.fill("#search-seed", "0")
    page.fill("#search-candidates", "[{")
    page.click("#search-submit")
    expect(page.locator("#search-candidates-error")).to_contain_text("Not JSON")
    page.fill("#search-candidates", json.dumps(BAD_GRID))
    page.click("#search-submit")
    # The server's 422 names the candidate and the parameter, beside the field.
    expect(page.locator("#search-candidates-error")).to_contain_text("max_depth")

    page.fill("#search-candidates", json.dumps(GRID))
    page.click("#search-submit")
    page.wait_for_selector("#leaderboard")
    expect(page.locator("#search-status")).to_have_text("succeeded", timeout=180_000)
    expect(page.locator("#search-percent")).to_have_text("100%")
    board = page.locator("#leaderboard tbody tr")
    expect(board).to_have_count(2)
    first = board.first.locator("td")
    assert first.nth(0).inner_text() == "#1"
    assert first.nth(1).inner_text() == "random_forest"
    assert re.fullmatch(r"0\.\d+ ± 0\.\d+", first.nth(3).inner_text())  # roc_auc
    expect(page.locator("#leaderboard thead")).to_contain_text("roc_auc")
    page.click("#leaderboard tbody tr:first-child a.rank")
    page.wait_for_selector("#metrics")
    assert tab.errors and all(EXPECTED_422 in e for e in tab.errors)
    assert tab.outside == []


def test_register_a_model_and_move_production_to_it(tab: Watched, dataset: dict[str, Any]) -> None:
    model_id = searched_model(tab.base_url, dataset)
    page = tab.page
    tab.open(f"/#/models/{model_id}")
    page.fill("#register-name", NAME)  # a new name: the page creates it first
    page.click("#register-submit")
    page.click("#register-done a")
    expect(page.locator("main h1")).to_have_text(NAME)
    expect(page.locator("#versions tbody tr")).to_have_count(1)
    expect(page.locator("#history")).to_contain_text("No alias has moved yet")

    # The same model again as version 2, from the name's page, then production: new → v1 → v2.
    # (Chosen by id: the form offers the newest models, and the search made several.)
    page.select_option("#version-model", model_id)
    page.click("#version-submit")
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    page.fill("#alias-name", "production")
    page.select_option("#alias-version", "1")
    page.click("#alias-submit")
    expect(page.locator("#registry-message")).to_contain_text("production now names v1")
    page.select_option("#alias-version", "2")
    page.click("#alias-submit")
    expect(page.locator("#registry-message")).to_contain_text("production moved from v1 to v2")
    rows = page.locator("#history tbody tr")
    expect(rows).to_have_count(2)
    newest = rows.first.locator("td")
    assert [newest.nth(i).inner_text() for i in (1, 2, 3)] == ["production", "v1", "v2"]
    expect(page.locator("#aliases")).to_contain_text("production")

    # Through the API, the alias names the model.
    with httpx.Client(base_url=tab.base_url) as client:
        assert client.get(f"/v1/models/{NAME}@production").json()["id"] == model_id
    # Deleting the alias is kept in the history too.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete alias production").click()
    expect(page.locator("#history tbody tr")).to_have_count(3)
    expect(rows.first).to_contain_text("deleted")
    assert tab.errors == [] and tab.outside == []


def test_registry_and_search_pages_load_clean_within_budget_and_fit_a_phone(
    tabs: Callable[..., Watched], base_url: str, dataset: dict[str, Any]
) -> None:
    model_id = searched_model(base_url, dataset)
    with httpx.Client(base_url=base_url) as client:
        if client.get(f"/v1/registered-models/{NAME}").status_code == 404:
            client.post("/v1/registered-models", json={"name": NAME})
            client.post(f"/v1/registered-models/{NAME}/versions", json={"model_id": model_id})
        search_id = client.get("/v1/searches").json()["items"][0]["id"]
    paths = [
        "/#/registered-models",
        f"/#/registered-models/{NAME}",
        "/#/searches",
        "/#/searches/new",
    ]
    paths.append(f"/#/searches/{search_id}")
    check_pages(tabs, paths)
    phone = tabs(width=390, height=844)
    for path in paths[1::3]:  # the name's page and the search's: the widest tables
        phone.open(path)
        phone.page.wait_for_load_state("networkidle")
        overflow = phone.page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, (path, overflow)
