"""A forest's few plain rows take one compiled call (engine.ensemble._few_rows): the same bits
and the same errors as the general path, which everything else still takes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import (
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    load_model,
    save_model,
)
from engine.base import NotFittedError
from engine.ensemble import _few_rows
from engine.ensemble._few_rows import NUMERIC_ROWS_KEY, few_rows_mean_output


def _data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(n) < 0.1, 1] = np.nan
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    return X, y


def _general(model: Any, X: Any, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    with monkeypatch.context() as patch:
        patch.setattr(_few_rows, "MIN_ROWS_PER_THREAD", 0)  # no batch is few enough
        out: np.ndarray = model.predict_proba(X) if hasattr(model, "classes_") else model.predict(X)
        return out


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize(
    "model",
    [
        RandomForestClassifier(n_estimators=7, random_state=1),
        RandomForestRegressor(n_estimators=7, random_state=1),
        ExtraTreesRegressor(n_estimators=5, random_state=2),
    ],
    ids=lambda model: type(model).__name__,
)
@pytest.mark.parametrize("n_rows", [1, 2, 64, 500])
def test_few_rows_give_the_general_paths_bits(
    model: Any, n_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y = _data()
    model.fit(X, y)
    rows = np.ascontiguousarray(np.tile(X, (2, 1))[:n_rows])
    assert few_rows_mean_output(model, rows) is not None
    fast = model.predict_proba(rows) if hasattr(model, "classes_") else model.predict(rows)
    np.testing.assert_array_equal(_bits(fast), _bits(_general(model, rows, monkeypatch)))


@pytest.mark.parametrize(
    "rows",
    [
        lambda X: X[:3].tolist(),  # a list
        lambda X: X[:3].astype(np.float32),  # another dtype
        lambda X: np.asfortranarray(X[:3]),  # not C-contiguous
        lambda X: X[:6:2],  # a strided view
    ],
    ids=["list", "float32", "fortran", "strided"],
)
def test_other_inputs_take_the_general_path_with_the_same_answer(rows: Any) -> None:
    X, y = _data()
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    given = rows(X)
    assert few_rows_mean_output(forest, given) is None
    expected = forest.predict_proba(np.ascontiguousarray(np.asarray(given), dtype=np.float64))
    np.testing.assert_array_equal(_bits(forest.predict_proba(given)), _bits(expected))


def test_bad_rows_are_refused_as_before() -> None:
    X, y = _data()
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="infinity"):
        forest.predict(np.array([[1.0, np.inf, 0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="infinity"):
        forest.predict_proba(np.array([[1.0, 0.0, 0.0, 0.0, -np.inf]]))
    with pytest.raises(ValueError, match="4 features, but RandomForestClassifier"):
        forest.predict(np.zeros((1, 4)))
    with pytest.raises(ValueError, match="0 sample"):
        forest.predict(np.zeros((0, 5)))
    with pytest.raises(NotFittedError):
        RandomForestClassifier().predict(np.zeros((1, 5)))


def test_categorical_columns_are_encoded_on_the_general_path() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    X[:, 2] = rng.choice([10.0, 20.0, 30.0], size=300)
    y = (X[:, 0] + (X[:, 2] == 20.0) > 0.5).astype(int)
    forest = RandomForestClassifier(n_estimators=5, categorical_features=[2], random_state=0)
    forest.fit(X, y)
    assert forest.__dict__[NUMERIC_ROWS_KEY] is False
    assert few_rows_mean_output(forest, X[:1].copy()) is None
    expected = np.stack([tree.predict(forest._prepare(X[:1]))[0] for tree in forest.trees_])
    np.testing.assert_allclose(forest.predict_proba(X[:1])[0], expected.mean(axis=0))


def test_a_loaded_forest_stores_nothing_new_and_answers_the_same() -> None:
    X, y = _data()
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    before = forest.predict_proba(X[:1])
    stored = save_model(forest)
    assert NUMERIC_ROWS_KEY.encode() not in stored
    loaded = load_model(stored)
    assert NUMERIC_ROWS_KEY not in loaded.__dict__
    first, second = loaded.predict_proba(X[:1]), loaded.predict_proba(X[:1])
    assert loaded.__dict__[NUMERIC_ROWS_KEY] is True
    np.testing.assert_array_equal(_bits(first), _bits(before))
    np.testing.assert_array_equal(_bits(second), _bits(before))
