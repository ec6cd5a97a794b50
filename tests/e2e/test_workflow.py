"""The whole workflow over HTTP against a real ``coppice serve`` (uvicorn) process.

One server runs for the module: a fresh data dir with SQLite, the embedded worker on. Every
method of the catalog is trained for each of its tasks (parametrized from ``CATALOG``, so a
new method is covered the day it is added), then read, asked for predictions, feature
importances and learning curves — each through the public API only, as a client would.

All jobs are submitted by one module fixture before the first test polls, so the fits run
while the tests inspect the models that are already done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from service.methods.catalog import CATALOG, Task
from service.methods.params import accepted_params
from tests.e2e.processes import ENDED, Processes, serving
from tests.service.models.helpers import COLUMNS, dataset_csv, dataset_rows

pytestmark = pytest.mark.slow

N_ROWS = 200
FEATURES = ["x", "z", "colour"]
TARGETS = {Task.CLASSIFICATION: "label", Task.REGRESSION: "amount"}
# Every job has ended well before this, counted from the moment all were submitted; it only
# bounds how long a stuck job can hold the run up.
JOBS_TIMEOUT = 120.0

PAIRS = [(method.name, task) for method in CATALOG.values() for task in method.tasks]


# Trees and ensembles of trees: their estimators have impurity importances.
TREE_METHODS = frozenset(
    {"decision_tree", "bagging", "random_forest", "extra_trees", "adaboost", "arc_x4"}
    | {"region_boost", "gradient_boosting"}
)

PROBABILISTIC = TREE_METHODS | {"xgboost", "logistic_regression", "k_neighbors", "gaussian_nb"}


def small_params(method: str, task: Task) -> dict[str, Any]:
    """The method's params for a quick fit: five members, or three small named learners.

    A new method that needs more (a required parameter) fails its own test below with the
    server's 422; give it its small params here.
    """
    accepted = accepted_params(CATALOG[method].estimator_class(task))
    params: dict[str, Any] = {}
    if "n_estimators" in accepted:
        params["n_estimators"] = 5
    if "estimators" in accepted:
        # Combiners (voting, stacking, ...): named learners in API.md's shape, small ones
        # rather than the defaults' 100-tree forests.
        linear = "logistic_regression" if task == Task.CLASSIFICATION else "ridge"
        params["estimators"] = [
            {"name": "tree", "method": "decision_tree", "params": {"max_depth": 3}},
            {"name": "knn", "method": "k_neighbors", "params": {}},
            {"name": "linear", "method": linear, "params": {}},
        ]
    return params


def expected_importance_kinds(method: str) -> set[str]:
    """The default kind docs/api.md promises: gain for xgboost, else impurity where the
    estimator has it, else the first kind the model has: permutation (trained with a holdout).
    """
    if method == "xgboost":
        return {"gain"}
    if method in TREE_METHODS:
        return {"impurity"}
    if CATALOG[method].dense_input:
        return {"permutation"}
    # A combiner has impurity importances or not depending on its members.
    return {"impurity", "permutation"}


def expected_curves(method: str, task: Task) -> dict[str, bool] | None:
    """Which series docs/api.md ("Curves") promises; ``{}`` for a model without curves (404).

    ``None`` where the docs promise nothing (the base learners; some report a training loss
    per iteration): the test then accepts a 200 or a 404, and checks the shape of a 200.
    """
    # A single tree has no iterations; extra trees do not bootstrap by default, so they have
    # no out-of-bag rows and no OOB curve.
    if method in ("decision_tree", "extra_trees"):
        return {}
    if method in ("gradient_boosting", "adaboost"):
        return {"train": True, "validation": True, "oob": False}
    if method in ("arc_x4", "region_boost", "xgboost"):
        return {"train": True, "validation": False, "oob": False}
    if method in ("random_forest", "bagging"):
        return {"train": False, "validation": False, "oob": True}
    return None


@dataclass
class Workflow:
    """The running server, its client, the datasets and every submitted job."""

    client: httpx.Client
    processes: Processes
    datasets: dict[Task, str] = field(default_factory=dict)
    jobs: dict[tuple[str, Task], str] = field(default_factory=dict)
    # What POST /v1/jobs answered for a pair whose job was refused.
    refused: dict[tuple[str, Task], str] = field(default_factory=dict)
    submitted_at: float = 0.0

    def finished(self, method: str, task: Task) -> dict[str, Any]:
        """Poll one job until it ends (the others keep running meanwhile)."""
        if (method, task) in self.refused:
            pytest.fail(f"POST /v1/jobs refused {method}/{task}: {self.refused[(method, task)]}")
        job_id = self.jobs[(method, task)]
        deadline = self.submitted_at + JOBS_TIMEOUT
        while True:
            response = self.client.get(f"/v1/jobs/{job_id}")
            assert response.status_code == 200, response.text
            job: dict[str, Any] = response.json()
            if job["status"] in ENDED:
                return job
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{method}/{task}: {job['status']} at {job['stage']!r}; {job}\n"
                    + self.processes.logs()
                )
            time.sleep(0.1)


def _upload(client: httpx.Client, rows: list[list[Any]]) -> dict[Task, str]:
    """The same table twice: as JSON records (classification) and as a CSV file (regression)."""
    as_json = client.post(
        "/v1/datasets",
        json={
            "name": "e2e-json",
            "records": [dict(zip(COLUMNS, row, strict=True)) for row in rows],
        },
    )
    assert as_json.status_code == 201, as_json.text
    as_csv = client.post(
        "/v1/datasets",
        files={"file": ("e2e.csv", dataset_csv(rows), "text/csv")},
        data={"name": "e2e-csv"},
    )
    assert as_csv.status_code == 201, as_csv.text
    # Both formats give the same dataset: columns, kinds, counts of missing and distinct values.
    for uploaded in (as_json.json(), as_csv.json()):
        assert (uploaded["n_rows"], uploaded["n_columns"]) == (N_ROWS, len(COLUMNS))
    assert as_json.json()["columns"] == as_csv.json()["columns"]
    kinds = {column["name"]: column["kind"] for column in as_csv.json()["columns"]}
    assert kinds["colour"] == kinds["label"] == "categorical" and kinds["x"] == "numeric"
    return {Task.CLASSIFICATION: as_json.json()["id"], Task.REGRESSION: as_csv.json()["id"]}


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workflow]:
    with (
        serving(tmp_path_factory.mktemp("e2e-workflow")) as (base_url, processes),
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        run = Workflow(client=client, processes=processes)
        run.datasets = _upload(client, dataset_rows(N_ROWS))
        for method, task in PAIRS:
            response = client.post(
                "/v1/jobs",
                json={
                    "dataset_id": run.datasets[task],
                    "target": TARGETS[task],
                    "features": FEATURES,
                    "method": method,
                    "task": task.value,
                    "params": small_params(method, task),
                    "seed": 0,
                    "name": f"e2e-{method}-{task.value}",
                },
            )
            if response.status_code != 202:
                run.refused[(method, task)] = f"{response.status_code} {response.text}"
                continue
            assert response.headers["location"] == f"/v1/jobs/{response.json()['id']}"
            run.jobs[(method, task)] = response.json()["id"]
        run.submitted_at = time.monotonic()
        yield run


def test_methods_the_server_offers_are_the_catalog(workflow: Workflow) -> None:
    response = workflow.client.get("/v1/methods")

    assert response.status_code == 200
    offered = [(item["name"], tuple(item["tasks"])) for item in response.json()["items"]]
    assert offered == [(m.name, tuple(t.value for t in m.tasks)) for m in CATALOG.values()]


def _records(n: int = 6) -> list[dict[str, Any]]:
    """Feature records as a client sends them: some from the data, one odd one."""
    rows = dataset_rows(N_ROWS)[:n]
    records = [{name: row[COLUMNS.index(name)] for name in FEATURES} for row in rows]
    # A missing number, an unseen category and a feature left out are all missing values.
    records.append({"x": None, "colour": "purple"})
    return records


@pytest.mark.parametrize(("method", "task"), PAIRS, ids=[f"{m}-{t.value}" for m, t in PAIRS])
def test_train_inspect_and_predict(workflow: Workflow, method: str, task: Task) -> None:
    client = workflow.client
    job = workflow.finished(method, task)
    assert job["status"] == "succeeded", job["error"]
    assert (job["progress"], job["attempts"]) == (1.0, 1)

    # The model: what it was trained on and how well.
    response = client.get(f"/v1/models/{job['model_id']}")
    assert response.status_code == 200, response.text
    model = response.json()
    assert (model["method"], model["task"], model["job_id"]) == (method, task.value, job["id"])
    assert (model["dataset_id"], model["target"]) == (workflow.datasets[task], TARGETS[task])
    assert [feature["name"] for feature in model["features"]] == FEATURES
    metrics = model["metrics"]
    if task == Task.CLASSIFICATION:
        assert model["classes"] == ["no", "yes"]
        assert set(metrics["validation"]) >= {"accuracy", "log_loss", "roc_auc", "f1_macro"}
        # The label is a threshold on 2x + 1.5·[red] + 0.3z: learnable by every method.
        assert metrics["train"]["accuracy"] >= 0.7, metrics
    else:
        assert model["classes"] is None
        assert set(metrics["validation"]) >= {"rmse", "mae", "r2"}
        assert metrics["train"]["r2"] >= 0.5, metrics
    if "n_estimators" in small_params(method, task):
        assert model["params"]["n_estimators"] == 5

    # Predict: records with missing values and an unseen category.
    records = _records()
    url = f"/v1/models/{model['id']}/predict"
    # A labels-only classifier has a null log loss and refuses return_proba (docs/api.md: the
    # perceptron); the other classifiers the docs describe give probabilities.
    proba = task == Task.CLASSIFICATION and metrics["train"]["log_loss"] is not None
    if task == Task.CLASSIFICATION and method in PROBABILISTIC | {"perceptron"}:
        assert proba == (method != "perceptron"), metrics
    if task == Task.CLASSIFICATION and not proba:
        refused = client.post(url, json={"records": records, "return_proba": True})
        assert refused.status_code == 422, refused.text
    response = client.post(url, json={"records": records, "return_proba": proba})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["model_id"] == model["id"]
    assert len(answer["predictions"]) == len(records)
    if task == Task.CLASSIFICATION:
        assert answer["classes"] == model["classes"]
        assert set(answer["predictions"]) <= set(model["classes"])
    else:
        assert all(math.isfinite(value) for value in answer["predictions"])
    if proba:
        probabilities = answer["probabilities"]
        assert [len(row) for row in probabilities] == [2] * len(records)
        assert all(abs(sum(row) - 1) < 1e-6 for row in probabilities)
    else:
        assert answer["probabilities"] is None

    # Feature importance, of the method's default kind.
    response = client.get(f"/v1/models/{model['id']}/feature-importance")
    assert response.status_code == 200, response.text
    importance = response.json()
    assert importance["kind"] in expected_importance_kinds(method)
    assert sorted(f["name"] for f in importance["features"]) == sorted(FEATURES)
    values = [f["importance"] for f in importance["features"]]
    assert values == sorted(values, reverse=True)

    # Learning curves: 200 with the documented series, or 404 for a model without curves.
    response = client.get(f"/v1/models/{model['id']}/curves")
    expected = expected_curves(method, task)
    if expected == {}:
        assert response.status_code == 404, response.text
        return
    if expected is None and response.status_code == 404:
        return
    assert response.status_code == 200, response.text
    curves = response.json()
    n_points = len(curves["iterations"])
    assert n_points > 0 and curves["metric"]
    for series in ("train", "validation", "oob"):
        assert len(curves[series]) in (0, n_points), series
        if expected is not None:
            assert bool(curves[series]) == expected[series], (series, curves)


def test_delete_a_model(workflow: Workflow) -> None:
    client = workflow.client
    job = workflow.finished("random_forest", Task.CLASSIFICATION)
    model_id = job["model_id"]
    # Loaded into the server's model cache first, so deleting must drop it from there too.
    predict = {"records": _records(1)}
    assert client.post(f"/v1/models/{model_id}/predict", json=predict).status_code == 200

    assert client.delete(f"/v1/models/{model_id}").status_code == 204

    assert client.get(f"/v1/models/{model_id}").status_code == 404
    assert client.post(f"/v1/models/{model_id}/predict", json=predict).status_code == 404
    assert client.delete(f"/v1/models/{model_id}").status_code == 404
    listed = client.get("/v1/models", params={"method": "random_forest"}).json()["items"]
    assert model_id not in [item["id"] for item in listed]
    # The job that trained it stays, without its model.
    job = client.get(f"/v1/jobs/{job['id']}").json()
    assert (job["status"], job["model_id"]) == ("succeeded", None)
