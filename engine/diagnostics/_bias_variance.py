"""Bias–variance decomposition of a learner's test error by bootstrap rounds.

Squared loss splits as Geman, Bienenstock and Doursat (1992) give it; 0-1 loss as Domingos
(2000) does (Kohavi and Wolpert 1996 give another split of it). Bagging lowers the variance
term and leaves the bias (Breiman 1996), which is what these figures let one see.

The learner is refitted on R bootstrap samples of the training set (each standing in for a
fresh training set drawn from the same distribution) and each refit predicts the same test
rows; the spread of those R predictions is the variance, the error of their centre the bias.

Squared loss, for a test row x with target y and predictions ŷ₁..ŷ_R, main prediction
ȳ = mean_r ŷ_r::

    expected loss = mean_r (ŷ_r − y)²  =  (ȳ − y)²  +  mean_r (ŷ_r − ȳ)²
                                           bias²        variance

exactly, for every row; the reported figures average over the test rows. Given the noise-free
targets f(x) = E[y | x], the bias is measured against f and the noise (y − f)² separates::

    expected loss = (ȳ − f)² + variance + (y − f)² + 2 (ȳ − f)(f − y)
                    bias²                  noise      cross term

The cross term has mean zero over the noise, so in expectation loss = bias² + variance +
noise (Geman, Bienenstock and Doursat 1992; Hastie, Tibshirani and Friedman 2009, §7.3); with
one noisy target per row it is small but not zero, and it is reported so the sum is exact.

0-1 loss: Domingos' unified decomposition (Domingos, 2000). The main prediction y_m is the
mode of the R predicted labels; bias B = 1[y_m ≠ y]; variance V = P_r(ŷ_r ≠ y_m). Per row the
expected loss is B + c·V with c = 1 when unbiased and c = −P_r(ŷ_r = y | ŷ_r ≠ y_m) when
biased (−1 for two classes): variance adds to the error on unbiased rows and removes it on
biased ones. Averaged over the rows: expected loss = bias + net variance, net variance =
unbiased variance − (c-weighted) biased variance. Noise is not estimated: the decomposition
is taken against the labels given (pass the Bayes-optimal labels as ``y_test`` to get the
noise-free bias and variance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_target, check_X, resolve_seed_sequence
from engine.base import clone
from engine.callbacks import Callback, ProgressEvent, notify
from engine.parallel import SharedData, make_executor

__all__ = [
    "SquaredLossDecomposition",
    "ZeroOneLossDecomposition",
    "bias_variance_decomposition",
    "squared_loss_decomposition",
    "zero_one_loss_decomposition",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class SquaredLossDecomposition:
    """Squared-loss decomposition, averaged over the test rows.

    ``expected_loss == bias_squared + variance`` without noise-free targets, and
    ``expected_loss == bias_squared + variance + noise + cross_term`` with them, both to
    float precision.

    Attributes
    ----------
    expected_loss : float
        Mean over rounds and rows of (ŷ − y)².
    bias_squared : float
        Mean of (ȳ − f)², f the noise-free target (y itself when not given).
    variance : float
        Mean over rows of the variance of the R predictions (divisor R).
    noise : float or None
        Mean of (y − f)²; None without noise-free targets.
    cross_term : float or None
        2·mean((ȳ − f)(f − y)), zero in expectation; None without noise-free targets.
    n_rounds, n_test : int
    main_prediction : ndarray of shape (n_test,), float64
        ȳ, the mean prediction of every test row.
    predictions : ndarray of shape (n_rounds, n_test), float64
    """

    expected_loss: float
    bias_squared: float
    variance: float
    noise: float | None
    cross_term: float | None
    n_rounds: int
    n_test: int
    main_prediction: FloatArray = field(repr=False, compare=False)
    predictions: FloatArray = field(repr=False, compare=False)


@dataclass(frozen=True)
class ZeroOneLossDecomposition:
    """Domingos' 0-1 loss decomposition, averaged over the test rows.

    ``expected_loss == bias + net_variance`` to float precision, and
    ``variance == unbiased_variance + biased_variance``.

    Attributes
    ----------
    expected_loss : float
        Mean over rounds and rows of 1[ŷ ≠ y].
    bias : float
        Share of rows whose main prediction (the mode) is wrong.
    variance : float
        Mean over rows of P_r(ŷ_r ≠ y_m).
    unbiased_variance : float
        Mean of (1 − B)·V: variance on rows the main prediction gets right; adds to the loss.
    biased_variance : float
        Mean of B·V: variance on rows the main prediction gets wrong.
    net_variance : float
        ``unbiased_variance`` minus the biased variance weighted by P(ŷ = y | ŷ ≠ y_m)
        (for two classes that weight is 1: ``unbiased_variance − biased_variance``).
    n_rounds, n_test : int
    main_prediction : ndarray of shape (n_test,)
        y_m; ties between labels go to the first in sorted order.
    predictions : ndarray of shape (n_rounds, n_test)
    """

    expected_loss: float
    bias: float
    variance: float
    unbiased_variance: float
    biased_variance: float
    net_variance: float
    n_rounds: int
    n_test: int
    main_prediction: NDArray[Any] = field(repr=False, compare=False)
    predictions: NDArray[Any] = field(repr=False, compare=False)


def squared_loss_decomposition(
    predictions: Any, y_true: Any, *, y_noise_free: Any = None
) -> SquaredLossDecomposition:
    """Decompose the squared error of a prediction matrix (see the module docstring).

    Parameters
    ----------
    predictions : array-like of shape (n_rounds, n_test)
        Row r holds the predictions of the model fitted in round r.
    y_true : array-like of shape (n_test,)
        The observed test targets.
    y_noise_free : array-like of shape (n_test,), optional
        f(x) = E[y | x] of each test row, when known (simulated data).
    """
    P = np.asarray(predictions, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 1 or P.shape[1] < 1:
        raise ValueError(
            f"predictions must be a non-empty (n_rounds, n_test) array; got {P.shape}."
        )
    y = _column(y_true, P.shape[1], "y_true")
    main = P.mean(axis=0)
    variance = float(((P - main) ** 2).mean())
    expected_loss = float(((P - y) ** 2).mean())
    if y_noise_free is None:
        bias_squared = float(((main - y) ** 2).mean())
        noise = cross_term = None
    else:
        f = _column(y_noise_free, P.shape[1], "y_noise_free")
        bias_squared = float(((main - f) ** 2).mean())
        noise = float(((y - f) ** 2).mean())
        cross_term = float(2.0 * ((main - f) * (f - y)).mean())
    return SquaredLossDecomposition(
        expected_loss=expected_loss,
        bias_squared=bias_squared,
        variance=variance,
        noise=noise,
        cross_term=cross_term,
        n_rounds=P.shape[0],
        n_test=P.shape[1],
        main_prediction=main,
        predictions=P,
    )


def zero_one_loss_decomposition(predictions: Any, y_true: Any) -> ZeroOneLossDecomposition:
    """Domingos' decomposition of the 0-1 loss of a matrix of predicted labels.

    Parameters
    ----------
    predictions : array-like of shape (n_rounds, n_test)
        Predicted labels, row r from the model fitted in round r.
    y_true : array-like of shape (n_test,)
        The test labels.
    """
    P = np.asarray(predictions)
    if P.ndim != 2 or P.shape[0] < 1 or P.shape[1] < 1:
        raise ValueError(
            f"predictions must be a non-empty (n_rounds, n_test) array; got {P.shape}."
        )
    y = np.asarray(y_true)
    if y.shape != (P.shape[1],):
        raise ValueError(f"y_true must have shape ({P.shape[1]},); got {y.shape}.")
    n_rounds, n_test = P.shape
    labels, codes = np.unique(np.concatenate([P.ravel(), y]), return_inverse=True)
    codes = codes.ravel()
    predicted, target = codes[: P.size].reshape(P.shape), codes[P.size :]
    n_labels = labels.size
    rows = np.arange(n_test)
    votes = np.bincount(
        (rows[None, :] * n_labels + predicted).ravel(), minlength=n_test * n_labels
    ).reshape(n_test, n_labels)
    mode = votes.argmax(axis=1)  # the first maximum: ties go to the smaller label
    agree_main = votes[rows, mode] / n_rounds
    agree_true = votes[rows, target] / n_rounds
    biased = mode != target
    variance = 1.0 - agree_main
    # P(ŷ = y | ŷ ≠ y_m) on biased rows; where every round agrees with y_m, V = 0 anyway.
    off_main = n_rounds - votes[rows, mode]
    weight = np.divide(votes[rows, target], off_main, out=np.zeros(n_test), where=off_main > 0)
    unbiased_variance = float(np.where(biased, 0.0, variance).mean())
    biased_variance = float(np.where(biased, variance, 0.0).mean())
    net_variance = unbiased_variance - float(np.where(biased, weight * variance, 0.0).mean())
    return ZeroOneLossDecomposition(
        expected_loss=float((1.0 - agree_true).mean()),
        bias=float(biased.mean()),
        variance=float(variance.mean()),
        unbiased_variance=unbiased_variance,
        biased_variance=biased_variance,
        net_variance=net_variance,
        n_rounds=n_rounds,
        n_test=n_test,
        main_prediction=labels[mode],
        predictions=P,
    )


def _column(values: Any, n: int, name: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},); got {array.shape}.")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite.")
    return array


def bias_variance_decomposition(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    X_test: Any = None,
    y_test: Any = None,
    y_noise_free: Any = None,
    loss: str = "squared",
    n_rounds: int = 50,
    test_fraction: float = 0.3,
    random_state: Any = None,
    callbacks: list[Callback] | None = None,
) -> SquaredLossDecomposition | ZeroOneLossDecomposition:
    """Estimate bias and variance of ``estimator`` by refitting it on bootstrap samples.

    Each of ``n_rounds`` rounds fits a clone of ``estimator`` on n rows drawn with
    replacement from the training set and predicts the test set; the prediction matrix is
    decomposed by :func:`squared_loss_decomposition` or :func:`zero_one_loss_decomposition`.
    A clone with a ``random_state`` parameter gets a fresh seed each round, so the variance
    includes the learner's own randomness (a random forest's feature draws, say).

    Parameters
    ----------
    estimator : unfitted engine (or scikit-learn) estimator
        Cloned, never fitted itself.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    X_test, y_test : array-like, optional
        The test set. When omitted, a random ``test_fraction`` of the rows of ``(X, y)`` is
        held out as the test set and the rest is the training set.
    y_noise_free : array-like, optional (squared loss only)
        The noise-free targets E[y | x] of the test rows (known for simulated data): one
        per test row, or one per row of ``X`` when the test set is held out of ``X``.
        Enables the noise term.
    loss : {"squared", "0-1"}
        Squared error (regression) or misclassification (classification).
    n_rounds : int
        Bootstrap rounds R; the bias and variance estimates settle as R grows (50 is
        usually enough for comparisons, 200 for stable figures).
    test_fraction : float in (0, 1)
        Share of rows held out when no test set is given.
    random_state : None, int or Generator
    callbacks : list of callables, optional
        Receive a :class:`~engine.callbacks.ProgressEvent` after every round; raising
        :class:`~engine.callbacks.TrainingInterrupted` stops the computation.

    Returns
    -------
    SquaredLossDecomposition or ZeroOneLossDecomposition
    """
    if loss not in ("squared", "0-1"):
        raise ValueError(f"loss must be 'squared' or '0-1'; got {loss!r}.")
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, int) or n_rounds < 1:
        raise ValueError(f"n_rounds must be a positive integer; got {n_rounds!r}.")
    if y_noise_free is not None and loss != "squared":
        raise ValueError(
            "y_noise_free applies to the squared loss; for the 0-1 loss pass the "
            "noise-free (Bayes-optimal) labels as y_test."
        )
    numeric = loss == "squared"
    X = check_X(X)
    y = check_target(y, X.shape[0], numeric=numeric)
    root = resolve_seed_sequence(random_state)
    split_seed, rounds_seed = root.spawn(2)
    if (X_test is None) != (y_test is None):
        raise ValueError("Pass both X_test and y_test, or neither (to hold out test_fraction).")
    if X_test is None:
        X, y, X_test, y_test, y_noise_free = _hold_out(
            X, y, y_noise_free, test_fraction, np.random.default_rng(split_seed)
        )
    else:
        X_test = check_X(X_test, n_features=X.shape[1], name="X_test")
        y_test = check_target(y_test, X_test.shape[0], numeric=numeric)
    predictions = []
    tasks = [(seed, estimator) for seed in rounds_seed.spawn(n_rounds)]
    # Serial here; inside engine.parallel_backend, each round is a task on the cluster.
    with make_executor({"X": X, "y": y, "X_test": X_test}, None, n_rounds) as executor:
        for done, predicted in enumerate(executor.map(_bootstrap_round, tasks), start=1):
            predictions.append(predicted)
            notify(callbacks, ProgressEvent("bias_variance_decomposition", done, n_rounds))
    matrix = np.stack(predictions)
    if loss == "squared":
        return squared_loss_decomposition(matrix, y_test, y_noise_free=y_noise_free)
    return zero_one_loss_decomposition(matrix, y_test)


def _bootstrap_round(shared: SharedData, task: tuple[np.random.SeedSequence, Any]) -> NDArray[Any]:
    """One round: a clone fitted on a bootstrap sample, its predictions of the test set."""
    seed, estimator = task
    X, y = shared["X"], shared["y"]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, X.shape[0], X.shape[0])
    model = clone(estimator)
    if "random_state" in model.get_params(deep=False):
        model.set_params(random_state=int(rng.integers(2**31)))
    model.fit(X[rows], y[rows])
    return np.asarray(model.predict(shared["X_test"]))


def _hold_out(
    X: FloatArray,
    y: NDArray[Any],
    y_noise_free: Any,
    test_fraction: float,
    rng: np.random.Generator,
) -> tuple[FloatArray, NDArray[Any], FloatArray, NDArray[Any], Any]:
    """Split off a random ``test_fraction`` of the rows as the test set."""
    if isinstance(test_fraction, bool) or not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1); got {test_fraction!r}.")
    n = X.shape[0]
    n_test = math.ceil(test_fraction * n)
    if not 1 <= n_test < n:
        raise ValueError(f"Cannot hold out {n_test} of {n} rows as a test set.")
    order = rng.permutation(n)
    test, train = order[:n_test], order[n_test:]
    if y_noise_free is not None:
        y_noise_free = _column(y_noise_free, n, "y_noise_free")[test]
    return X[train], y[train], X[test], y[test], y_noise_free
