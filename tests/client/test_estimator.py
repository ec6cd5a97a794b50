"""``RemoteEstimator`` in scikit-learn's own tools, trained and called on a real server."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from coppice import Client, RemoteEstimator
from coppice.estimator import NotFittedError

FOREST = {"n_estimators": 8, "max_depth": 4}


def _blobs(n: int = 90, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two features, three integer classes that the features separate well."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    features = labels[:, None] * 3.0 + rng.normal(0, 0.6, (n, 2))
    return features, labels


def test_clone_gives_an_unfitted_copy_with_its_own_client(server_url: str) -> None:
    client = Client(server_url)
    client.datasets()  # a live connection pool, which must not be copied
    estimator = RemoteEstimator(client=client, method="random_forest", params=FOREST, seed=3)

    twin = clone(estimator)

    assert twin.get_params(deep=False).keys() == estimator.get_params(deep=False).keys()
    assert twin.client is not client and twin.client.url == client.url
    assert twin.params == FOREST and twin.params is not FOREST
    assert not hasattr(twin, "model_id_")
    with pytest.raises(NotFittedError):
        twin.predict(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="invalid parameter"):
        twin.set_params(n_estimators=3)


def test_fit_predict_and_probabilities_keep_the_callers_labels(server_url: str) -> None:
    X, y = _blobs()
    estimator = RemoteEstimator(
        client=Client(server_url), method="random_forest", params=FOREST, seed=0
    )

    estimator.fit(X, y)

    assert is_classifier(estimator) and estimator.task_ == "classification"
    assert list(estimator.classes_) == [0, 1, 2] and estimator.n_features_in_ == 2
    predicted = estimator.predict(X)
    assert predicted.dtype == y.dtype and set(predicted) <= {0, 1, 2}
    assert estimator.score(X, y) > 0.8
    probabilities = estimator.predict_proba(X[:5])
    assert probabilities.shape == (5, 3)
    # Columns follow classes_, so the arg-max is the predicted label.
    assert list(estimator.classes_[probabilities.argmax(axis=1)]) == list(predicted[:5])
    # A fitted estimator pickles (joblib sends estimators to its worker processes).
    assert list(pickle.loads(pickle.dumps(estimator)).predict(X[:5])) == list(predicted[:5])
    assert copy.deepcopy(estimator).model_id_ == estimator.model_id_


def test_cross_val_score_in_a_pipeline(server_url: str) -> None:
    X, y = _blobs(60, seed=1)
    pipeline = make_pipeline(
        StandardScaler(),
        RemoteEstimator(
            client=Client(server_url),
            method="random_forest",
            params=FOREST,
            task="classification",
            seed=0,
        ),
    )

    scores = cross_val_score(pipeline, X, y, cv=3)

    assert scores.shape == (3,) and scores.mean() > 0.7


def test_a_dataframe_with_categories_trains_a_regressor(server_url: str) -> None:
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"size": rng.uniform(1, 5, 80), "city": rng.choice(["a", "b"], 80)})
    target = frame["size"] * 10 + (frame["city"] == "b") * 5 + rng.normal(0, 0.1, 80)
    estimator = RemoteEstimator(
        client=Client(server_url), method="xgboost", params={"n_estimators": 30}
    )

    estimator.fit(frame, target)

    assert is_regressor(estimator) and estimator.task_ == "regression"
    assert list(estimator.feature_names_in_) == ["size", "city"]
    assert estimator.model_.features == ["size", "city"]
    # Columns are matched by name, whatever their order.
    predicted = estimator.predict(frame[["city", "size"]])
    assert predicted.dtype == np.float64 and estimator.score(frame, target) > 0.9
    with pytest.raises(AttributeError):
        estimator.predict_proba(frame)
