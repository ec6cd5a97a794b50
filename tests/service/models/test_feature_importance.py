"""``GET /v1/models/{id}/feature-importance``: every kind, defaults, storage, refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import engine
from service.db.tables import ImportanceRecord
from service.training.split import holdout_split
from tests.service.models.helpers import Service, dataset_rows
from tests.service.stored_models import load_stored_model

pytestmark = pytest.mark.anyio

FEATURES = {"x", "z", "colour"}


async def importance(svc: Service, model_id: str, kind: str | None = None) -> Any:
    params = {"kind": kind} if kind is not None else {}
    response = await svc.client.get(f"/v1/models/{model_id}/feature-importance", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def stored_kinds(svc: Service, model_id: str) -> set[str]:
    with Session(svc.db_engine) as session:
        return set(
            session.scalars(
                select(ImportanceRecord.kind).where(ImportanceRecord.model_id == model_id)
            ).all()
        )


def check_shape(body: Any, model_id: str, kind: str) -> None:
    assert body["model_id"] == model_id and body["kind"] == kind
    assert {item["name"] for item in body["features"]} == FEATURES
    values = [item["importance"] for item in body["features"]]
    assert values == sorted(values, reverse=True)


@pytest.mark.parametrize(
    ("method", "default"),
    [
        ("random_forest", "impurity"),
        ("decision_tree", "impurity"),
        ("gradient_boosting", "impurity"),
        ("xgboost", "gain"),
    ],
)
async def test_default_kind(svc: Service, method: str, default: str) -> None:
    params = {"max_depth": 3} if method == "decision_tree" else {"n_estimators": 10}
    model_id = await svc.train(method, params=params)

    body = await importance(svc, model_id)

    check_shape(body, model_id, default)


async def test_impurity_is_the_stored_one(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = await importance(svc, model_id, "impurity")

    assert all(item["std"] is None for item in body["features"])
    assert sum(item["importance"] for item in body["features"]) == pytest.approx(1.0)
    # The strongest signal of the label is x.
    assert body["features"][0]["name"] == "x"


async def test_forest_kinds_are_computed_once_and_stored(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    assert stored_kinds(svc, model_id) == {"impurity"}

    for kind in ("permutation", "oob_permutation", "shap"):
        body = await importance(svc, model_id, kind)
        check_shape(body, model_id, kind)
        assert body["features"][0]["name"] == "x", kind
        assert all(item["std"] is not None for item in body["features"])
        assert await importance(svc, model_id, kind) == body

    assert stored_kinds(svc, model_id) == {"impurity", "permutation", "oob_permutation", "shap"}


async def test_xgboost_kinds(svc: Service) -> None:
    model_id = await svc.train("xgboost", target="amount")
    model = await _estimator(svc, model_id)
    names = ["x", "z", "colour"]

    for kind, engine_kind in (("gain", "gain"), ("split_count", "weight"), ("cover", "cover")):
        body = await importance(svc, model_id, kind)
        check_shape(body, model_id, kind)
        expected = dict(zip(names, model.importance(engine_kind).tolist(), strict=True))
        assert {i["name"]: i["importance"] for i in body["features"]} == pytest.approx(expected)
        assert all(item["std"] is None for item in body["features"])


async def test_permutation_uses_the_validation_rows(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting", target="amount")
    model = await _estimator(svc, model_id)
    rows = dataset_rows()
    y = np.array([row[3] for row in rows])
    codes = {"blue": 0.0, "green": 1.0, "red": 2.0}
    X = np.array(
        [
            [np.nan if r[0] is None else r[0], r[1], np.nan if r[2] is None else codes[r[2]]]
            for r in rows
        ]
    )
    _, validation = holdout_split(y, 0.2, classification=False, seed=7)
    expected = engine.permutation_importance(
        model, X[validation], y[validation], n_repeats=5, random_state=7
    )

    body = await importance(svc, model_id, "permutation")

    got = {item["name"]: (item["importance"], item["std"]) for item in body["features"]}
    for j, name in enumerate(["x", "z", "colour"]):
        assert got[name][0] == pytest.approx(expected.importances_mean[j])
        assert got[name][1] == pytest.approx(expected.importances_std[j])


async def test_shap_of_a_multiclass_model(svc: Service) -> None:
    model_id = await svc.train("xgboost", target="species")

    body = await importance(svc, model_id, "shap")

    check_shape(body, model_id, "shap")
    assert body["features"][0]["name"] == "x"


@pytest.mark.parametrize(
    ("method", "kind", "has"),
    [
        ("gradient_boosting", "gain", "'impurity', 'permutation', 'shap'"),
        ("random_forest", "split_count", "'impurity', 'permutation', 'oob_permutation', 'shap'"),
        ("region_boost", "gain", "'impurity', 'permutation', 'shap'"),
        ("random_forest", "gini", "'impurity'"),
    ],
)
async def test_a_kind_the_model_lacks_is_422_listing_its_kinds(
    svc: Service, method: str, kind: str, has: str
) -> None:
    model_id = await svc.train(method)

    response = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": kind}
    )

    assert response.status_code == 422
    detail = response.json()["detail"]
    assert f"no '{kind}' importance" in detail and has in detail


async def test_without_a_holdout_there_is_no_permutation_or_shap(svc: Service) -> None:
    model_id = await svc.train("random_forest", validation={"folds": 3})

    response = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "permutation"}
    )

    assert response.status_code == 422
    assert response.json()["detail"].endswith("it has 'impurity', 'oob_permutation'.")
    assert (await importance(svc, model_id, "oob_permutation"))["kind"] == "oob_permutation"


async def test_extra_trees_without_bootstrap_have_no_oob_importance(svc: Service) -> None:
    model_id = await svc.train("extra_trees")

    response = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "oob_permutation"}
    )

    assert response.status_code == 422


async def test_after_the_dataset_is_deleted(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    await importance(svc, model_id, "shap")
    assert (await svc.client.delete(f"/v1/datasets/{svc.dataset_id}")).status_code == 204

    stored = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "shap"}
    )
    needs_data = await svc.client.get(
        f"/v1/models/{model_id}/feature-importance", params={"kind": "permutation"}
    )

    assert stored.status_code == 200
    assert needs_data.status_code == 409
    assert "deleted" in needs_data.json()["detail"]


async def _estimator(svc: Service, model_id: str) -> Any:
    with Session(svc.db_engine) as session:
        return load_stored_model(session, svc.store, model_id)


async def test_a_base_learner_defaults_to_permutation(svc: Service) -> None:
    model_id = await svc.train("logistic_regression", params={})

    body = await importance(svc, model_id)

    check_shape(body, model_id, "permutation")
