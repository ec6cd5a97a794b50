"""``Client`` against a real ``coppice serve``: uploads of every kind, listings, training,
progress, and the server's errors as exceptions carrying its detail."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest

from coppice import (
    Client,
    ConflictError,
    ConnectionFailedError,
    JobFailedError,
    Model,
    NotFoundError,
    ValidationError,
)
from tests.client.conftest import churn_frame, write_csv
from tests.e2e.processes import free_port


def _kinds(dataset_columns: list[dict[str, object]]) -> dict[str, object]:
    return {str(c["name"]): c["kind"] for c in dataset_columns}


def test_upload_a_csv_file_with_forced_categories(client: Client, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "churn.csv", churn_frame(50))

    dataset = client.upload(path, categorical=["age"])

    assert dataset.name == "churn.csv"
    assert (dataset.n_rows, dataset.n_columns) == (50, 4)
    assert _kinds(dataset.columns) == {
        "age": "categorical",
        "plan": "categorical",
        "monthly": "numeric",
        "churned": "categorical",
    }


def test_upload_a_dataframe_keeps_kinds_and_missing_values(client: Client) -> None:
    frame = churn_frame(30)
    frame["code"] = ["007", "7", "0.50"] * 10  # text that looks like numbers stays text

    dataset = client.upload(frame, name="frame")

    columns = {c["name"]: c for c in dataset.columns}
    assert dataset.n_rows == 30
    assert columns["code"]["kind"] == "categorical" and columns["code"]["n_unique"] == 3
    assert columns["monthly"]["n_missing"] == frame["monthly"].isna().sum()
    assert columns["age"]["kind"] == "numeric"


def test_upload_an_array_with_column_names(client: Client) -> None:
    array = np.array([[1.5, np.nan], [2.0, 3.0], [0.1 + 0.2, 1e-300]])

    dataset = client.upload(array, columns=["a", "b"], name="array")

    assert _kinds(dataset.columns) == {"a": "numeric", "b": "numeric"}
    assert {c["name"]: c["n_missing"] for c in dataset.columns} == {"a": 0, "b": 1}
    with pytest.raises(ValueError, match="columns"):
        client.upload(array)


def test_upload_records(client: Client) -> None:
    records = [{"x": 1.0, "colour": "red"}, {"x": float("nan"), "colour": None}, {"x": 2}]

    dataset = client.upload(records, name="records")

    assert dataset.n_rows == 3
    assert {c["name"]: c["n_missing"] for c in dataset.columns} == {"x": 1, "colour": 2}


def test_list_show_and_delete_datasets(client: Client) -> None:
    dataset = client.upload([{"x": 1.0}, {"x": 2.0}], name="to-delete")

    page = client.datasets(limit=2)
    assert page.total >= 1 and len(page) <= 2
    assert page[0].id == dataset.id  # newest first
    assert client.dataset(dataset.id).columns[0]["name"] == "x"

    dataset.delete()
    with pytest.raises(NotFoundError, match=dataset.id):
        client.dataset(dataset.id)


def test_methods_lists_every_method_with_its_schema(client: Client) -> None:
    methods = {m["name"]: m for m in client.methods()}
    assert {"random_forest", "xgboost", "gradient_boosting"} <= set(methods)
    assert "n_estimators" in methods["random_forest"]["params_schema"]["properties"]


def test_train_waits_with_a_progress_bar_and_returns_the_model(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = client.upload(churn_frame(120), name="progress")
    job = client.train(
        dataset,
        target="churned",
        method="gradient_boosting",
        params={"n_estimators": 15, "max_depth": 2},
        name="progress-job",
    )
    assert job.status in ("queued", "running", "succeeded")

    model = job.wait(progress=True, timeout=120)

    bar = capsys.readouterr().err
    assert "succeeded" in bar and "100%" in bar, bar
    assert isinstance(model, Model) and model.id == job.model_id
    assert model.method == "gradient_boosting" and model.classes == ["no", "yes"]
    assert set(model.metrics) == {"train", "validation", "oob", "cv"}
    assert client.job(job.id).status == "succeeded"
    assert job.id in [j.id for j in client.jobs(status="succeeded")]
    assert model.id in [m.id for m in client.models(method="gradient_boosting")]


def test_a_failed_job_raises_with_the_servers_reason(client: Client) -> None:
    # One row of class "a": the fold that holds it trains on "b" alone, which the worker
    # (not the request's checks) finds.
    records = [{"x": float(i), "y": "a" if i == 0 else "b"} for i in range(10)]
    dataset = client.upload(records, name="one-class-fold")
    job = client.train(dataset, target="y", method="decision_tree", validation={"folds": 2})

    with pytest.raises(JobFailedError) as failure:
        job.wait(timeout=60)

    assert failure.value.code == "one_class"
    assert job.id in str(failure.value)


def test_cancel_a_job_then_cancelling_again_is_a_conflict(client: Client) -> None:
    dataset = client.upload(churn_frame(200), name="cancel")
    job = client.train(
        dataset, target="churned", method="gradient_boosting", params={"n_estimators": 5000}
    )

    job.cancel()
    with pytest.raises(Exception, match="cancelled"):
        job.wait(timeout=60)

    assert job.status == "cancelled"
    with pytest.raises(ConflictError, match="already ended"):
        job.cancel()


def test_errors_carry_the_servers_detail(client: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.model("no-such-model")
    assert missing.value.status == 404
    assert "no-such-model" in str(missing.value) and missing.value.detail == str(missing.value)

    dataset = client.upload([{"x": 1.0, "y": "a"}, {"x": 2.0, "y": "b"}], name="bad-params")
    with pytest.raises(ValidationError) as invalid:
        client.train(dataset, target="y", method="random_forest", params={"n_trees": 3})
    assert invalid.value.status == 422
    assert "n_trees" in str(invalid.value)
    assert invalid.value.problem["status"] == 422


def test_an_unreachable_server_fails_after_retrying_reads_only(tmp_path: Path) -> None:
    dead = Client(f"http://127.0.0.1:{free_port()}", max_retries=2)

    with pytest.raises(ConnectionFailedError, match="cannot reach"):
        dead.datasets()
    # Not retried: a repeat could create a second dataset.
    with pytest.raises(ConnectionFailedError):
        dead.upload([{"x": 1.0}])


def test_a_client_copies_and_pickles_as_its_settings(server_url: str) -> None:
    client = Client(server_url, api_key="secret", max_retries=1)
    client.datasets()  # opens the connection pool, which must not be copied

    for twin in (copy.deepcopy(client), pickle.loads(pickle.dumps(client))):
        assert twin.url == client.url and twin._transport.api_key == "secret"
        assert twin._transport._http is None
        assert twin.datasets().total == client.datasets().total


def test_url_and_key_come_from_the_environment(
    server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPPICE_URL", server_url + "/")
    monkeypatch.setenv("COPPICE_API_KEY", "from-env")

    client = Client()

    assert client.url == server_url
    assert client._transport.http.headers["Authorization"] == "Bearer from-env"
    assert isinstance(client.datasets().total, int)
