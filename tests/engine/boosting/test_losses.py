"""The boosting losses: gradients, Hessians, F0 and line searches against brute force."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from engine.boosting._losses import (
    Loss,
    NewtonLoss,
    get_loss,
    grouped_weighted_quantile,
    softmax,
)

REGRESSION = ["squared_error", "absolute_error", "huber", "quantile", "poisson"]
CLASSIFICATION = ["log_loss", "exponential", "multinomial"]


def make_loss(name: str) -> Loss:
    if name == "multinomial":
        return get_loss("log_loss", n_classes=3)
    return get_loss(name, n_classes=2, alpha=0.7)


def make_problem(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Targets, raw scores (n, K) and weights suited to the loss."""
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.5, 2.0, n)
    if name == "multinomial":
        y = np.eye(3)[rng.integers(0, 3, n)]
        return y, rng.normal(size=(n, 3)), weights
    if name in ("log_loss", "exponential"):
        return rng.integers(0, 2, n).astype(float), rng.normal(size=(n, 1)), weights
    if name == "poisson":
        return rng.poisson(3.0, n).astype(float), rng.normal(1.0, 0.5, (n, 1)), weights
    return rng.normal(size=n) * 3, rng.normal(size=(n, 1)), weights


@pytest.mark.parametrize("name", [*REGRESSION, *CLASSIFICATION])
def test_gradient_is_the_derivative_of_the_loss(name: str) -> None:
    loss = make_loss(name)
    y, raw, _ = make_problem(name, 200, 0)
    if name == "huber":
        loss.delta = 1.5  # type: ignore[attr-defined]
    gradient = loss.gradient(y, raw)
    assert gradient.shape == raw.shape
    eps = 1e-6
    for k in range(raw.shape[1]):
        up, down = raw.copy(), raw.copy()
        up[:, k] += eps
        down[:, k] -= eps
        numeric = (loss.pointwise(y, up) - loss.pointwise(y, down)) / (2 * eps)
        # Kinks (|y − F| at 0 or δ) have no derivative; rows near one are skipped.
        residual = np.abs(y - raw[:, 0]) if y.ndim == 1 else np.ones(y.shape[0])
        smooth = (residual > 1e-3) & (np.abs(residual - 1.5) > 1e-3)
        np.testing.assert_allclose(gradient[smooth, k], numeric[smooth], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["log_loss", "exponential", "multinomial", "poisson"])
def test_hessian_is_the_derivative_of_the_gradient(name: str) -> None:
    loss = make_loss(name)
    assert isinstance(loss, NewtonLoss)
    y, raw, _ = make_problem(name, 100, 1)
    eps = 1e-6
    hessian = loss.hessian(y, raw)
    for k in range(raw.shape[1]):
        up, down = raw.copy(), raw.copy()
        up[:, k] += eps
        down[:, k] -= eps
        numeric = (loss.gradient(y, up)[:, k] - loss.gradient(y, down)[:, k]) / (2 * eps)
        np.testing.assert_allclose(hessian[:, k], numeric, rtol=1e-5, atol=1e-7)


def brute_force_min(f: Callable[[float], float], centre: float, width: float) -> float:
    """The argmin of a 1-D convex function on a grid, refined twice."""
    best = centre
    for _ in range(4):
        grid = np.linspace(best - width, best + width, 801)
        values = np.array([f(float(g)) for g in grid])
        best = float(grid[values.argmin()])
        width /= 100
    return best


@pytest.mark.parametrize("name", [*REGRESSION, "log_loss", "exponential"])
def test_init_minimises_the_loss(name: str) -> None:
    loss = make_loss(name)
    y, _, weights = make_problem(name, 301, 2)
    if name == "huber":
        loss.delta = 1e9  # type: ignore[attr-defined]
    f0 = float(loss.init_raw(y, weights)[0])

    def objective(c: float) -> float:
        return loss(y, np.full((y.size, 1), c), weights)

    if name == "huber":
        # Friedman's M-regression starts from the median, the minimiser of |y − F|.
        absolute = get_loss("absolute_error")
        assert absolute(y, np.full((y.size, 1), f0), weights) <= min(
            absolute(y, np.full((y.size, 1), c), weights) for c in y
        )
        return
    best = brute_force_min(objective, f0, 5.0)
    assert objective(f0) <= objective(best) + 1e-10


def test_multinomial_init_is_the_prior() -> None:
    loss = make_loss("multinomial")
    y, _, weights = make_problem("multinomial", 300, 3)
    f0 = loss.init_raw(y, weights)
    prior = np.average(y, axis=0, weights=weights)
    np.testing.assert_allclose(softmax(f0[None, :])[0], prior)
    # The prior is where the mean loss has zero gradient in every class.
    gradient = loss.gradient(y, np.tile(f0, (y.shape[0], 1)))
    np.testing.assert_allclose(np.average(gradient, axis=0, weights=weights), 0, atol=1e-12)


@pytest.mark.parametrize("name", ["squared_error", "absolute_error", "quantile"])
def test_line_search_minimises_the_loss_in_each_leaf(name: str) -> None:
    loss = make_loss(name)
    y, raw, weights = make_problem(name, 120, 4)
    leaves = np.random.default_rng(5).integers(1, 4, y.size)  # node 0 holds no rows
    gamma = loss.leaf_values(y, raw, weights, leaves, 4, 0)
    assert gamma[0] == 0.0
    for leaf in (1, 2, 3):
        rows = leaves == leaf
        y_leaf, raw_leaf, w_leaf = y[rows], raw[rows], weights[rows]

        def objective(g: float) -> float:
            return loss(y_leaf, raw_leaf + g, w_leaf)  # noqa: B023

        best = brute_force_min(objective, float(gamma[leaf]), 6.0)
        assert objective(float(gamma[leaf])) <= objective(best) + 1e-10


@pytest.mark.parametrize("name", ["log_loss", "exponential", "multinomial", "poisson"])
def test_newton_line_search_minimises_the_quadratic_model_and_converges(name: str) -> None:
    loss = make_loss(name)
    assert isinstance(loss, NewtonLoss)
    y, raw, weights = make_problem(name, 90, 6)
    rows = slice(0, 90)
    leaves = np.zeros(90, dtype=np.intp)
    k = raw.shape[1] - 1
    gamma = float(loss.leaf_values(y[rows], raw, weights, leaves, 1, k)[0])
    g = np.sum(weights * loss.gradient(y, raw)[:, k])
    h = np.sum(weights * loss.hessian(y, raw)[:, k])
    # One Newton step: the minimiser of the second-order model g·γ + h·γ²/2.
    assert gamma == pytest.approx(loss.step_factor * (-g / h), rel=1e-12)

    def objective(c: float) -> float:
        shifted = raw.copy()
        shifted[:, k] += c
        return loss(y, shifted, weights)

    assert objective(gamma) < objective(0.0)
    if name == "multinomial":
        return  # Friedman's (K − 1)/K factor makes the step deliberately short
    # Repeated Newton steps reach the brute-force minimiser of the loss itself.
    total, shifted = 0.0, raw.copy()
    for _ in range(30):
        step = float(loss.leaf_values(y, shifted, weights, leaves, 1, k)[0])
        total += step
        shifted[:, k] += step
    assert total == pytest.approx(brute_force_min(objective, total, 3.0), abs=1e-5)


def test_huber_one_step_improves_on_the_median() -> None:
    loss = make_loss("huber")
    y, raw, weights = make_problem("huber", 400, 7)
    y[:20] += 50.0  # outliers, which Huber's loss resists
    loss.prepare_stage(y, raw, weights)
    leaves = np.zeros(y.size, dtype=np.intp)
    gamma = float(loss.leaf_values(y, raw, weights, leaves, 1, 0)[0])
    median = float(grouped_weighted_quantile(y - raw[:, 0], weights, leaves, 1, 0.5)[0])

    def objective(c: float) -> float:
        return loss(y, raw + c, weights)

    best = brute_force_min(objective, gamma, 5.0)
    assert objective(gamma) <= objective(median) + 1e-12
    assert abs(gamma - best) < 0.1 * loss.delta  # type: ignore[attr-defined]


def test_grouped_weighted_quantile_matches_a_naive_loop() -> None:
    rng = np.random.default_rng(8)
    values = rng.normal(size=500)
    weights = rng.uniform(0.1, 3.0, 500)
    groups = rng.integers(0, 7, 500)
    for q in (0.1, 0.5, 0.9):
        fast = grouped_weighted_quantile(values, weights, groups, 8, q)
        for g in range(8):
            rows = groups == g
            if not rows.any():
                assert fast[g] == 0.0
                continue
            order = np.argsort(values[rows])
            cumulative = np.cumsum(weights[rows][order])
            index = np.searchsorted(cumulative, q * cumulative[-1] * (1 - 1e-12))
            assert fast[g] == values[rows][order][index]


def test_exponential_loss_rejects_more_than_two_classes() -> None:
    with pytest.raises(ValueError, match="binary"):
        get_loss("exponential", n_classes=3)
