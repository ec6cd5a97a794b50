"""``client.batch_predict`` against a real server: the job-like object, its result as a
``Dataset``, values equal to ``model.predict``; a failure and a cancel raise as a job's do."""

from __future__ import annotations

import numpy as np
import pytest

from coppice import BatchPrediction, Client, ConflictError, Dataset, Model, NotFoundError
from tests.client.helpers import churn_frame


def test_batch_predict_returns_the_scored_dataset(client: Client, churn_model: Model) -> None:
    frame = churn_frame(90, seed=5)
    frame.insert(0, "customer", [f"c{i}" for i in range(len(frame))])
    dataset = client.upload(frame.drop(columns=["monthly"]), name="to score")

    batch = churn_model.batch_predict(dataset, keep_columns=["customer"], return_proba=True)

    assert isinstance(batch, BatchPrediction) and batch.model_id == churn_model.id
    output = batch.wait(progress=False, timeout=300)
    assert isinstance(output, Dataset) and output.n_rows == 90
    scored = output.to_pandas()
    assert list(scored.columns) == ["customer", "prediction", "proba_no", "proba_yes"]
    assert scored["customer"].tolist() == frame["customer"].tolist()
    features = frame[["age", "plan"]]  # "monthly" is missing in every row, as in the batch
    assert scored["prediction"].tolist() == list(churn_model.predict(features))
    proba = np.asarray(churn_model.predict_proba(features))
    assert scored["proba_yes"].to_numpy() == pytest.approx(proba[:, 1])
    assert batch.metrics is not None and 0 <= batch.metrics["accuracy"] <= 1
    assert any("'monthly'" in note for note in batch.notes)
    assert batch.id in [b.id for b in client.batch_predictions(model_id=churn_model.id)]
    assert client.batch_prediction(batch.id).output_dataset_id == output.id


def test_bad_references_raise_and_an_ended_batch_cannot_be_cancelled(
    client: Client, churn_model: Model
) -> None:
    dataset = client.upload(churn_frame(20, seed=6), name="small")
    with pytest.raises(NotFoundError):
        client.batch_predict("nobody@production", dataset)
    batch = client.batch_predict(churn_model.id, dataset.id)
    batch.wait(timeout=300)
    with pytest.raises(ConflictError):
        batch.cancel()
