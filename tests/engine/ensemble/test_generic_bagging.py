"""Bagging of members that are not decision trees (the generic path)."""

from __future__ import annotations

import numpy as np

from engine import BaggingClassifier, GradientBoostingClassifier


def test_members_on_a_subspace_see_their_categorical_columns_renumbered() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    X[:, 5] = rng.integers(0, 4, 300)
    y = (np.isin(X[:, 5], [1, 2]) ^ (X[:, 0] > 0)).astype(int)
    model = BaggingClassifier(
        GradientBoostingClassifier(n_estimators=5, categorical_features=[5]),
        n_estimators=6,
        max_features=0.67,
        random_state=0,
    ).fit(X, y)
    for features, member in zip(model.estimators_features_, model.estimators_, strict=True):
        expected = [int(np.flatnonzero(features == 5)[0])] if 5 in features else []
        assert member.categorical_features == expected
        assert member.bin_mapper_.is_categorical_.tolist() == [
            position in expected for position in range(len(features))
        ]
