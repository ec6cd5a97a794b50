"""The model page's plots of the training holdout, in a real browser against a real
``coppice serve``: a binary and a three-class classifier's ROC curves and a regressor's
residuals, drawn from ``GET /v1/models/{id}/diagnostics`` with no file uploaded, and the
importance selector holding the kinds ``GET /v1/models/{id}`` lists, and only those; a model
trained on folds says why it has no curve; the pages at phone width."""

from __future__ import annotations

import random
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.tabs import Watched
from tests.e2e.processes import serving, submit_job, wait_for_jobs

pytestmark = pytest.mark.slow

N_ROWS = 1500
FOREST = {"n_estimators": 8, "max_depth": 6}
FEATURES = ["x1", "x2", "colour"]


def rows(n: int = N_ROWS, seed: int = 0) -> list[list[Any]]:
    """x1, x2 (numeric, some missing), colour; targets label (yes/no), grade (a/b/c), amount."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x1 = rng.uniform(0, 10)
        x2 = None if i % 17 == 0 else rng.gauss(0, 1)
        colour = rng.choice(["red", "green", "blue"])
        score = x1 + (2 if colour == "red" else 0) + rng.gauss(0, 1.5)
        label = "yes" if score > 6 else "no"
        grade = "a" if score < 4 else ("b" if score < 8 else "c")
        amount = 3 * x1 + (2 if colour == "red" else 0) + rng.gauss(0, 2)
        out.append([x1, x2, colour, label, grade, amount])
    return out


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("plots")) as (url, _):
        yield url


@pytest.fixture(scope="module")
def models(base_url: str) -> dict[str, dict[str, Any]]:
    """Four forests trained through the API: label, grade, amount (half the rows held out:
    750 validation rows, more than the 500 residuals kept) and label on three folds."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        body = {"columns": [*FEATURES, "label", "grade", "amount"], "rows": rows()}
        dataset = client.post("/v1/datasets", json=body)
        assert dataset.status_code == 201, dataset.text
        jobs = {
            name: submit_job(
                client,
                dataset_id=dataset.json()["id"],
                target=target,
                features=FEATURES,
                method="random_forest",
                params=FOREST,
                validation=validation,
                seed=0,
            )
            for name, target, validation in [
                ("binary", "label", {"holdout": 0.2}),
                ("multiclass", "grade", {"holdout": 0.2}),
                ("regressor", "amount", {"holdout": 0.5}),
                ("folds", "label", {"folds": 3}),
            ]
        }
        ended = wait_for_jobs(client, jobs.values(), timeout=240)  # 120 s missed at load 15
        out = {}
        for name, job_id in jobs.items():
            assert ended[job_id]["status"] == "succeeded", ended[job_id]
            out[name] = client.get(f"/v1/models/{ended[job_id]['model_id']}").json()
            out[name]["diagnostics"] = client.get(
                f"/v1/models/{out[name]['id']}/diagnostics"
            ).json()
        return out


def options(tab: Watched) -> list[str]:
    values = tab.page.locator("#importance-kind option").evaluate_all(
        "options => options.map(o => o.value)"
    )
    return [str(value) for value in values]


def points(path_data: str) -> int:
    return len(re.findall(r"[ML]", path_data))


def open_model(tab: Watched, model: dict[str, Any]) -> None:
    tab.open(f"/#/models/{model['id']}")
    tab.page.wait_for_selector("#importance-chart svg .bar-row")


def test_a_binary_classifier_draws_its_validation_roc_curve(
    tab: Watched, models: dict[str, Any]
) -> None:
    model = models["binary"]
    open_model(tab, model)

    curve = tab.page.locator("#roc svg path.line")
    expect(curve).to_have_count(1)
    kept = model["diagnostics"]["roc"]["yes"]
    assert points(curve.get_attribute("d") or "") == len(kept["fpr"])
    legend = re.fullmatch(r"yes: AUC (0\.\d+)", tab.page.inner_text("#roc .legend").strip())
    assert legend is not None and float(legend[1]) == pytest.approx(kept["auc"], abs=5e-4)
    expect(tab.page.locator("#roc")).to_contain_text("On the 300 validation rows")
    assert tab.page.locator("#residuals").count() == 0
    # Only the kinds the model has, in the API's order, the default chosen.
    assert options(tab) == model["importance_kinds"]
    assert model["importance_kinds"] == ["impurity", "permutation", "oob_permutation", "shap"]
    expect(tab.page.locator("#importance-kind")).to_have_value("impurity")
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []


def test_a_multiclass_classifier_draws_a_curve_per_class(
    tab: Watched, models: dict[str, Any]
) -> None:
    model = models["multiclass"]
    open_model(tab, model)

    expect(tab.page.locator("#roc svg path.line")).to_have_count(3)
    legend = tab.page.locator("#roc .legend > span")
    expect(legend).to_have_count(3)
    for entry, label in zip(legend.all(), ["a", "b", "c"], strict=True):
        expect(entry).to_contain_text(f"{label} vs rest, AUC 0.")
    assert options(tab) == model["importance_kinds"]
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []


def test_a_regressor_draws_its_validation_residuals(tab: Watched, models: dict[str, Any]) -> None:
    model = models["regressor"]
    open_model(tab, model)

    expect(tab.page.locator("#residuals svg circle.dot")).to_have_count(500)
    expect(tab.page.locator("#residuals")).to_contain_text(
        "on 500 of the 750 validation rows, drawn at random"
    )
    expect(tab.page.locator("#residuals svg line.diag")).to_have_count(1)  # y = 0
    assert tab.page.locator("#roc").count() == 0
    assert options(tab) == model["importance_kinds"]
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []


def test_a_model_without_a_holdout_says_why_and_offers_fewer_kinds(
    tab: Watched, models: dict[str, Any]
) -> None:
    model = models["folds"]
    open_model(tab, model)

    expect(tab.page.locator("#roc")).to_contain_text("trained without a holdout")
    assert tab.page.locator("#roc svg").count() == 0
    # No validation rows: no permutation or SHAP importance to offer.
    assert options(tab) == model["importance_kinds"] == ["impurity", "oob_permutation"]
    tab.page.wait_for_load_state("networkidle")
    assert tab.errors == [] and tab.outside == []


def test_the_plots_fit_a_phone(tabs: Callable[..., Watched], models: dict[str, Any]) -> None:
    for name, selector in [("multiclass", "#roc svg path.line"), ("regressor", "#residuals svg")]:
        tab = tabs(width=390, height=844)
        open_model(tab, models[name])
        tab.page.wait_for_selector(selector)
        tab.page.wait_for_load_state("networkidle")
        overflow = tab.page.evaluate("document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, (name, overflow)
        box = tab.page.locator(selector.split(" ")[0] + " svg").bounding_box()
        assert box is not None and box["width"] <= 390
        assert tab.errors == [] and tab.outside == []


def test_the_model_page_exports_onnx_and_a_triton_repository(
    tab: Watched, models: dict[str, Any]
) -> None:
    onnx = pytest.importorskip("onnx")
    model = models["multiclass"]
    open_model(tab, model)
    with tab.page.expect_download() as download:
        tab.page.click("#export-onnx")
    assert download.value.suggested_filename == f"coppice-{model['id']}.onnx"
    exported = onnx.load(download.value.path())
    assert [o.name for o in exported.graph.output] == ["label", "probabilities"]
    assert [i.name for i in exported.graph.input] == FEATURES
    with tab.page.expect_download() as download:
        tab.page.click("#export-triton")
    assert download.value.suggested_filename == f"coppice-{model['id']}.zip"
    with zipfile.ZipFile(download.value.path()) as archive:
        assert f"coppice-{model['id']}/1/model.onnx" in archive.namelist()
    assert tab.errors == [] and tab.outside == []
