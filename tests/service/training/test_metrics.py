"""``service.training.metrics``: the multiclass ROC AUC keeps tied probabilities tied."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm

from service.training.metrics import classification_metrics, ranking_scores


def test_multiclass_auc_keeps_ties_that_renormalising_would_break() -> None:
    # Rows whose sums are 1 - 1.1e-16 or exactly 1 (as a tree's leaf fractions come out):
    # dividing by those sums would make the class scores of 0.1 unequal, and move the macro
    # AUC from 0.414 to 0.398 on these rows.
    rows = np.array([[0.1, 0.2, 0.7], [0.1, 0.3, 0.6], [0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    proba = np.tile(rows, (6, 1))
    y = np.array(["a", "b", "c"])[np.random.default_rng(0).integers(0, 3, proba.shape[0])]
    renormalised = proba / proba.sum(axis=1, keepdims=True)
    assert skm.roc_auc_score(y, renormalised, multi_class="ovr") != pytest.approx(
        skm.roc_auc_score(y, proba, multi_class="ovr"), abs=1e-9
    )

    scored = classification_metrics(y, proba, ["a", "b", "c"])

    assert scored["roc_auc"] == pytest.approx(
        skm.roc_auc_score(y, proba, multi_class="ovr"), abs=1e-12
    )
    assert ranking_scores(proba) is proba


def test_rows_that_do_not_sum_to_one_are_renormalised() -> None:
    proba = np.array([[0.2, 0.2, 0.2], [0.1, 0.5, 0.2]])

    assert np.allclose(ranking_scores(proba).sum(axis=1), 1.0)
