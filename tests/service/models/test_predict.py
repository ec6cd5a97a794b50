"""``POST /v1/models/{id}/predict``: input shapes, encoding, probabilities, explanations, limits."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest
from anyio import to_thread
from sqlalchemy import event, update
from sqlalchemy.orm import Session

import engine
from service.db.tables import ModelArtifactRecord
from service.models import router as models_router
from tests.service.models.helpers import MAX_PREDICT_ROWS, Service, dataset_rows
from tests.service.stored_models import (
    damage_stored_model,
    load_stored_model,
    replace_stored_model,
)

pytestmark = pytest.mark.anyio

RECORDS: list[dict[str, Any]] = [
    {"x": 1.2, "z": 0.1, "colour": "red"},
    {"x": -1.5, "z": None, "colour": "blue"},
    {"x": None, "z": 0.4, "colour": None},
    {"z": -2.0},  # absent features are missing
    {"x": 0.3, "z": 0.0, "colour": "green"},
]


def encoded(records: list[dict[str, Any]]) -> np.ndarray:
    """The records as training encoded them: colour codes in sorted category order."""
    codes = {"blue": 0.0, "green": 1.0, "red": 2.0}
    return np.array(
        [
            [
                np.nan if r.get("x") is None else r["x"],
                np.nan if r.get("z") is None else r["z"],
                codes.get(r.get("colour") or "", np.nan),
            ]
            for r in records
        ]
    )


async def estimator(svc: Service, model_id: str) -> Any:
    with Session(svc.db_engine) as session:
        return load_stored_model(session, svc.store, model_id)


async def predict(svc: Service, model_id: str, **body: Any) -> Any:
    """The answer without its row ids (made up per request: tests/service/monitoring)."""
    response = await svc.client.post(f"/v1/models/{model_id}/predict", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert len(answer.pop("ids")) == len(answer["predictions"])
    return answer


async def test_records_with_probabilities(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS, return_proba=True)

    assert body["model_id"] == model_id
    assert body["classes"] == ["no", "yes"]
    assert body["predictions"] == model.predict(encoded(RECORDS)).tolist()
    proba = np.array(body["probabilities"])
    np.testing.assert_allclose(proba, model.predict_proba(encoded(RECORDS)))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert body["contributions"] is None and body["bias"] is None


async def test_columns_and_rows_match_records(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting")
    columns = ["colour", "z", "x"]  # any order, any subset
    rows = [[r.get(c) for c in columns] for r in RECORDS]

    by_rows = await predict(svc, model_id, columns=columns, rows=rows, return_proba=True)
    by_records = await predict(svc, model_id, records=RECORDS, return_proba=True)

    assert by_rows == by_records


async def test_without_return_proba_there_are_none(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = await predict(svc, model_id, records=RECORDS[:2])

    assert body["probabilities"] is None
    assert len(body["predictions"]) == 2


async def test_regression_predicts_numbers(svc: Service) -> None:
    model_id = await svc.train("xgboost", target="amount")
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS, return_proba=True)

    np.testing.assert_allclose(body["predictions"], model.predict(encoded(RECORDS)))
    assert body["classes"] is None and body["probabilities"] is None


async def test_unknown_category_is_missing(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting")
    unseen = [{"x": 0.2, "z": 0.1, "colour": "purple"}]
    missing = [{"x": 0.2, "z": 0.1, "colour": None}]

    first = await predict(svc, model_id, records=unseen, return_proba=True)
    second = await predict(svc, model_id, records=missing, return_proba=True)

    assert first["probabilities"] == second["probabilities"]


async def test_a_number_in_a_categorical_column_is_compared_as_text(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting")

    as_number = await predict(svc, model_id, records=[{"x": 0.2, "colour": 1.0}], return_proba=True)
    as_missing = await predict(svc, model_id, records=[{"x": 0.2}], return_proba=True)

    # "1" is no colour the model knows, so it is missing rather than code 1 ("green").
    assert as_number["probabilities"] == as_missing["probabilities"]


async def test_misspelt_column_is_422_naming_it(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    response = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        json={"records": [{"x": 1.0, "colur": "red", "label": "yes"}]},
    )

    assert response.status_code == 422
    problem = response.json()
    assert "'colur' (did you mean 'colour'?)" in problem["detail"]
    assert "'label' (the target)" in problem["detail"]
    assert [error["loc"] for error in problem["errors"]] == [
        ["body", "records", "colur"],
        ["body", "records", "label"],
    ]

    by_rows = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"columns": ["x", "zz"], "rows": [[1.0, 2.0]]}
    )
    assert by_rows.status_code == 422 and "'zz' (did you mean 'z'?)" in by_rows.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"records": [{"x": "high"}]}, 422, "feature 'x' is numeric"),
        ({"records": [{"x": True}]}, 422, "feature 'x' is numeric"),
        ({"records": [{"colour": ["red"]}]}, 422, "holds a JSON list"),
        ({"columns": ["x"], "rows": [[1.0, 2.0]]}, 422, "Row 0 has 2 cells"),
        ({"columns": ["x"], "rows": [1.0]}, 422, "Row 0 is not a list of cells"),
        ({"columns": ["x", "x"], "rows": [[1.0, 2.0]]}, 422, "more than once"),
        ({"records": [], "columns": ["x"], "rows": []}, 422, "not both"),
        ({"columns": ["x"]}, 422, "'columns' with 'rows'"),
        ({"records": [{"x": 1.0}], "probas": True}, 422, "probas"),
    ],
)
async def test_invalid_bodies(svc: Service, body: Any, status: int, fragment: str) -> None:
    model_id = await svc.train("random_forest")

    response = await svc.client.post(f"/v1/models/{model_id}/predict", json=body)

    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert fragment in response.text


async def test_malformed_json_is_400(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    response = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        content=b'{"records": [',
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 400


async def test_too_many_rows_is_413(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    records = [{"x": 0.0}] * (MAX_PREDICT_ROWS + 1)

    response = await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": records})
    by_rows = await svc.client.post(
        f"/v1/models/{model_id}/predict",
        json={"columns": ["x"], "rows": [[0.0]] * (MAX_PREDICT_ROWS + 1)},
    )
    at_limit = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": records[:MAX_PREDICT_ROWS]}
    )

    assert response.status_code == by_rows.status_code == 413
    assert "COPPICE_MAX_PREDICT_ROWS" in response.json()["detail"]
    assert at_limit.status_code == 200


async def test_no_rows_predicts_nothing(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = await predict(svc, model_id, records=[], return_proba=True, explain=True)

    assert body["predictions"] == [] and body["probabilities"] == []
    assert body["contributions"] == [] and body["bias"] == []


# --- explanations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "raw"),
    [
        ("random_forest", "label", "proba1"),
        ("decision_tree", "label", "proba1"),
        ("extra_trees", "amount", "predict"),
        ("gradient_boosting", "label", "decision"),
        ("xgboost", "label", "decision"),
        ("xgboost", "amount", "predict"),
    ],
)
async def test_contributions_and_bias_add_up_to_the_raw_score(
    svc: Service, method: str, target: str, raw: str
) -> None:
    params = {"max_depth": 4} if method == "decision_tree" else {"n_estimators": 10}
    model_id = await svc.train(method, target=target, params=params)
    model = await estimator(svc, model_id)
    X = encoded(RECORDS)

    body = await predict(svc, model_id, records=RECORDS, explain=True)

    contributions = np.array(body["contributions"])
    bias = np.array(body["bias"])
    assert contributions.shape == (len(RECORDS), 3) and bias.shape == (len(RECORDS),)
    expected = {
        "proba1": lambda: model.predict_proba(X)[:, 1],
        "decision": lambda: model.decision_function(X),
        "predict": lambda: model.predict(X),
    }[raw]()
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, expected, atol=1e-6)


async def test_multiclass_contributions_are_per_class(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="species")
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS, explain=True, return_proba=True)

    contributions = np.array(body["contributions"])
    bias = np.array(body["bias"])
    assert body["classes"] == ["a", "b", "c"]
    assert contributions.shape == (len(RECORDS), 3, 3) and bias.shape == (len(RECORDS), 3)
    np.testing.assert_allclose(
        contributions.sum(axis=1) + bias, model.predict_proba(encoded(RECORDS)), atol=1e-6
    )
    np.testing.assert_allclose(body["probabilities"], model.predict_proba(encoded(RECORDS)))


async def test_a_model_without_background_rows_cannot_be_sampled_so_explain_is_422(
    svc: Service,
) -> None:
    model_id = await svc.train("region_boost")
    # As a model trained before models kept background rows: nothing to sample against.
    with Session(svc.db_engine) as session, session.begin():
        model = load_stored_model(session, svc.store, model_id)
        del model.background_
        replace_stored_model(session, svc.store, model_id, model)

    response = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": RECORDS, "explain": True}
    )
    plain = await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})

    assert response.status_code == 422
    assert "'region_boost' model cannot be explained" in response.json()["detail"]
    assert plain.status_code == 200


# --- the model cache ---------------------------------------------------------------------------


async def test_second_predict_reads_nothing_from_the_database(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # The prediction log writes on its own thread, off the request path.
        if threading.current_thread().name != "prediction-log":
            statements.append(statement)

    event.listen(svc.db_engine, "before_cursor_execute", record)
    try:
        first = await predict(svc, model_id, records=RECORDS)
        loaded = list(statements)
        statements.clear()
        second = await predict(svc, model_id, records=RECORDS)
    finally:
        event.remove(svc.db_engine, "before_cursor_execute", record)

    assert first == second
    assert any("model_artifacts" in s for s in loaded)
    assert statements == []


async def test_small_requests_for_cached_models_skip_the_thread_hop(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_id = await svc.train("random_forest")
    hops: list[str] = []
    run_sync = to_thread.run_sync

    async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn.__qualname__)
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(models_router.to_thread, "run_sync", counting)
    first = await predict(svc, model_id, records=RECORDS)  # loads the model: in a thread
    assert len(hops) == 1
    assert await predict(svc, model_id, records=RECORDS) == first  # cached and small: inline
    assert len(hops) == 1
    await predict(svc, model_id, records=RECORDS, explain=True)  # TreeSHAP: in a thread
    # A body past INLINE_PREDICT_BYTES (long unseen categories, which predict as missing).
    large = [{**record, "colour": "unseen " + "x" * 200} for record in RECORDS] * 4
    assert len(json.dumps({"records": large})) > models_router.INLINE_PREDICT_BYTES
    assert len((await predict(svc, model_id, records=large))["predictions"]) == len(large)
    assert len(hops) == 3


async def test_artifact_with_a_wrong_checksum_is_refused(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with Session(svc.db_engine) as session, session.begin():
        session.execute(
            update(ModelArtifactRecord)
            .where(ModelArtifactRecord.model_id == model_id)
            .values(sha256="0" * 64)
        )

    response = await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})
    importance = await svc.client.get(f"/v1/models/{model_id}/feature-importance")

    assert response.status_code == 409
    problem = response.json()
    assert problem["type"] == "urn:coppice:problem:artifact-corrupt"
    assert f"'models/{model_id}/model.cpm' does not match" in problem["detail"]
    assert importance.status_code == 409
    assert (await svc.client.get(f"/v1/models/{model_id}")).status_code == 200


async def test_damaged_artifact_bytes_are_refused(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with Session(svc.db_engine) as session:
        damage_stored_model(session, svc.store, model_id)

    response = await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})

    assert response.status_code == 409
    assert "SHA-256" in response.json()["detail"]


def test_dataset_rows_are_deterministic() -> None:
    assert dataset_rows() == dataset_rows()


@pytest.mark.parametrize(
    ("method", "target"),
    [("logistic_regression", "label"), ("k_neighbors", "amount"), ("gaussian_nb", "species")],
)
async def test_base_learners_predict_from_the_same_records(
    svc: Service, method: str, target: str
) -> None:
    """Dense-input learners take gaps and category names like the trees (encoded for them)."""
    model_id = await svc.train(method, target=target, params={})
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS)
    explained = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": RECORDS, "explain": True}
    )

    assert isinstance(model, engine.EncodedClassifier | engine.EncodedRegressor)
    expected = model.predict(encoded(RECORDS))
    if target == "amount":
        np.testing.assert_allclose(body["predictions"], expected)
    else:
        assert body["predictions"] == [str(label) for label in expected]
    assert explained.status_code == 200  # explained too: exactly, or k-NN by sampling
    assert explained.json()["explanation"] == ("sampled" if method == "k_neighbors" else "exact")


async def test_a_model_without_probabilities_predicts_labels_only(svc: Service) -> None:
    model_id = await svc.train("perceptron", params={})

    labels = await predict(svc, model_id, records=RECORDS)
    with_proba = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": RECORDS, "return_proba": True}
    )
    metrics = (await svc.client.get(f"/v1/models/{model_id}")).json()["metrics"]

    assert set(labels["predictions"]) <= {"yes", "no"} and labels["probabilities"] is None
    assert with_proba.status_code == 422
    assert with_proba.json()["errors"][0]["loc"] == ["body", "return_proba"]
    assert metrics["validation"]["log_loss"] is None and metrics["validation"]["roc_auc"] is None
    assert metrics["validation"]["accuracy"] > 0.6


@pytest.mark.parametrize(
    ("method", "target"), [("voting", "species"), ("stacking", "amount"), ("bks_combiner", "label")]
)
async def test_combiners_predict_from_the_same_records(
    svc: Service, method: str, target: str
) -> None:
    linear = "ridge" if target == "amount" else "logistic_regression"
    members = [
        {"name": "forest", "method": "random_forest", "params": {"n_estimators": 5}},
        {"name": "linear", "method": linear},
    ]
    model_id = await svc.train(method, target=target, params={"estimators": members})
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS)

    expected = model.predict(encoded(RECORDS))
    if target == "amount":
        np.testing.assert_allclose(body["predictions"], expected)
    else:
        assert body["predictions"] == [str(label) for label in expected]


async def test_adaboost_classifier_is_explained_additively(svc: Service) -> None:
    model_id = await svc.train("adaboost")
    model = await estimator(svc, model_id)

    body = await predict(svc, model_id, records=RECORDS, explain=True)

    contributions, bias = np.array(body["contributions"]), np.array(body["bias"])
    np.testing.assert_allclose(
        contributions.sum(axis=1) + bias, model.decision_function(encoded(RECORDS)), atol=1e-9
    )
