"""Real fitted models survive save_model/load_model bit for bit, and damaged bytes never load.

The container format itself is tested exhaustively in test_persistence.py with a synthetic
model; this module checks the engine's own estimators end to end: every public estimator,
with missing values and categorical splits in play.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import engine
from engine import ModelFormatError, load_model, model_manifest, save_model


def _classification_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 5))
    X[:, 4] = rng.integers(0, 6, size=300)  # a categorical column
    y = ((X[:, 0] + np.isin(X[:, 4], [1, 4])) > 0.5).astype(int)
    X[rng.random(300) < 0.15, 1] = np.nan
    return X, y


def _regression_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 4))
    X[rng.random(300) < 0.1, 2] = np.nan
    return X, X[:, 0] * 2.0 + np.sin(X[:, 1]) + rng.normal(scale=0.1, size=300)


CLASSIFIERS: list[Any] = [
    engine.DecisionTreeClassifier(categorical_features=[4]),
    engine.DecisionTreeClassifier(max_leaf_nodes=8),
    engine.RandomForestClassifier(n_estimators=8, oob_score=True, categorical_features=[4]),
    engine.ExtraTreesClassifier(n_estimators=8),
    engine.BaggingClassifier(n_estimators=5, max_features=0.6, voting="hard"),
]
REGRESSORS: list[Any] = [
    engine.DecisionTreeRegressor(max_depth=5),
    engine.RandomForestRegressor(n_estimators=8, oob_score=True),
    engine.ExtraTreesRegressor(n_estimators=8),
    engine.BaggingRegressor(n_estimators=5),
]


def _output(model: Any, X: np.ndarray) -> np.ndarray:
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


@pytest.mark.parametrize("model", CLASSIFIERS + REGRESSORS, ids=repr)
def test_round_trip_predicts_bit_identically(model: Any) -> None:
    X, y = _classification_data() if model in CLASSIFIERS else _regression_data()
    fitted = model.set_params(random_state=0).fit(X, y)
    fitted.predict(X[:3])  # warm any prediction cache, which must not be persisted
    restored = load_model(save_model(fitted))
    assert type(restored) is type(fitted)
    assert restored.get_params(deep=False).keys() == fitted.get_params(deep=False).keys()
    np.testing.assert_array_equal(_output(restored, X), _output(fitted, X))
    np.testing.assert_array_equal(restored.feature_importances_, fitted.feature_importances_)


def test_manifest_names_the_class_without_building_the_model() -> None:
    X, y = _classification_data()
    data = save_model(engine.RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y))
    manifest = model_manifest(data)
    assert manifest["class"] == "engine.ensemble._forest.RandomForestClassifier"
    assert manifest["total_nbytes"] == len(data)


def test_flipped_bytes_of_a_real_forest_never_load() -> None:
    X, y = _classification_data()
    data = save_model(engine.RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y))
    rng = np.random.default_rng(0)
    # 400 single-byte flips spread over the whole file (header, manifest, arrays, digest):
    # the SHA-256 trailer makes every one of them detectable.
    for position in rng.choice(len(data), size=400, replace=False):
        damaged = bytearray(data)
        damaged[position] ^= 1 << int(rng.integers(8))
        with pytest.raises(ModelFormatError):
            load_model(bytes(damaged))


def test_truncated_real_model_never_loads() -> None:
    X, y = _regression_data()
    data = save_model(engine.DecisionTreeRegressor(max_depth=3).fit(X, y))
    for cut in np.linspace(0, len(data) - 1, 200).astype(int):
        with pytest.raises(ModelFormatError):
            load_model(data[:cut])
