"""Bias–variance decomposition: exact identities, Domingos by hand, and the textbook claims.

Bagging lowers the variance and leaves the bias (Breiman 1996); boosting lowers the bias, so
stumps combine into a low-bias model (Hastie, Tibshirani and Friedman 2009, ch. 10); expected
error = bias² + variance + noise (Geman, Bienenstock and Doursat 1992). The variance of an
average of B members of variance σ² with pairwise correlation ρ is ρσ² + (1 − ρ)σ²/B
(Hastie, Tibshirani and Friedman 2009, eq. 15.1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine import (
    AdaBoostClassifier,
    BaggingRegressor,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from engine.callbacks import ProgressEvent, TrainingInterrupted
from engine.diagnostics import (
    SquaredLossDecomposition,
    ZeroOneLossDecomposition,
    bias_variance_decomposition,
    squared_loss_decomposition,
    zero_one_loss_decomposition,
)

N_ROUNDS = 20


def _truth(X: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * X[:, 0]) + X[:, 1] ** 2


def _regression(seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (150, 2))
    X_test = rng.uniform(-1.0, 1.0, (80, 2))
    y = _truth(X) + rng.normal(0.0, 0.3, 150)
    y_test = _truth(X_test) + rng.normal(0.0, 0.3, 80)
    return X, y, X_test, y_test


# -- the identities, on prediction matrices --------------------------------------------------


def test_squared_identity_holds_to_float_precision() -> None:
    rng = np.random.default_rng(1)
    predictions = rng.normal(2.0, 1.5, (30, 40))
    y = rng.normal(2.0, 1.0, 40)
    noise_free = y + rng.normal(0.0, 0.5, 40)
    plain = squared_loss_decomposition(predictions, y)
    # Algebraically exact; the only error is rounding in sums of ~1e3 terms of size ~1.
    assert plain.expected_loss == pytest.approx(plain.bias_squared + plain.variance, rel=1e-12)
    assert plain.noise is None and plain.cross_term is None
    full = squared_loss_decomposition(predictions, y, y_noise_free=noise_free)
    assert full.noise is not None and full.cross_term is not None
    total = full.bias_squared + full.variance + full.noise + full.cross_term
    assert full.expected_loss == pytest.approx(total, rel=1e-12)
    assert full.variance == plain.variance  # the variance never involves the targets


def test_squared_decomposition_by_hand() -> None:
    # Two test rows, three rounds. Row 0: predictions 1, 2, 3 around target 0 -> mean 2,
    # bias² 4, variance 2/3. Row 1: 5, 5, 5 against 5 -> no bias, no variance.
    result = squared_loss_decomposition([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]], [0.0, 5.0])
    assert result.bias_squared == pytest.approx((4.0 + 0.0) / 2)
    assert result.variance == pytest.approx((2.0 / 3.0 + 0.0) / 2)
    assert result.expected_loss == pytest.approx(((1 + 4 + 9) / 3 + 0.0) / 2)
    np.testing.assert_array_equal(result.main_prediction, [2.0, 5.0])
    assert (result.n_rounds, result.n_test) == (3, 2)


def test_domingos_on_a_hand_made_prediction_matrix() -> None:
    # Columns are test rows, rows are rounds (five refits).
    predictions = np.array(
        [
            [0, 0, 2, 0],
            [0, 0, 2, 0],
            [0, 0, 2, 1],
            [1, 1, 2, 1],
            [1, 2, 2, 2],
        ]
    )
    y = np.array([0, 1, 2, 1])
    result = zero_one_loss_decomposition(predictions, y)
    # Row 0: mode 0 = y, unbiased, V = 2/5, loss 2/5.
    # Row 1: mode 0 ≠ 1, biased, V = 2/5; of the 2 off-mode votes 1 is right: loss
    #        1 − 1/5 = 4/5 = B − (1/2)·V.
    # Row 2: unanimous and right: nothing.
    # Row 3: 0 and 1 tie at two votes; the tie goes to the smaller label 0 ≠ 1: biased,
    #        V = 3/5, 2 of 3 off-mode votes right: loss 1 − 2/5 = 3/5 = B − (2/3)·V.
    np.testing.assert_array_equal(result.main_prediction, [0, 0, 2, 0])
    assert result.bias == pytest.approx(2 / 4)
    assert result.variance == pytest.approx((0.4 + 0.4 + 0.0 + 0.6) / 4)
    assert result.unbiased_variance == pytest.approx(0.4 / 4)
    assert result.biased_variance == pytest.approx((0.4 + 0.6) / 4)
    assert result.net_variance == pytest.approx(0.1 - (0.5 * 0.4 + (2 / 3) * 0.6) / 4)
    assert result.expected_loss == pytest.approx((0.4 + 0.8 + 0.0 + 0.6) / 4)
    assert result.expected_loss == pytest.approx(result.bias + result.net_variance, abs=1e-15)


def test_domingos_two_classes_net_variance_is_unbiased_minus_biased() -> None:
    rng = np.random.default_rng(2)
    predictions = np.where(rng.random((25, 60)) < 0.3, "no", "yes")
    y = np.where(rng.random(60) < 0.5, "no", "yes")
    result = zero_one_loss_decomposition(predictions, y)
    assert result.net_variance == pytest.approx(
        result.unbiased_variance - result.biased_variance, abs=1e-15
    )
    assert result.expected_loss == pytest.approx(result.bias + result.net_variance, abs=1e-15)
    assert result.variance == pytest.approx(
        result.unbiased_variance + result.biased_variance, abs=1e-15
    )
    assert result.expected_loss == pytest.approx(np.mean(predictions != y), abs=1e-15)


def test_variance_of_an_average_of_correlated_members() -> None:
    """Var(mean of B members) = ρσ² + (1 − ρ)σ²/B (Hastie et al. 2009, eq. 15.1), by simulation.

    Each "round" draws B members m_b = σ(√ρ·Z + √(1−ρ)·ε_b) per test row (pairwise
    correlation ρ, variance σ²) and predicts their average.
    """
    rng = np.random.default_rng(3)
    n_rounds, n_test, B, rho, sigma = 4000, 5, 10, 0.4, 2.0
    shared = rng.normal(size=(n_rounds, 1, n_test))
    own = rng.normal(size=(n_rounds, B, n_test))
    members = sigma * (math.sqrt(rho) * shared + math.sqrt(1.0 - rho) * own)
    result = squared_loss_decomposition(members.mean(axis=1), np.zeros(n_test))
    expected = rho * sigma**2 + (1.0 - rho) * sigma**2 / B
    # The estimate pools 5 × 4000 normal draws: relative standard error √(2/20000) ≈ 1 %;
    # 5 % is five standard errors. A plain average of independent members (ρ = 0) would
    # give 0.4, the members themselves 4.0, so the tolerance separates the formula.
    assert result.variance == pytest.approx(expected, rel=0.05)


# -- bootstrap rounds on real learners --------------------------------------------------------


@pytest.mark.parametrize(
    "ensemble",
    [
        BaggingRegressor(n_estimators=10),
        RandomForestRegressor(n_estimators=10, max_features=0.5),
    ],
    ids=["bagging", "random_forest"],
)
def test_bagging_lowers_variance_and_leaves_bias(ensemble: object) -> None:
    X, y, X_test, y_test = _regression()
    kwargs = dict(X_test=X_test, y_test=y_test, y_noise_free=_truth(X_test), n_rounds=N_ROUNDS)
    tree = bias_variance_decomposition(DecisionTreeRegressor(), X, y, random_state=0, **kwargs)
    bagged = bias_variance_decomposition(ensemble, X, y, random_state=0, **kwargs)
    assert isinstance(tree, SquaredLossDecomposition)
    assert isinstance(bagged, SquaredLossDecomposition)
    # Here 0.105 -> 0.032 (both); over other data seeds the ratio stayed within 0.30–0.47.
    assert bagged.variance < 0.6 * tree.variance
    # "Does nothing to the bias": within a factor of two here (bagging smooths a little,
    # and the tree's bias² estimate carries an extra variance/R) ...
    assert 0.5 * tree.bias_squared < bagged.bias_squared < 1.25 * tree.bias_squared
    # ... and the error bagging removes is mostly variance.
    variance_drop = tree.variance - bagged.variance
    assert variance_drop > 2.0 * abs(tree.bias_squared - bagged.bias_squared)
    assert bagged.noise == tree.noise  # same test set, same noise


def test_boosting_stumps_lowers_bias_squared_loss() -> None:
    X, y, X_test, y_test = _regression(1)
    kwargs = dict(
        X_test=X_test,
        y_test=y_test,
        y_noise_free=_truth(X_test),
        n_rounds=N_ROUNDS,
        random_state=0,
    )
    stump = bias_variance_decomposition(DecisionTreeRegressor(max_depth=1), X, y, **kwargs)
    boosted = bias_variance_decomposition(
        GradientBoostingRegressor(max_depth=1, n_estimators=40, learning_rate=0.3),
        X,
        y,
        **kwargs,
    )
    # Here 0.22 -> 0.043; over six other data seeds 0.13–0.20 -> 0.017–0.029.
    assert boosted.bias_squared < 0.5 * stump.bias_squared


def test_adaboost_lowers_the_bias_of_a_stump_zero_one_loss() -> None:
    rng = np.random.default_rng(2)
    X = rng.uniform(-1.0, 1.0, (150, 2))
    X_test = rng.uniform(-1.0, 1.0, (80, 2))
    # A diagonal boundary: no single axis-aligned split fits it, a staircase of stumps does.
    y = np.where(X[:, 0] + X[:, 1] > 0, "pos", "neg")
    y_test = np.where(X_test[:, 0] + X_test[:, 1] > 0, "pos", "neg")
    kwargs = dict(X_test=X_test, y_test=y_test, loss="0-1", n_rounds=N_ROUNDS, random_state=0)
    stump = bias_variance_decomposition(DecisionTreeClassifier(max_depth=1), X, y, **kwargs)
    boosted = bias_variance_decomposition(AdaBoostClassifier(n_estimators=30), X, y, **kwargs)
    assert isinstance(stump, ZeroOneLossDecomposition)
    assert isinstance(boosted, ZeroOneLossDecomposition)
    # Here 0.11 -> 0.04; over six other data seeds 0.18–0.28 -> 0.04–0.10.
    assert boosted.bias < 0.6 * stump.bias
    for result in (stump, boosted):
        assert result.expected_loss == pytest.approx(result.bias + result.net_variance, abs=1e-12)
        assert set(np.unique(result.main_prediction)) <= {"neg", "pos"}


def test_rounds_are_reproducible_and_reseed_the_learner() -> None:
    X, y, X_test, y_test = _regression(2)
    kwargs = dict(X_test=X_test, y_test=y_test, n_rounds=4)
    forest = RandomForestRegressor(n_estimators=3, random_state=123)
    first = bias_variance_decomposition(forest, X, y, random_state=7, **kwargs)
    again = bias_variance_decomposition(forest, X, y, random_state=7, **kwargs)
    other = bias_variance_decomposition(forest, X, y, random_state=8, **kwargs)
    np.testing.assert_array_equal(first.predictions, again.predictions)
    assert not np.array_equal(first.predictions, other.predictions)
    assert first == again  # the dataclass compares the figures
    assert not hasattr(forest, "members_")  # the prototype itself is never fitted


def test_held_out_split_and_noise_free_targets_follow_it() -> None:
    X, y, _, _ = _regression(3)
    truth = _truth(X)
    result = bias_variance_decomposition(
        DecisionTreeRegressor(max_depth=3),
        X,
        y,
        y_noise_free=truth,
        n_rounds=5,
        test_fraction=0.2,
        random_state=0,
    )
    assert isinstance(result, SquaredLossDecomposition)
    assert result.n_test == 30 and result.predictions.shape == (5, 30)
    # The noise of the held-out rows is the mean of (y − f)² over 30 of the 150 rows: the
    # noise standard deviation is 0.3, so it must be near 0.09 (and is exactly computable).
    assert result.noise is not None and 0.03 < result.noise < 0.2
    total = result.bias_squared + result.variance + result.noise + (result.cross_term or 0.0)
    assert result.expected_loss == pytest.approx(total, rel=1e-12)


def test_callbacks_report_every_round_and_can_stop() -> None:
    X, y, X_test, y_test = _regression(4)
    events: list[ProgressEvent] = []
    bias_variance_decomposition(
        DecisionTreeRegressor(max_depth=2),
        X,
        y,
        X_test=X_test,
        y_test=y_test,
        n_rounds=3,
        callbacks=[events.append],
    )
    assert [(e.done, e.total) for e in events] == [(1, 3), (2, 3), (3, 3)]

    def stop(event: ProgressEvent) -> None:
        raise TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        bias_variance_decomposition(
            DecisionTreeRegressor(), X, y, X_test=X_test, y_test=y_test, callbacks=[stop]
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"loss": "hinge"}, "loss must be"),
        ({"n_rounds": 0}, "n_rounds"),
        ({"X_test": np.zeros((3, 2))}, "both X_test and y_test"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"loss": "0-1", "y_noise_free": np.zeros(150)}, "y_noise_free applies"),
        ({"X_test": np.zeros((3, 5)), "y_test": np.zeros(3)}, "features"),
    ],
)
def test_invalid_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    X, y, _, _ = _regression()
    with pytest.raises(ValueError, match=message):
        bias_variance_decomposition(DecisionTreeRegressor(), X, y, **kwargs)  # type: ignore[arg-type]


def test_matrix_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="shape"):
        squared_loss_decomposition(np.zeros((3, 4)), np.zeros(5))
    with pytest.raises(ValueError, match="non-empty"):
        zero_one_loss_decomposition(np.zeros(4), np.zeros(4))
