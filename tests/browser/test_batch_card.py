"""The model page's batch card, in a real browser against a real ``coppice serve``: a person
picks a stored dataset, starts a batch prediction, watches it end, and follows the link to the
output dataset; the batch is the API's, with the options asked for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.tabs import Watched
from tests.browser.test_model_plots import FEATURES, rows
from tests.e2e.processes import serving, submit_job, wait_for_jobs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("batch-card")) as (url, _):
        yield url


@pytest.fixture(scope="module")
def setup(base_url: str) -> dict[str, Any]:
    url = base_url
    with httpx.Client(base_url=url, timeout=60) as client:
        body = {"columns": [*FEATURES, "label", "grade", "amount"], "rows": rows(300)}
        dataset = client.post("/v1/datasets", json={"name": "to score", **body})
        assert dataset.status_code == 201, dataset.text
        job = submit_job(client, dataset_id=dataset.json()["id"], target="label",
                         features=FEATURES, method="random_forest", params={"n_estimators": 5})  # fmt: skip
        ended = wait_for_jobs(client, [job], timeout=240)
        assert ended[job]["status"] == "succeeded", ended
        return {"url": url, "model_id": ended[job]["model_id"], "dataset": dataset.json()}


def test_start_a_batch_and_open_its_output(tab: Watched, setup: dict[str, Any]) -> None:
    tab.open(f"/#/models/{setup['model_id']}")
    expect(tab.page.locator("#batch-jobs-none")).to_be_visible()
    tab.page.select_option("#batch-dataset", setup["dataset"]["id"])
    tab.page.fill("#batch-keep", "amount")
    tab.page.click("#batch-jobs-submit")

    item = tab.page.locator("#batch-jobs .batch-item").first
    expect(item.locator(".batch-output")).to_be_visible(timeout=120_000)
    expect(item.locator(".batch-status")).to_contain_text("succeeded")
    expect(item.locator(".batch-output")).to_contain_text("accuracy")
    with httpx.Client(base_url=setup["url"]) as client:
        [batch] = client.get(
            "/v1/batch-predictions", params={"model_id": setup["model_id"]}
        ).json()["items"]
    assert batch["keep_columns"] == ["amount"] and batch["return_proba"] is True
    item.locator(".batch-output").click()
    expect(tab.page.locator("h1")).to_contain_text(setup["dataset"]["name"])
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []
