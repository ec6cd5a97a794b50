"""Validation splits: stratified holdout and folds."""

from __future__ import annotations

import numpy as np

from service.training.split import fold_assignments, holdout_split


def test_holdout_is_stratified_and_disjoint() -> None:
    y = np.array(["a"] * 80 + ["b"] * 20)
    train, validation = holdout_split(y, 0.25, classification=True, seed=0)
    assert np.intersect1d(train, validation).size == 0
    assert train.size + validation.size == 100
    assert (y[validation] == "a").sum() == 20 and (y[validation] == "b").sum() == 5
    again = holdout_split(y, 0.25, classification=True, seed=0)
    assert np.array_equal(again[1], validation)


def test_holdout_keeps_every_class_in_training() -> None:
    y = np.array(["a"] * 10 + ["b"])
    train, _ = holdout_split(y, 0.5, classification=True, seed=0)
    assert "b" in set(y[train])


def test_folds_balance_classes() -> None:
    y = np.array(["a"] * 30 + ["b"] * 9)
    folds = fold_assignments(y, 3, classification=True, seed=1)
    for fold in range(3):
        assert (y[folds == fold] == "b").sum() == 3
        assert (folds == fold).sum() == 13
    regression = fold_assignments(np.arange(10.0), 4, classification=False, seed=1)
    assert sorted(np.bincount(regression).tolist()) == [2, 2, 3, 3]
