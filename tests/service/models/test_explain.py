"""Explanations through the API: every method of ``GET /v1/methods`` explains its predictions,
has ``kind=shap`` importance, and ``/v2`` returns contributions when asked for them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.explain._api import describe
from service.methods.catalog import CATALOG, Task
from service.models import explanations
from tests.service.inference.helpers import matrix_input
from tests.service.models.helpers import Service
from tests.service.models.test_predict import RECORDS, encoded, estimator, predict

pytestmark = pytest.mark.anyio


@pytest.fixture
def backend() -> str:
    """SQLite only: explanations never touch the database, so one backend sweeps them."""
    return "sqlite"


MEMBERS = [
    {"name": "tree", "method": "decision_tree", "params": {"max_depth": 3}},
    {"name": "ridge", "method": "ridge", "params": {}},
]
CLASSIFIER_MEMBERS = [
    {"name": "tree", "method": "decision_tree", "params": {"max_depth": 3}},
    {"name": "logistic", "method": "logistic_regression", "params": {}},
]
ENSEMBLES = ("bagging", "random_forest", "extra_trees", "adaboost", "arc_x4", "region_boost")
BOOSTED = ("gradient_boosting", "xgboost")


def small_params(method: str, task: Task) -> dict[str, Any]:
    """Few members and folds: these tests are about explanations, not accuracy."""
    members = CLASSIFIER_MEMBERS if task == Task.CLASSIFICATION else MEMBERS
    if method in ENSEMBLES:
        return {"n_estimators": 5}
    if method in BOOSTED:
        return {"n_estimators": 5, "max_depth": 3}
    if method in ("voting",):
        return {"estimators": members}
    if method in ("stacking", "grading") or method.endswith("_combiner"):
        return {"estimators": members, "cv": 2}
    if method == "mixture_of_experts":
        return {"n_experts": 2, "n_init": 1}
    return {}


METHODS = [
    (name, task)
    for name, method in sorted(CATALOG.items())
    for task in method.tasks
    if task in (Task.CLASSIFICATION, Task.REGRESSION)
]


async def test_the_table_covers_every_method_the_api_lists(svc: Service) -> None:
    listed = (await svc.client.get("/v1/methods")).json()
    items = listed["items"] if isinstance(listed, dict) else listed
    names = {item["name"] for item in items}

    assert names == {name for name, _ in METHODS}


@pytest.mark.parametrize(("method", "task"), METHODS, ids=[f"{m}-{t}" for m, t in METHODS])
async def test_every_method_explains_and_has_shap_importance(
    svc: Service, method: str, task: Task
) -> None:
    target = "label" if task == Task.CLASSIFICATION else "amount"
    model_id = await svc.train(
        method, target=target, params=small_params(method, task), validation={"holdout": 0.25}
    )

    body = await predict(svc, model_id, records=RECORDS, explain=True, explain_samples=8)
    importance = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "shap"}
    )

    contributions, bias = np.array(body["contributions"]), np.array(body["bias"])
    assert contributions.shape == (len(RECORDS), 3) and bias.shape == (len(RECORDS),)
    assert body["explanation"] in ("exact", "sampled")
    model = await estimator(svc, model_id)
    explained = describe(model).output(encoded(RECORDS))[:, 0]
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, explained, atol=1e-9)
    assert importance.status_code == 200, importance.text
    features = importance.json()["features"]
    assert {f["name"] for f in features} == {"x", "z", "colour"}
    assert all(f["importance"] is not None and f["importance"] >= 0 for f in features)


BAGS = [
    ("ridge", Task.REGRESSION),
    ("linear_regression", Task.REGRESSION),
    ("random_forest", Task.CLASSIFICATION),
    ("gradient_boosting", Task.REGRESSION),
]


@pytest.mark.parametrize(("learner", "task"), BAGS, ids=[f"{m}-{t}" for m, t in BAGS])
async def test_bagging_of_exact_learners_is_explained_exactly(
    svc: Service, learner: str, task: Task
) -> None:
    target = "label" if task == Task.CLASSIFICATION else "amount"
    inner = small_params(learner, task)
    model_id = await svc.train(
        "bagging",
        target=target,
        params={"n_estimators": 4, "estimator": {"method": learner, "params": inner}},
    )

    body = await predict(svc, model_id, records=RECORDS, explain=True)

    assert body["explanation"] == "exact"
    contributions, bias = np.array(body["contributions"]), np.array(body["bias"])
    model = await estimator(svc, model_id)
    explained = describe(model).output(encoded(RECORDS))[:, 0]
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, explained, atol=1e-9)


@pytest.mark.parametrize("samples", [1, explanations.MAX_EXPLAIN_SAMPLES + 1])
async def test_explain_samples_out_of_range_is_422(svc: Service, samples: int) -> None:
    model_id = await svc.train("k_neighbors", params={})

    response = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        json={"records": RECORDS, "explain": True, "explain_samples": samples},
    )

    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][-1] == "explain_samples"


async def test_too_much_sampling_for_one_request_is_422_saying_what_fits(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_id = await svc.train("k_neighbors", params={})
    monkeypatch.setattr(explanations, "MAX_SAMPLED_EVALUATIONS", 100)

    response = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        json={"records": RECORDS, "explain": True, "explain_samples": 32},
    )
    exact_id = await svc.train("gaussian_nb", params={})
    exact = await svc.client.post(
        f"/v1/models/{exact_id}/predict", json={"records": RECORDS, "explain": True}
    )

    assert response.status_code == 422
    assert "send at most 1 rows" in response.json()["detail"]
    assert exact.status_code == 200 and exact.json()["explanation"] == "exact"


async def test_v2_returns_contributions_when_asked(svc: Service) -> None:
    model_id = await svc.train("k_neighbors", params={})
    v1 = await predict(svc, model_id, records=RECORDS, explain=True)

    response = await svc.client.post(
        f"/v2/models/{model_id}/infer",
        json={
            "inputs": [matrix_input(RECORDS)],
            "outputs": [{"name": "predictions"}, {"name": "contributions"}],
        },
    )

    assert response.status_code == 200, response.text
    outputs = {output["name"]: output for output in response.json()["outputs"]}
    contributions = outputs["contributions"]
    assert contributions["shape"] == [len(RECORDS), 3]
    assert contributions["parameters"]["explanation"] == "sampled"
    assert float(contributions["parameters"]["bias"]) == pytest.approx(v1["bias"][0])
    assert set(outputs) == {"predictions", "contributions"}
