"""The folds and splits shared by engine.combine and engine.fusion."""

from __future__ import annotations

import numpy as np
import pytest

from engine.combine._folds import NO_FOLD, Splits, cv_folds, fold_splits, resolve_splits


def test_weighted_folds_equal_unweighted_folds_when_every_weight_is_positive() -> None:
    """Fusion passes weights, combine does not: the folds must not differ because of it."""
    y = np.random.default_rng(0).integers(0, 3, size=97)
    for seed in range(5):
        unweighted = cv_folds(4, classes=y, random_state=seed)
        weighted = cv_folds(4, classes=y, weights=np.full(97, 0.5), random_state=seed)
        np.testing.assert_array_equal(weighted, unweighted)
        plain = cv_folds(4, n_samples=97, random_state=seed)
        np.testing.assert_array_equal(cv_folds(4, weights=np.ones(97), random_state=seed), plain)


def test_rows_of_zero_weight_take_no_fold() -> None:
    y = np.array([0, 0, 0, 1, 1, 1, 0, 1])
    weights = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    folds = cv_folds(2, classes=y, weights=weights, random_state=0)
    assert (folds[weights == 0] == NO_FOLD).all()
    kept = weights > 0
    counts = [np.bincount(folds[kept & (y == c)], minlength=2) for c in (0, 1)]
    assert all(abs(c[0] - c[1]) <= 1 for c in counts)
    splits = Splits.from_folds(folds, 2)
    assert splits.train[:, weights == 0].all() and not splits.test[:, weights == 0].any()
    np.testing.assert_array_equal(splits.held_out, kept)
    with pytest.raises(ValueError, match="of positive weight: n_samples=6"):
        cv_folds(7, classes=y, weights=weights)


def test_explicit_splits_equal_the_folds_they_come_from() -> None:
    folds = cv_folds(3, n_samples=10, random_state=1)
    by_count = resolve_splits(3, n_samples=10, classes=None, random_state=1)
    explicit = resolve_splits(fold_splits(folds, 3), n_samples=10, classes=None, random_state=None)
    np.testing.assert_array_equal(explicit.train, by_count.train)
    np.testing.assert_array_equal(explicit.test, by_count.test)


def test_partition_is_required_only_when_asked() -> None:
    hold_out = [(np.arange(5, 10), np.arange(3))]
    splits = resolve_splits(hold_out, n_samples=10, classes=None, random_state=0, partition=False)
    np.testing.assert_array_equal(splits.held_out, np.arange(10) < 3)
    with pytest.raises(ValueError, match="not held out"):
        resolve_splits(hold_out, n_samples=10, classes=None, random_state=0)
    uncovered = [(np.arange(5, 10), np.arange(5)), (np.r_[0:5, 9], np.arange(5, 9))]
    with pytest.raises(ValueError, match="do not cover every row"):
        resolve_splits(uncovered, n_samples=10, classes=None, random_state=0)
    for partition in (True, False):
        with pytest.raises(ValueError, match="overlap"):
            resolve_splits(
                [(np.arange(5, 10), np.arange(6)), (np.arange(5), np.arange(5, 10))],
                n_samples=10,
                classes=None,
                random_state=0,
                partition=partition,
            )
        with pytest.raises(ValueError, match="outside"):
            resolve_splits(
                [(np.arange(5, 11), np.arange(5))],
                n_samples=10,
                classes=None,
                random_state=0,
                partition=partition,
            )
