"""``GET /v1/models/{id}/diagnostics`` (ROC curves, residuals) and ``importance_kinds`` of
``GET /v1/models/{id}``, through the app on SQLite and PostgreSQL.

The expected values are recomputed from the validation rows, rebuilt with training's own split,
and the model's predictions of them through the API; ROC curves against scikit-learn's.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.typing import NDArray
from sqlalchemy import update
from sqlalchemy.orm import Session

from service.db.tables import ModelArtifactRecord, ModelRecord
from service.training.split import holdout_split
from tests.service.models.helpers import COLUMNS, Service, dataset_rows

pytestmark = pytest.mark.anyio

FEATURES = ["x", "z", "colour"]
NOTHING = {"validation_rows": None, "roc": None, "residuals": None}


async def diagnostics(svc: Service, model_id: str) -> dict[str, Any]:
    response = await svc.client.get(f"/v1/models/{model_id}/diagnostics")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body.pop("model_id") == model_id
    return body


async def validation_outputs(
    svc: Service, model_id: str, target: str, *, classification: bool
) -> tuple[NDArray[Any], dict[str, Any]]:
    """The validation rows' targets, and the model's predictions of them (with probabilities)."""
    rows = dataset_rows()
    y = np.array([row[COLUMNS.index(target)] for row in rows])
    _, validation = holdout_split(y, 0.2, classification=classification, seed=7)
    records = [{name: rows[i][COLUMNS.index(name)] for name in FEATURES} for i in validation]
    response = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        json={"records": records, "return_proba": classification},
    )
    assert response.status_code == 200, response.text
    return y[validation], response.json()


def assert_draws_the_curve(curve: dict[str, Any], positive: NDArray[np.bool_], scores: Any) -> None:
    """``curve`` keeps every corner of scikit-learn's curve, in order, and only points of it:
    each point it leaves out is on the line between the points it keeps either side."""
    full_fpr, full_tpr, _ = skm.roc_curve(positive, scores, drop_intermediate=False)
    fpr, tpr = np.array(curve["fpr"]), np.array(curve["tpr"])
    points = list(zip(full_fpr.tolist(), full_tpr.tolist(), strict=True))
    kept = [points.index(point) for point in zip(fpr.tolist(), tpr.tolist(), strict=True)]
    assert kept == sorted(kept) and kept[0] == 0 and kept[-1] == len(points) - 1
    for start, end in itertools.pairwise(kept):
        for i in range(start + 1, end):
            chord = (full_fpr[end] - full_fpr[start], full_tpr[end] - full_tpr[start])
            offset = (full_fpr[i] - full_fpr[start], full_tpr[i] - full_tpr[start])
            assert chord[0] * offset[1] - chord[1] * offset[0] == pytest.approx(0, abs=1e-12)
    assert curve["auc"] == pytest.approx(skm.roc_auc_score(positive, scores), abs=1e-12)


async def test_a_binary_classifier_has_its_positive_class_curve(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = await diagnostics(svc, model_id)

    y, predicted = await validation_outputs(svc, model_id, "label", classification=True)
    assert body["validation_rows"] == y.size == 32
    assert body["residuals"] is None
    assert list(body["roc"]) == ["yes"]  # the second class, whose scores roc_auc uses
    yes = np.array(predicted["probabilities"])[:, predicted["classes"].index("yes")]
    assert_draws_the_curve(body["roc"]["yes"], y == "yes", yes)
    model = (await svc.client.get(f"/v1/models/{model_id}")).json()
    assert body["roc"]["yes"]["auc"] == model["metrics"]["validation"]["roc_auc"]


async def test_a_multiclass_classifier_has_a_curve_per_class(svc: Service) -> None:
    model_id = await svc.train("xgboost", target="species")

    body = await diagnostics(svc, model_id)

    y, predicted = await validation_outputs(svc, model_id, "species", classification=True)
    assert list(body["roc"]) == ["a", "b", "c"]
    proba = np.array(predicted["probabilities"])
    for k, label in enumerate(predicted["classes"]):
        assert_draws_the_curve(body["roc"][label], y == label, proba[:, k])
    model = (await svc.client.get(f"/v1/models/{model_id}")).json()
    macro = np.mean([curve["auc"] for curve in body["roc"].values()])
    assert macro == pytest.approx(model["metrics"]["validation"]["roc_auc"], abs=1e-12)


async def test_a_regressor_has_its_validation_residuals(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting", target="amount")

    body = await diagnostics(svc, model_id)

    y, predicted = await validation_outputs(svc, model_id, "amount", classification=False)
    assert body["validation_rows"] == 32 and body["roc"] is None
    # All 32 rows (fewer than the 500 kept), in row order.
    assert body["residuals"]["actual"] == pytest.approx(y.astype(float).tolist(), abs=1e-12)
    assert body["residuals"]["predicted"] == pytest.approx(predicted["predictions"], abs=1e-9)


@pytest.mark.parametrize("validation", [{"folds": 3}, {"holdout": 0}])
async def test_no_validation_rows_no_diagnostics(svc: Service, validation: dict[str, Any]) -> None:
    classifier = await svc.train("random_forest", validation=validation)
    regressor = await svc.train("random_forest", target="amount", validation=validation)

    assert await diagnostics(svc, classifier) == NOTHING
    assert await diagnostics(svc, regressor) == NOTHING


async def test_a_classifier_without_probabilities_has_no_curve(svc: Service) -> None:
    model_id = await svc.train("perceptron", params={})

    body = await diagnostics(svc, model_id)

    assert body == {"validation_rows": 32, "roc": None, "residuals": None}


async def test_a_model_stored_before_diagnostics_has_none(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with Session(svc.db_engine) as session, session.begin():
        record = session.get_one(ModelRecord, model_id)
        metrics = {key: value for key, value in record.metrics.items() if key != "diagnostics"}
        session.execute(
            update(ModelRecord).where(ModelRecord.id == model_id).values(metrics=metrics)
        )

    assert await diagnostics(svc, model_id) == NOTHING
    assert (await svc.client.get(f"/v1/models/{model_id}")).status_code == 200


async def test_diagnostics_of_a_reference_and_of_nothing(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    created = await svc.client.post("/v1/registered-models", json={"name": "churn"})
    assert created.status_code == 201, created.text
    version = await svc.client.post(
        "/v1/registered-models/churn/versions", json={"model_id": model_id}
    )
    assert version.status_code == 201, version.text

    by_name = await svc.client.get("/v1/models/churn@latest/diagnostics")
    unknown = await svc.client.get("/v1/models/nope/diagnostics")

    assert by_name.status_code == 200 and by_name.json()["model_id"] == model_id
    assert by_name.json()["roc"] == (await diagnostics(svc, model_id))["roc"]
    assert unknown.status_code == 404


async def test_the_payload_stays_out_of_model_bodies(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    model = (await svc.client.get(f"/v1/models/{model_id}")).json()
    listed = (await svc.client.get("/v1/models")).json()["items"][0]

    assert set(model["metrics"]) == set(listed["metrics"]) == {"train", "validation", "oob", "cv"}


# --- importance_kinds -----------------------------------------------------------------------


async def accepted_kinds(svc: Service, model_id: str) -> list[str]:
    """The kinds the importance endpoint gives, as its 422 for an unknown kind lists them."""
    response = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "none-such"}
    )
    assert response.status_code == 422
    (error,) = response.json()["errors"]
    listed: str = error["msg"].removeprefix("one of: ")
    return [kind.strip() for kind in listed.split(",") if kind.strip()]


@pytest.mark.parametrize(
    ("method", "params", "validation", "kinds"),
    [
        (
            "random_forest",
            {"n_estimators": 10},
            None,
            ["impurity", "permutation", "oob_permutation", "shap"],
        ),
        ("random_forest", {"n_estimators": 10}, {"folds": 3}, ["impurity", "oob_permutation"]),
        ("extra_trees", {"n_estimators": 5}, {"holdout": 0}, ["impurity"]),
        (
            "xgboost",
            {"n_estimators": 10},
            None,
            ["impurity", "gain", "split_count", "cover", "permutation", "shap"],
        ),
        ("logistic_regression", {}, None, ["permutation", "shap"]),
    ],
)
async def test_importance_kinds_are_those_the_endpoint_gives(
    svc: Service,
    method: str,
    params: dict[str, Any],
    validation: dict[str, Any] | None,
    kinds: list[str],
) -> None:
    model_id = await svc.train(method, params=params, validation=validation)

    model = (await svc.client.get(f"/v1/models/{model_id}")).json()

    assert model["importance_kinds"] == kinds
    assert await accepted_kinds(svc, model_id) == kinds
    listed = (await svc.client.get("/v1/models")).json()["items"]
    assert [item["importance_kinds"] for item in listed] == [kinds]


def forget_kinds(svc: Service, model_id: str) -> None:
    """Make the model one trained before the server kept its importance kinds."""
    with Session(svc.db_engine) as session, session.begin():
        record = session.get_one(ModelRecord, model_id)
        metrics = {k: v for k, v in record.metrics.items() if k != "importance_kinds"}
        session.execute(
            update(ModelRecord).where(ModelRecord.id == model_id).values(metrics=metrics)
        )


async def test_a_model_trained_before_kinds_were_kept_is_asked(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    forget_kinds(svc, model_id)

    model = (await svc.client.get(f"/v1/models/{model_id}")).json()
    listed = (await svc.client.get("/v1/models")).json()["items"]

    assert model["importance_kinds"] == ["impurity", "permutation", "oob_permutation", "shap"]
    assert listed[0]["importance_kinds"] is None  # a listing loads no model


async def test_a_corrupt_artifact_leaves_the_model_readable(svc: Service) -> None:
    kept = await svc.train("random_forest")
    asked = await svc.train("random_forest", target="amount")
    forget_kinds(svc, asked)
    with Session(svc.db_engine) as session, session.begin():
        session.execute(update(ModelArtifactRecord).values(sha256="0" * 64))

    kept_body = await svc.client.get(f"/v1/models/{kept}")
    asked_body = await svc.client.get(f"/v1/models/{asked}")

    assert kept_body.status_code == asked_body.status_code == 200
    assert kept_body.json()["importance_kinds"] == [
        "impurity",
        "permutation",
        "oob_permutation",
        "shap",
    ]
    assert asked_body.json()["importance_kinds"] is None
