"""Stand-in members whose labels the tests choose, so combiner tables can be worked by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.base import BaseEstimator, ClassifierMixin


class ColumnEcho(ClassifierMixin, BaseEstimator):
    """A member whose label for a row is that row's value in column ``column`` of X.

    Its labels do not depend on what it was fitted on, so the out-of-fold labels of a
    cross-validated fit are exactly the columns of X: the label matrix the test wrote down.
    """

    def __init__(self, column: int = 0) -> None:
        self.column = column

    def fit(self, X: Any, y: Any, sample_weight: Any = None, callbacks: Any = None) -> ColumnEcho:
        self.classes_ = np.unique(np.asarray(y))
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(X)[:, self.column].astype(np.int64)


@pytest.fixture
def echo_members() -> Callable[..., list[tuple[str, ColumnEcho]]]:
    """``echo_members(L)``: members m0 … m{L−1} echoing columns 0 … L−1; fitted on
    ``(X, y)`` when given, for ``prefit=True``."""

    def make(n_members: int, X: Any = None, y: Any = None) -> list[tuple[str, ColumnEcho]]:
        members = [(f"m{i}", ColumnEcho(i)) for i in range(n_members)]
        if X is not None:
            for _, member in members:
                member.fit(X, y)
        return members

    return make
