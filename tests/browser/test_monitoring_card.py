"""The model page's monitoring card, in a real browser against a real ``coppice serve``: a
classifier whose live rows moved (x1 shifted, an unseen colour, more missing x2) shows the drift
badge the report's worst reading gives, a PSI bar per feature and one for the prediction
coloured by its reading, the unseen value, and its accuracy over time once feedback came;
a model never predicted says so."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.tabs import Watched
from tests.browser.test_model_plots import FEATURES, rows
from tests.e2e.processes import serving, submit_job, wait_for_jobs

pytestmark = pytest.mark.slow

ORDER = ["none", "moderate", "major"]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("monitoring")) as (url, _):
        yield url


@pytest.fixture(scope="module")
def models(base_url: str) -> dict[str, dict[str, Any]]:
    """Two forests on ``label``: one asked about 300 shifted rows with feedback on 100 of
    them, one never asked."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        body = {"columns": [*FEATURES, "label", "grade", "amount"], "rows": rows(600)}
        dataset = client.post("/v1/datasets", json=body)
        assert dataset.status_code == 201, dataset.text
        jobs = [
            submit_job(client, dataset_id=dataset.json()["id"], target="label", features=FEATURES,
                       method="random_forest", params={"n_estimators": 8, "max_depth": 6},
                       validation={"holdout": 0.2}, seed=seed)
            for seed in (0, 1)
        ]  # fmt: skip
        ended = wait_for_jobs(client, jobs, timeout=240)
        ids = [ended[job]["model_id"] for job in jobs]
        assert all(ended[job]["status"] == "succeeded" for job in jobs), ended
        rng = random.Random(1)
        live = [
            {"x1": rng.uniform(5, 15), "x2": None if i % 3 == 0 else rng.gauss(0, 1),
             "colour": "purple" if i % 10 == 0 else rng.choice(["red", "green", "blue"])}
            for i in range(300)
        ]  # fmt: skip
        answer = client.post(f"/v1/models/{ids[0]}/predict", json={"records": live})
        assert answer.status_code == 200, answer.text
        row_ids = answer.json()["ids"][:100]
        actuals = [rng.choice(["yes", "no"]) for _ in row_ids]
        feedback = client.post(
            f"/v1/models/{ids[0]}/feedback", json={"ids": row_ids, "actuals": actuals}
        )
        assert feedback.status_code == 202 and feedback.json()["matched"] == 100, feedback.text
        report = client.get(f"/v1/models/{ids[0]}/monitoring").json()
        assert report["n_predictions"] == 300, report
        return {"predicted": report, "idle": {"model_id": ids[1]}}


def test_the_card_shows_drift_psi_bars_and_performance(
    tab: Watched, models: dict[str, Any]
) -> None:
    report = models["predicted"]
    tab.open(f"/#/models/{report['model_id']}")
    card = tab.page.locator("#monitoring")
    tab.page.wait_for_selector("#monitoring #psi-chart svg .bar-row")

    readings = [f["drift"] for f in report["features"]] + [report["prediction"]["drift"]]
    worst = max(readings, key=ORDER.index)
    expected = "no drift" if worst == "none" else f"{worst} drift"
    expect(tab.page.locator("#drift-badge")).to_have_text(expected)
    assert worst == "major"  # x1 moved far out of its training range
    expect(tab.page.locator("#drift-badge")).to_have_class("drift major")
    # A bar per feature and one for the predictions, each coloured by its reading.
    bars = tab.page.locator("#psi-chart svg .bar-row")
    expect(bars).to_have_count(len(FEATURES) + 1)
    x1 = next(f for f in report["features"] if f["name"] == "x1")
    expect(tab.page.locator(f"#psi-chart svg rect.drift-{x1['drift']}").first).to_be_visible()
    # The predictions first, then the features that moved most first.
    titles = tab.page.locator("#psi-chart svg title").evaluate_all(
        "titles => titles.map(t => t.textContent)"
    )
    ranked = sorted(report["features"], key=lambda f: -f["psi"])
    assert [t.split(":")[0] for t in titles] == ["(prediction)", *[f["name"] for f in ranked]]
    expect(card.locator("#monitoring-changes")).to_contain_text("purple (30)")
    expect(card.locator("#monitoring-summary")).to_contain_text("300 predictions logged")
    expect(card.locator("#monitoring-summary")).to_contain_text("100 with feedback, accuracy")
    # Accuracy over time, and the predictions' PSI over time.
    expect(card.locator("#monitoring-timeline svg path.line")).to_have_count(2)
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []


def test_a_model_never_predicted_says_so(tab: Watched, models: dict[str, Any]) -> None:
    tab.open(f"/#/models/{models['idle']['model_id']}")
    expect(tab.page.locator("#monitoring")).to_contain_text(
        "No logged row in this window to compare with training."
    )
    expect(tab.page.locator("#drift-badge")).to_have_text("no reading")
    expect(tab.page.locator("#no-feedback")).to_be_visible()
    # No point to draw: a sentence, not bare axes that would read as "no drift".
    expect(tab.page.locator("#no-prediction-psi")).to_be_visible()
    expect(tab.page.locator("#monitoring-timeline svg path.line")).to_have_count(0)
    tab.page.select_option("#monitoring-window", "7 days")
    expect(tab.page.locator("#monitoring-summary")).to_contain_text("0 predictions logged")
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []
