"""engine.metrics against scikit-learn's metrics of the same names, plus edge cases."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from sklearn.linear_model import LinearRegression, LogisticRegression

from engine import metrics

TOL = 1e-12
N = 300


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def labels_pair(seed: int, k: int, strings: bool = False) -> tuple[NDArray[Any], NDArray[Any]]:
    r = rng(seed)
    y_true = r.integers(0, k, N)
    # Agree with y_true 60% of the time so every score is far from its extremes.
    y_pred = np.where(r.random(N) < 0.6, y_true, r.integers(0, k, N))
    if strings:
        names = np.array(["cat", "dog", "eel", "fox", "gnu"])[:k]
        return names[y_true], names[y_pred]
    return y_true, y_pred


def weights(seed: int = 1) -> NDArray[np.float64]:
    return rng(seed).uniform(0.1, 3.0, N)


# --------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_accuracy_matches_sklearn(k: int, strings: bool, weighted: bool) -> None:
    y_true, y_pred = labels_pair(k, k, strings)
    w = weights() if weighted else None
    ours = metrics.accuracy_score(y_true, y_pred, sample_weight=w)
    assert isinstance(ours, float)
    assert ours == pytest.approx(skm.accuracy_score(y_true, y_pred, sample_weight=w), abs=TOL)


def test_classification_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        metrics.accuracy_score([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        metrics.accuracy_score([0, 1], [0, 1], sample_weight=[1.0])
    with pytest.raises(TypeError, match="mix of strings and numbers"):
        metrics.accuracy_score(["1", "0"], [1, 0])
    with pytest.raises(ValueError, match="empty"):
        metrics.accuracy_score([], [])
    with pytest.raises(ValueError, match="1-dimensional"):
        metrics.accuracy_score(np.zeros((3, 2)), np.zeros((3, 2)))


# --------------------------------------------------------------------------- confusion matrix


@pytest.mark.parametrize(
    "labels", [None, [2, 0, 1], [2, 0], [0, 1, 2, 7]], ids=["none", "reordered", "subset", "absent"]
)
@pytest.mark.parametrize("weighted", [False, True])
def test_confusion_matrix_matches_sklearn(labels: list[int] | None, weighted: bool) -> None:
    y_true, y_pred = labels_pair(3, 3)
    w = weights() if weighted else None
    ours = metrics.confusion_matrix(y_true, y_pred, labels=labels, sample_weight=w)
    expected = skm.confusion_matrix(y_true, y_pred, labels=labels, sample_weight=w)
    assert ours.dtype == (np.float64 if weighted else np.int64)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=TOL)


def test_confusion_matrix_string_labels() -> None:
    y_true, y_pred = labels_pair(5, 3, strings=True)
    np.testing.assert_array_equal(
        metrics.confusion_matrix(y_true, y_pred), skm.confusion_matrix(y_true, y_pred)
    )
    ours = metrics.confusion_matrix(y_true, y_pred, labels=["eel", "cat"])
    np.testing.assert_array_equal(ours, skm.confusion_matrix(y_true, y_pred, labels=["eel", "cat"]))


def test_confusion_matrix_label_errors() -> None:
    with pytest.raises(ValueError, match="at least one label"):
        metrics.confusion_matrix([0, 1], [1, 0], labels=[])
    with pytest.raises(ValueError, match="must be in y_true"):
        metrics.confusion_matrix([0, 1], [1, 0], labels=[5])
    with pytest.raises(ValueError, match="unique"):
        metrics.confusion_matrix([0, 1], [1, 0], labels=[0, 1, 0])


# --------------------------------------------------------------------------- precision/recall/F1

PRF = [
    (metrics.precision_score, skm.precision_score),
    (metrics.recall_score, skm.recall_score),
    (metrics.f1_score, skm.f1_score),
]
PRF_IDS = ["precision", "recall", "f1"]


@pytest.mark.parametrize(("ours", "theirs"), PRF, ids=PRF_IDS)
@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
@pytest.mark.parametrize("labels", [None, [3, 1], [0, 1, 2, 3, 9]], ids=["all", "subset", "absent"])
@pytest.mark.parametrize("weighted", [False, True])
def test_prf_multiclass_matches_sklearn(
    ours: Any, theirs: Any, average: str, labels: list[int] | None, weighted: bool
) -> None:
    y_true, y_pred = labels_pair(11, 4)
    w = weights() if weighted else None
    kwargs: dict[str, Any] = dict(
        average=average, labels=labels, sample_weight=w, zero_division=0.0
    )
    assert ours(y_true, y_pred, **kwargs) == pytest.approx(
        theirs(y_true, y_pred, **kwargs), abs=TOL
    )


@pytest.mark.parametrize(("ours", "theirs"), PRF, ids=PRF_IDS)
@pytest.mark.parametrize(
    ("strings", "pos_label"), [(False, 1), (False, 0), (True, "dog"), (True, "cat")]
)
def test_prf_binary_matches_sklearn(ours: Any, theirs: Any, strings: bool, pos_label: Any) -> None:
    y_true, y_pred = labels_pair(12, 2, strings)
    w = weights()
    for sample_weight in (None, w):
        kwargs: dict[str, Any] = dict(
            average="binary", pos_label=pos_label, sample_weight=sample_weight
        )
        assert ours(y_true, y_pred, **kwargs) == pytest.approx(
            theirs(y_true, y_pred, **kwargs), abs=TOL
        )


@pytest.mark.parametrize(("ours", "theirs"), PRF, ids=PRF_IDS)
@pytest.mark.parametrize("zero_division", [0.0, 1.0, np.nan])
@pytest.mark.parametrize("average", ["macro", "micro", "weighted", "binary"])
def test_prf_zero_division_matches_sklearn(
    ours: Any, theirs: Any, zero_division: float, average: str
) -> None:
    # Label 2 is never predicted (precision 0/0) and label 3 never true (recall 0/0); with
    # binary, the positive label 1 is neither predicted nor true (every ratio 0/0).
    cases: list[tuple[list[int], list[int], list[int] | None]] = (
        [([0, 0, 0, 0], [0, 0, 0, 0], None)]
        if average == "binary"
        else [([0, 1, 2, 2, 1], [0, 1, 1, 3, 1], None), ([0, 0, 1], [0, 0, 1], [0, 1, 4])]
    )
    for y_true, y_pred, labels in cases:
        kwargs: dict[str, Any] = dict(average=average, zero_division=zero_division)
        if labels is not None:
            kwargs["labels"] = labels
        np.testing.assert_allclose(
            ours(y_true, y_pred, **kwargs), theirs(y_true, y_pred, **kwargs), atol=TOL
        )


def test_prf_all_undefined_with_nan_zero_division_is_nan() -> None:
    assert math.isnan(metrics.precision_score([0, 0], [0, 0], labels=[1], zero_division=np.nan))


def test_prf_defaults_to_macro() -> None:
    y_true, y_pred = labels_pair(13, 3)
    assert metrics.f1_score(y_true, y_pred) == pytest.approx(
        skm.f1_score(y_true, y_pred, average="macro"), abs=TOL
    )


def test_prf_errors() -> None:
    with pytest.raises(ValueError, match="average='binary'"):
        metrics.f1_score([0, 1, 2], [0, 1, 2], average="binary")
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        metrics.f1_score(["a", "b"], ["b", "a"], average="binary")
    with pytest.raises(ValueError, match="average must be one of"):
        metrics.f1_score([0, 1], [0, 1], average="samples")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="zero_division"):
        metrics.f1_score([0, 1], [0, 1], zero_division=0.5)


# --------------------------------------------------------------------------- log loss


def probabilities(seed: int, k: int) -> NDArray[np.float64]:
    return rng(seed).dirichlet(np.ones(k), N)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_log_loss_matches_sklearn(k: int, weighted: bool) -> None:
    y_true, _ = labels_pair(20 + k, k)
    proba = probabilities(21, k)
    w = weights() if weighted else None
    expected = skm.log_loss(y_true, proba, sample_weight=w)
    assert metrics.log_loss(y_true, proba, sample_weight=w) == pytest.approx(expected, abs=TOL)
    if k == 2:  # the probability of the second class alone
        assert metrics.log_loss(y_true, proba[:, 1], sample_weight=w) == pytest.approx(
            expected, abs=TOL
        )


def test_log_loss_string_labels_and_labels_argument() -> None:
    y_true, _ = labels_pair(22, 3, strings=True)
    proba = probabilities(23, 4)
    labels = ["cat", "dog", "eel", "fox"]  # "fox" never occurs in y_true
    assert metrics.log_loss(y_true, proba, labels=labels) == pytest.approx(
        skm.log_loss(y_true, proba, labels=labels), abs=TOL
    )


def test_log_loss_clips_certain_mistakes_like_sklearn() -> None:
    y_true = [0, 1, 1, 0]
    proba = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    ours = metrics.log_loss(y_true, proba)
    assert math.isfinite(ours)
    assert ours == pytest.approx(skm.log_loss(y_true, proba), abs=TOL)


def test_log_loss_warns_on_unnormalised_rows() -> None:
    with pytest.warns(UserWarning, match="sum to one"):
        metrics.log_loss([0, 1], [[0.5, 0.6], [0.2, 0.8]])


def test_log_loss_errors() -> None:
    with pytest.raises(ValueError, match="only one label"):
        metrics.log_loss([1, 1], [[0.2, 0.8], [0.3, 0.7]])
    with pytest.raises(ValueError, match="3 columns but there are 2 classes"):
        metrics.log_loss([0, 1], [[0.2, 0.7, 0.1], [0.3, 0.6, 0.1]])
    with pytest.raises(ValueError, match="sorted"):
        metrics.log_loss([0, 1], [[0.2, 0.8], [0.3, 0.7]], labels=[1, 0])
    with pytest.raises(ValueError, match="not in labels"):
        metrics.log_loss([0, 2], [[0.2, 0.8], [0.3, 0.7]], labels=[0, 1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metrics.log_loss([0, 1], [[1.2, -0.2], [0.3, 0.7]])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        metrics.log_loss([0, 1, 1], [[0.2, 0.8], [0.3, 0.7]])


# --------------------------------------------------------------------------- ROC AUC


def mann_whitney_auc(y: NDArray[np.bool_], scores: NDArray[np.float64]) -> float:
    """Naive reference: rank-sum statistic with midranks for ties."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    first_rank = np.cumsum(counts) - counts + 1
    midranks = (first_rank + (counts - 1) / 2.0)[inverse]
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    return float((midranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@pytest.mark.parametrize("decimals", [None, 1], ids=["distinct", "ties"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_auc_matches_sklearn(decimals: int | None, weighted: bool) -> None:
    r = rng(30)
    y_true = r.integers(0, 2, N)
    scores = r.random(N) + 0.3 * y_true
    if decimals is not None:
        scores = np.round(scores, decimals)
    w = weights() if weighted else None
    expected = skm.roc_auc_score(y_true, scores, sample_weight=w)
    assert metrics.roc_auc_score(y_true, scores, sample_weight=w) == pytest.approx(
        expected, abs=TOL
    )
    if not weighted:
        assert mann_whitney_auc(y_true == 1, scores) == pytest.approx(expected, abs=TOL)


def test_binary_auc_positive_class_is_second_sorted_label() -> None:
    r = rng(31)
    y_true = np.array(["yes", "no"])[r.integers(0, 2, N)]
    p_yes = np.clip(r.random(N) * 0.8 + 0.2 * (y_true == "yes"), 0, 1)
    proba = np.column_stack([1 - p_yes, p_yes])  # columns: "no", "yes"
    expected = skm.roc_auc_score(y_true, p_yes)
    assert metrics.roc_auc_score(y_true, p_yes) == pytest.approx(expected, abs=TOL)
    assert metrics.roc_auc_score(y_true, proba) == pytest.approx(expected, abs=TOL)
    # labels makes a two-class matrix usable even when y_true holds both labels or not.
    assert metrics.roc_auc_score(y_true, proba, labels=["no", "yes"]) == pytest.approx(
        expected, abs=TOL
    )


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_multiclass_auc_matches_sklearn_ovr_macro(k: int, weighted: bool) -> None:
    y_true, _ = labels_pair(32 + k, k)
    proba = np.round(probabilities(33, k), 2)  # rounding creates ties
    proba /= proba.sum(axis=1, keepdims=True)
    w = weights() if weighted else None
    expected = skm.roc_auc_score(y_true, proba, multi_class="ovr", average="macro", sample_weight=w)
    assert metrics.roc_auc_score(y_true, proba, sample_weight=w) == pytest.approx(expected, abs=TOL)
    labels = list(range(k))
    assert metrics.roc_auc_score(y_true, proba, labels=labels, sample_weight=w) == pytest.approx(
        skm.roc_auc_score(y_true, proba, multi_class="ovr", labels=labels, sample_weight=w),
        abs=TOL,
    )


def test_auc_ignores_zero_weight_samples() -> None:
    y_true = np.array([0, 1, 0, 1, 1])
    scores = np.array([0.1, 0.9, 0.8, 0.3, 0.5])
    w = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    keep = w > 0
    assert metrics.roc_auc_score(y_true, scores, sample_weight=w) == pytest.approx(
        metrics.roc_auc_score(y_true[keep], scores[keep]), abs=TOL
    )


def test_auc_errors() -> None:
    with pytest.raises(ValueError, match="Only one class"):
        metrics.roc_auc_score([1, 1, 1], [0.2, 0.5, 0.9])
    with pytest.raises(ValueError, match="Only one class"):
        metrics.roc_auc_score([0, 1, 1], [0.2, 0.5, 0.9], sample_weight=[0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        metrics.roc_auc_score([0, 1, 1], [0.2, 0.5])
    with pytest.raises(ValueError, match="no samples in y_true"):
        metrics.roc_auc_score([0, 1, 1], np.full((3, 3), 1 / 3), labels=[0, 1, 2])
    with pytest.raises(ValueError, match="3 classes"):
        metrics.roc_auc_score([0, 1, 2], [0.2, 0.5, 0.9])
    with pytest.raises(ValueError, match="sum to 1"):
        metrics.roc_auc_score([0, 1, 2], np.full((3, 3), 0.5))
    with pytest.raises(ValueError, match="NaN"):
        metrics.roc_auc_score([0, 1, 1], [0.2, np.nan, 0.9])


score_lists = st.lists(
    st.tuples(st.booleans(), st.integers(-5, 5)), min_size=2, max_size=40
).filter(lambda rows: 0 < sum(label for label, _ in rows) < len(rows))


@settings(max_examples=60, deadline=None)
@given(score_lists)
def test_auc_is_invariant_under_monotone_transforms(rows: list[tuple[bool, int]]) -> None:
    y = np.array([label for label, _ in rows])
    s = np.array([score for _, score in rows], dtype=np.float64)  # few values: many ties
    auc = metrics.roc_auc_score(y, s)
    assert 0.0 <= auc <= 1.0
    assert metrics.roc_auc_score(y, np.exp(s) * 3.0 + 1.0) == pytest.approx(auc, abs=TOL)
    assert metrics.roc_auc_score(y, np.arctan(s)) == pytest.approx(auc, abs=TOL)
    assert metrics.roc_auc_score(y, -s) == pytest.approx(1.0 - auc, abs=TOL)
    assert auc == pytest.approx(mann_whitney_auc(y, s), abs=TOL)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(0.01, 10.0)), min_size=1))
def test_accuracy_is_a_fraction(rows: list[tuple[int, int, float]]) -> None:
    y_true, y_pred, w = (np.array(column) for column in zip(*rows, strict=True))
    for sample_weight in (None, w):
        score = metrics.accuracy_score(y_true, y_pred, sample_weight=sample_weight)
        assert 0.0 <= score <= 1.0
    assert metrics.accuracy_score(y_true, y_true) == 1.0


# --------------------------------------------------------------------------- regression


def targets(seed: int = 40) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r = rng(seed)
    y_true = r.normal(size=N)
    return y_true, y_true + r.normal(scale=0.5, size=N)


REGRESSION = [
    (metrics.mean_squared_error, skm.mean_squared_error),
    (metrics.root_mean_squared_error, skm.root_mean_squared_error),
    (metrics.mean_absolute_error, skm.mean_absolute_error),
    (metrics.r2_score, skm.r2_score),
]


@pytest.mark.parametrize(("ours", "theirs"), REGRESSION, ids=["mse", "rmse", "mae", "r2"])
@pytest.mark.parametrize("weighted", [False, True])
def test_regression_metrics_match_sklearn(ours: Any, theirs: Any, weighted: bool) -> None:
    y_true, y_pred = targets()
    w = weights() if weighted else None
    value = ours(y_true, y_pred, sample_weight=w)
    assert isinstance(value, float)
    assert value == pytest.approx(theirs(y_true, y_pred, sample_weight=w), abs=TOL)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "expected"),
    [([2.0, 2.0, 2.0], [2.0, 2.0, 2.0], 1.0), ([2.0, 2.0, 2.0], [2.0, 2.5, 2.0], 0.0)],
    ids=["constant-perfect", "constant-imperfect"],
)
def test_r2_constant_target_is_forced_finite_like_sklearn(
    y_true: list[float], y_pred: list[float], expected: float
) -> None:
    assert metrics.r2_score(y_true, y_pred) == expected == skm.r2_score(y_true, y_pred)


def test_r2_of_one_sample_is_nan() -> None:
    assert math.isnan(metrics.r2_score([1.0], [2.0]))


@pytest.mark.parametrize("weighted", [False, True])
def test_poisson_deviance_matches_sklearn(weighted: bool) -> None:
    r = rng(41)
    mu = np.exp(r.normal(size=N))
    y_true = r.poisson(mu).astype(np.float64)  # contains zeros
    w = weights() if weighted else None
    assert (y_true == 0).any()
    assert metrics.mean_poisson_deviance(y_true, mu, sample_weight=w) == pytest.approx(
        skm.mean_poisson_deviance(y_true, mu, sample_weight=w), abs=TOL
    )


def test_regression_errors() -> None:
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        metrics.mean_squared_error([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        metrics.mean_absolute_error([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="y_pred > 0"):
        metrics.mean_poisson_deviance([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="y_true >= 0"):
        metrics.mean_poisson_deviance([-1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="non-negative"):
        metrics.mean_squared_error([1.0, 2.0], [1.0, 2.0], sample_weight=[1.0, -1.0])


# --------------------------------------------------------------------------- scorers


@pytest.fixture(scope="module")
def fitted_classifiers() -> dict[int, tuple[Any, NDArray[np.float64], NDArray[Any]]]:
    fitted = {}
    for k in (2, 3):
        r = rng(50 + k)
        X = r.normal(size=(200, 4))
        y = np.array(["a", "b", "c"])[:k][np.argmax(X[:, :k] + r.normal(size=(200, k)), axis=1)]
        fitted[k] = (LogisticRegression().fit(X, y), X, y)
    return fitted


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(
    ("name", "sklearn_name"),
    [
        ("accuracy", "accuracy"),
        ("neg_log_loss", "neg_log_loss"),
        ("roc_auc", "roc_auc_ovr"),
        ("f1_macro", "f1_macro"),
    ],
)
def test_classification_scorers_match_sklearn(
    fitted_classifiers: dict[int, Any], k: int, name: str, sklearn_name: str
) -> None:
    model, X, y = fitted_classifiers[k]
    if name == "roc_auc" and k == 2:
        sklearn_name = "roc_auc"
    w = rng(54).uniform(0.5, 2.0, X.shape[0])
    ours, theirs = metrics.get_scorer(name), skm.get_scorer(sklearn_name)
    assert ours(model, X, y) == pytest.approx(theirs(model, X, y), abs=TOL)
    assert ours(model, X, y, sample_weight=w) == pytest.approx(
        theirs(model, X, y, sample_weight=w), abs=TOL
    )


@pytest.mark.parametrize(
    "name",
    ["r2", "neg_mean_squared_error", "neg_root_mean_squared_error", "neg_mean_absolute_error"],
)
def test_regression_scorers_match_sklearn(name: str) -> None:
    r = rng(55)
    X = r.normal(size=(100, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + r.normal(size=100)
    model = LinearRegression().fit(X, y)
    assert metrics.get_scorer(name)(model, X, y) == pytest.approx(
        skm.get_scorer(name)(model, X, y), abs=TOL
    )


def test_scorer_sees_classes_missing_from_y(fitted_classifiers: dict[int, Any]) -> None:
    model, X, y = fitted_classifiers[3]
    keep = y != "c"  # y lacks a class the model predicts probabilities for
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = metrics.get_scorer("neg_log_loss")(model, X[keep], y[keep])
    assert value == pytest.approx(
        -skm.log_loss(y[keep], model.predict_proba(X[keep]), labels=model.classes_), abs=TOL
    )


def test_get_scorer_registry() -> None:
    assert metrics.get_scorer_names() == sorted(
        [
            "accuracy",
            "f1_macro",
            "neg_log_loss",
            "neg_mean_absolute_error",
            "neg_mean_squared_error",
            "neg_root_mean_squared_error",
            "r2",
            "roc_auc",
        ]
    )

    def custom(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        return 0.5

    assert metrics.get_scorer(custom) is custom
    with pytest.raises(ValueError, match="Unknown scoring 'auc'"):
        metrics.get_scorer("auc")
    with pytest.raises(TypeError):
        metrics.get_scorer(3)  # type: ignore[arg-type]


def test_default_scorer_follows_estimator_type() -> None:
    class Classifier:
        _estimator_type = "classifier"

    class Regressor:
        _estimator_type = "regressor"

    assert metrics.default_scorer(Classifier()) is metrics.get_scorer("accuracy")
    assert metrics.default_scorer(Regressor()) is metrics.get_scorer("r2")
    # scikit-learn >= 1.6 estimators declare their type only through tags.
    assert metrics.default_scorer(LogisticRegression()) is metrics.get_scorer("accuracy")
    assert metrics.default_scorer(LinearRegression()) is metrics.get_scorer("r2")
    with pytest.raises(TypeError, match="neither a classifier nor a regressor"):
        metrics.default_scorer(object())
