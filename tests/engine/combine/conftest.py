"""Small data sets shared by the combiner tests (a few hundred rows: fits take milliseconds)."""

from __future__ import annotations

import numpy as np
import pytest


def classification_data(
    n_classes: int = 2, n: int = 240, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] ** 2 + rng.normal(scale=0.6, size=n)
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(score, edges)


@pytest.fixture
def binary() -> tuple[np.ndarray, np.ndarray]:
    return classification_data(2)


@pytest.fixture
def multiclass() -> tuple[np.ndarray, np.ndarray]:
    return classification_data(3)


@pytest.fixture
def regression() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    return X, 2 * X[:, 0] - X[:, 1] + np.sin(2 * X[:, 2]) + rng.normal(scale=0.3, size=200)
