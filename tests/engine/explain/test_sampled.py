"""Sampled Shapley values: efficiency by construction, and convergence to the exact values.

The reference is the interventional game itself, enumerated: ``v(S)`` is the mean over the
background rows of the model at ``x`` on ``S`` and the background row elsewhere, and the
Shapley value sums every coalition's marginal contribution with its weight.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine import (
    BKSCombiner,
    DecisionTreeClassifier,
    GradingClassifier,
    KNeighborsClassifier,
    KNeighborsRegressor,
    LogisticRegression,
    MixtureOfExpertsRegressor,
    RegionBoostClassifier,
    VotingClassifier,
    explain,
    load_model,
    save_model,
)
from engine.explain import BACKGROUND_SIZE
from engine.explain._api import describe
from engine.explain._sampling import sampled_shapley


def data(n: int = 200, p: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    target = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 0]
    return X, (target > 0).astype(int), target


def brute_force_shapley(
    output: Callable[[np.ndarray], np.ndarray], x: np.ndarray, background: np.ndarray
) -> np.ndarray:
    """Exact interventional Shapley values of one row over every coalition, shape (p, m)."""
    p = x.size
    value = {}
    for size in range(p + 1):
        for coalition in itertools.combinations(range(p), size):
            rows = background.copy()
            rows[:, list(coalition)] = x[list(coalition)]
            value[coalition] = output(rows).mean(axis=0)
    phi = np.zeros((p, value[()].size))
    for j in range(p):
        others = [k for k in range(p) if k != j]
        for size in range(p):
            weight = math.factorial(size) * math.factorial(p - size - 1) / math.factorial(p)
            for coalition in itertools.combinations(others, size):
                with_j = tuple(sorted((*coalition, j)))
                phi[j] += weight * (value[with_j] - value[coalition])
    return phi


def test_converges_to_the_enumerated_shapley_values_of_k_nn() -> None:
    X, y, _ = data()
    model = KNeighborsClassifier(n_neighbors=7).fit(X, y)
    output = describe(model).output
    background = X[::20]  # 10 rows, so 2000 pairs cycle through them a whole number of times
    rows = X[:5]
    exact = np.stack([brute_force_shapley(output, x, background) for x in rows])

    n_pairs = 2000
    phi, bias = sampled_shapley(output, rows, background, n_permutations=2 * n_pairs)

    # Each pair's mean marginal contribution of a probability lies in [−1, 1], so Hoeffding
    # bounds P(|error| ≥ t) by 2·exp(−n_pairs·t²/2): 9e-5 per value for t = 0.1 and 2000
    # pairs, 2e-3 over the 20 values checked. The background cycles are complete, so the
    # efficiency step moves nothing and the estimate stays unbiased.
    np.testing.assert_allclose(phi, exact, atol=0.1)
    assert np.abs(phi - exact).mean() < 0.02
    np.testing.assert_allclose(bias, output(background).mean(axis=0))


@pytest.mark.parametrize(("n_background", "n_permutations", "uses"), [(100, 64, 1), (10, 40, 4)])
def test_every_walk_starts_from_its_own_background_row(
    n_background: int, n_permutations: int, uses: int
) -> None:
    """Each order walks from a background row of its own, in a shuffled cycle: 64 orders see
    64 of 100 rows (a pair of an order and its reverse sharing one row saw 32), and a whole
    number of cycles sees every row equally often."""
    rng = np.random.default_rng(0)
    p = 4
    background = rng.normal(size=(n_background, p))
    x = np.full((1, p), 1000.0)  # a value no background row holds marks x's features
    starts: list[int] = []

    def output(rows: np.ndarray) -> np.ndarray:
        for row in rows:
            if np.count_nonzero(row == 1000.0) == 1:  # a walk's first step: z but one feature
                kept = row != 1000.0
                match = np.all(background[:, kept] == row[kept], axis=1)
                starts.append(int(np.flatnonzero(match)[0]))
        return np.asarray(rows.sum(axis=1, keepdims=True), dtype=np.float64)

    sampled_shapley(output, x, background, n_permutations=n_permutations)

    assert len(starts) == n_permutations
    counts = np.bincount(starts, minlength=n_background)
    assert np.count_nonzero(counts) == min(n_permutations, n_background)
    assert counts.max() == uses


def test_default_sample_count_correlates_with_the_exact_values() -> None:
    X, _, target = data()
    model = KNeighborsRegressor(n_neighbors=7).fit(X, target)
    output = describe(model).output
    background = X[::10]
    rows = X[:20]
    exact = np.stack([brute_force_shapley(output, x, background) for x in rows])

    phi = explain(model, rows, background=background).contributions

    assert np.corrcoef(phi.ravel(), exact[:, :, 0].ravel())[0, 1] >= 0.95


MODELS: dict[str, Callable[[], Any]] = {
    "k_neighbors": lambda: KNeighborsClassifier(),
    "hard_voting": lambda: VotingClassifier(
        [("tree", DecisionTreeClassifier(max_depth=3)), ("logistic", LogisticRegression())]
    ),
    "grading": lambda: GradingClassifier(
        [("tree", DecisionTreeClassifier(max_depth=3)), ("logistic", LogisticRegression())], cv=2
    ),
    "bks": lambda: BKSCombiner(
        [("tree", DecisionTreeClassifier(max_depth=3)), ("logistic", LogisticRegression())], cv=2
    ),
    "region_boost": lambda: RegionBoostClassifier(n_estimators=5, random_state=0),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sampled_explanations_add_up_to_the_output(name: str) -> None:
    X, y, _ = data(n=300)
    model = MODELS[name]().fit(X, y)

    explanation = explain(model, X[:6], n_permutations=8)

    assert explanation.method == "sampled" and explanation.output == "probability"
    total = explanation.contributions.sum(axis=1) + explanation.bias
    np.testing.assert_allclose(total, model.predict_proba(X[:6])[:, 1], rtol=0, atol=1e-9)
    background = describe(model).background
    assert background is not None and background.shape == (BACKGROUND_SIZE, 4)


def test_multiclass_and_regression_shapes() -> None:
    X, _, target = data()
    labels = np.digitize(target, [-0.5, 0.5])
    classifier = KNeighborsClassifier().fit(X, labels)
    regressor = MixtureOfExpertsRegressor(n_experts=2, random_state=0).fit(X, target)

    multi = explain(classifier, X[:3], n_permutations=4)
    reg = explain(regressor, X[:3], n_permutations=4)

    assert multi.contributions.shape == (3, 4, 3) and np.shape(multi.bias) == (3,)
    np.testing.assert_allclose(
        multi.contributions.sum(axis=1) + multi.bias, classifier.predict_proba(X[:3]), atol=1e-9
    )
    assert reg.contributions.shape == (3, 4) and isinstance(reg.bias, float)
    np.testing.assert_allclose(reg.contributions.sum(axis=1) + reg.bias, regressor.predict(X[:3]))


def test_a_row_is_explained_the_same_alone_and_in_a_batch_and_after_saving() -> None:
    X, y, _ = data()
    model = MODELS["hard_voting"]().fit(X, y)

    batch = explain(model, X[:6]).contributions
    alone = explain(model, X[4:5]).contributions
    loaded = explain(load_model(save_model(model)), X[:6]).contributions

    np.testing.assert_allclose(alone[0], batch[4], atol=1e-12)
    np.testing.assert_array_equal(loaded, batch)


def test_one_feature_takes_the_whole_difference() -> None:
    X, y, _ = data()
    X = X[:, :1]
    model = KNeighborsClassifier().fit(X, y)

    explanation = explain(model, X[:4])

    np.testing.assert_allclose(
        explanation.contributions[:, 0] + explanation.bias, model.predict_proba(X[:4])[:, 1]
    )


def test_a_model_without_background_rows_is_refused_clearly() -> None:
    X, y, _ = data()
    model = MODELS["hard_voting"]().fit(X, y)
    del model.background_

    with pytest.raises(ValueError, match="kept no background rows"):
        explain(model, X[:2])
    assert explain(model, X[:2], background=X[:10]).method == "sampled"


def test_background_rows_are_training_rows_of_positive_weight() -> None:
    X, y, _ = data(n=300)
    weights = np.where(np.arange(300) % 2 == 0, 1.0, 0.0)
    model = MODELS["hard_voting"]().fit(X, y, sample_weight=weights)

    chosen = {tuple(row) for row in model.background_}

    assert len(chosen) == BACKGROUND_SIZE
    assert chosen <= {tuple(row) for row in X[::2]}
